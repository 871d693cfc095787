"""Ownership checks: the object a request refers to by an id in its body (an
integration by its name), if the bot owns it. Events and chat both link what
they write to a bot's conversations, users, messages, workflows and
integrations through these."""

from functools import cache
from typing import TypeVar, cast

from django.db import connection
from django.db.models import Model

from bots.models import Conversation, IntegrationInstallation, Message, User, Workflow
from platform_site.foundation.domain_errors import MissingReference
from platform_site.foundation.sql.row_select import instance_from_row, select_list

ModelT = TypeVar("ModelT", bound=Model)


@cache
def _owned_sql(model: type[Model], vendor: str, column: str) -> str:
    # Written once per model: on a create that names a conversation, the
    # ORM's compilation of this lookup cost more than the rest of the view.
    quote = connection.ops.quote_name
    return (
        f"SELECT {select_list(model, 'o')} FROM {quote(model._meta.db_table)} o"
        f" WHERE o.{quote(column)} = %s AND o.{quote('bot_id')} = %s"
    )


def _owned_row(
    model: type[ModelT], *, bot_id: str, value: str, column: str = "id"
) -> ModelT | None:
    with connection.cursor() as cursor:
        cursor.execute(_owned_sql(model, connection.vendor, column), [value, bot_id])
        row = cursor.fetchone()
    return None if row is None else cast(ModelT, instance_from_row(model, row))


def _owned(model: type[ModelT], *, bot_id: str, object_id: str, field: str) -> ModelT:
    found = _owned_row(model, bot_id=bot_id, value=object_id)
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


def user_by_chat_id(*, bot_id: str, chat_id: str) -> User | None:
    """The bot's user with this chat id, if any (the bot's own user, on each
    of its replies)."""
    return _owned_row(User, bot_id=bot_id, value=chat_id, column="chat_id")


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
