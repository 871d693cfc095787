"""The live stream of a conversation: what its listeners receive, fanned out
through a bus (Redis publish/subscribe, or in-process on embedded defaults)."""
