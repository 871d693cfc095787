"""Ownership checks: the object a request refers to by an id in its body (an
integration by its name), if the bot owns it. Events and chat both link what
they write to a bot's conversations, users, messages, workflows and
integrations through these."""

from typing import TypeVar

from django.db.models import Model

from bots.models import Conversation, IntegrationInstallation, Message, User, Workflow
from platform_site.domain_errors import MissingReference

ModelT = TypeVar("ModelT", bound=Model)


def _owned(model: type[ModelT], *, bot_id: str, object_id: str, field: str) -> ModelT:
    found = model._default_manager.filter(bot_id=bot_id, id=object_id).first()
    if found is None:
        raise MissingReference(
            f"{field}: {model._meta.verbose_name} {object_id!r} does not exist in this bot"
        )
    return found


def conversation_reference_get(
    *, bot_id: str, conversation_id: str, field: str = "conversationId"
) -> Conversation:
    return _owned(Conversation, bot_id=bot_id, object_id=conversation_id, field=field)


def user_reference_get(*, bot_id: str, user_id: str, field: str = "userId") -> User:
    return _owned(User, bot_id=bot_id, object_id=user_id, field=field)


def message_reference_get(*, bot_id: str, message_id: str, field: str = "messageId") -> Message:
    return _owned(Message, bot_id=bot_id, object_id=message_id, field=field)


def workflow_reference_get(*, bot_id: str, workflow_id: str, field: str = "workflowId") -> Workflow:
    return _owned(Workflow, bot_id=bot_id, object_id=workflow_id, field=field)


def integration_reference_get(
    *, bot_id: str, name: str | None, field: str = "integrationName"
) -> IntegrationInstallation | None:
    """The installation on the bot of the integration a body names by its
    name, None when it names none (the first installed, when it is installed
    under several aliases)."""
    if name is None:
        return None
    found = (
        IntegrationInstallation.objects.filter(bot_id=bot_id, integration__name=name)
        .select_related("integration")
        .order_by("id")
        .first()
    )
    if found is None:
        raise MissingReference(f"{field}: integration {name!r} is not installed on this bot")
    return found
