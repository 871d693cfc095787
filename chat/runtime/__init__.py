"""The runtime API's chat routes (/v1/chat/messages, conversations, users): what a bot calls."""
