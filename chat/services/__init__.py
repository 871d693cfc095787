"""What chat writes, split by noun: connections, users, conversations,
participants, messages (users' through the chat interface, bots' through the
runtime API), custom events and scheduled messages."""
