"""Per-minute rollups of events and deliveries, kept by beat for the Django
admin's dashboard: a page reads minutes, never the events table."""
