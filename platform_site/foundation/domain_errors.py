"""What a service refuses, said without HTTP in mind.

Services and selectors raise these; whoever called them decides what the
refusal becomes: the API's exception handler maps each kind to the contract's
error type and status (platform_site/api/exception_handler.py), the Django
admin shows the message, a management command prints it. The message is for
humans and says what was wrong, and where (`conversationId: …`).
"""

from typing import ClassVar


class DomainError(Exception):
    default_message: ClassVar[str] = "The request cannot be carried out"

    def __init__(self, message: str | None = None):
        self.message = message or self.default_message
        super().__init__(self.message)


class NotFound(DomainError):
    """The object asked for does not exist, or is not the caller's to see."""

    default_message = "The requested object was not found"


class MissingReference(DomainError):
    """An object the request refers to (by an id in its body) does not exist
    or belongs to someone else."""

    default_message = "A referenced object was not found"


class InvalidValue(DomainError):
    """A value given to be written is not acceptable."""

    default_message = "A value is invalid"


class InvalidFilter(DomainError):
    """A filter, sort or page position of a read is not acceptable."""

    default_message = "A filter is invalid"


class TooLarge(DomainError):
    """A value to be written is over its size limit."""

    default_message = "A value is too large"


class MalformedId(DomainError):
    """An id is not of the form of the kind of object it should name."""

    default_message = "The identifier is malformed"


class AlreadyExists(DomainError):
    """The object to be made exists already (a caller-chosen id or key is taken)."""

    default_message = "The object already exists"


class NotPermitted(DomainError):
    """The caller may not do this, whoever they are to the object."""

    default_message = "This action is not permitted"
