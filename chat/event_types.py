"""The types of the events the chat interface records for a bot, and of the
messages its live stream carries: names of the wire, in one place."""

MESSAGE_CREATED = "message_created"
CUSTOM_EVENT = "custom"
MESSAGE_DELETED = "message_deleted"
# A message the bot changed (the runtime API's updateMessage); the official
# webchat client names the signal so.
MESSAGE_UPDATED = "message_updated"
PARTICIPANT_ADDED = "participant_added"
PARTICIPANT_REMOVED = "participant_removed"
EVENT_CREATED = "event_created"
# A state whose expiry passed (chat/services/state_expiry.py).
STATE_EXPIRED = "state_expired"
# An end user gave, changed or took back feedback on a message (the
# official webchat's thumbs): chat/services/feedback.py.
MESSAGE_FEEDBACK = "message_feedback"
