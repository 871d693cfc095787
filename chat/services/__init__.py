"""What the chat interface changes, split by noun: connections, users,
conversations, participants, messages and custom events."""
