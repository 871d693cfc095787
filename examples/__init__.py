"""Example programs that use the platform from outside."""
