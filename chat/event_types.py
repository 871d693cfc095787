"""The types of the events the chat interface records for a bot, and of the
messages its live stream carries: names of the wire, in one place."""

MESSAGE_CREATED = "message_created"
CUSTOM_EVENT = "custom"
MESSAGE_DELETED = "message_deleted"
PARTICIPANT_ADDED = "participant_added"
PARTICIPANT_REMOVED = "participant_removed"
EVENT_CREATED = "event_created"
