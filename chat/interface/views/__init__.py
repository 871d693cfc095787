"""The chat interface's resources, one viewset each (mapped in chat/interface/urls.py)."""
