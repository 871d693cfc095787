"""The chat interface under {chat_url}/{webhookId}: what a bot's end users call."""
