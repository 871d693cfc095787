"""The role matrix of the contract: which roles may take which action."""

from enum import StrEnum

from bots.models import Role


class Action(StrEnum):
    READ_BOTS = "read bots"
    WRITE_BOTS = "create, update or delete bots"
    WRITE_EVENTS = "create or cancel events"
    # Messages, conversations and users are held to the same roles as events.
    WRITE_MESSAGES = "write messages, conversations and users"
    READ_RUNTIME = "read events, files and passages"
    READ_CHAT = "read messages, conversations and users"
    WRITE_FILES = "write files"
    READ_MEMBERS = "read the workspace's members"
    READ_AUDIT = "read audit records"
    MANAGE_MEMBERS = "manage members and settings"


_BUILDERS = frozenset({Role.OWNER, Role.ADMINISTRATOR, Role.MANAGER, Role.DEVELOPER})
_READERS = _BUILDERS | {Role.VIEWER}
_MEMBERS = frozenset(Role)

ALLOWED_ROLES: dict[Action, frozenset[Role]] = {
    Action.READ_BOTS: _READERS,
    Action.WRITE_BOTS: _BUILDERS,
    Action.WRITE_EVENTS: _BUILDERS,
    Action.WRITE_MESSAGES: _BUILDERS,
    Action.READ_RUNTIME: _READERS,
    Action.READ_CHAT: _READERS,
    Action.WRITE_FILES: _BUILDERS,
    # Every member, billing too, may see the others: it is how one finds an owner to ask.
    Action.READ_MEMBERS: _MEMBERS,
    Action.READ_AUDIT: frozenset({Role.OWNER, Role.ADMINISTRATOR, Role.MANAGER}),
    Action.MANAGE_MEMBERS: frozenset({Role.OWNER, Role.ADMINISTRATOR}),
}


def role_allows(role: str, action: Action) -> bool:
    return role in ALLOWED_ROLES[action]
