"""What chat reads, split by noun: users, conversations, participants,
messages, custom events and scheduled messages. The chat interface's readers
(`chat_…`) see what their key's user may see, by chat ids; the runtime API's
see what the bot owns, by runtime ids."""
