"""factory_boy factories for every model the API touches."""

from datetime import datetime, timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from bots.models import (
    Bot,
    Conversation,
    Integration,
    IntegrationInstallation,
    Membership,
    Message,
    Participant,
    Role,
    User,
    Workflow,
    Workspace,
)
from bots.services.tokens import access_token_create
from chat.keys import user_key_issue
from chat.models import ChatConnection, ScheduledMessage, State, StateType
from events.models import WAITING_STATUSES, AttemptOutcome, DeliveryAttempt, Event, EventStatus
from files.models import File, FileStatus, Passage
from platform_site.foundation.ids import new_id_at


class AccountFactory(factory.django.DjangoModelFactory[Any]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"account{n}@example.test")
    email = factory.SelfAttribute("username")


class WorkspaceFactory(factory.django.DjangoModelFactory[Workspace]):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"Workspace {n}")


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    account = factory.SubFactory(AccountFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    role = Role.DEVELOPER


class BotFactory(factory.django.DjangoModelFactory[Bot]):
    class Meta:
        model = Bot

    workspace = factory.SubFactory(WorkspaceFactory)
    name = factory.Sequence(lambda n: f"Bot {n}")
    tags: Any = factory.LazyFunction(dict)


class IntegrationFactory(factory.django.DjangoModelFactory[Integration]):
    class Meta:
        model = Integration

    name = factory.Sequence(lambda n: f"integration-{n}")


class InstallationFactory(factory.django.DjangoModelFactory[IntegrationInstallation]):
    class Meta:
        model = IntegrationInstallation

    bot = factory.SubFactory(BotFactory)
    integration = factory.SubFactory(IntegrationFactory)
    alias = factory.Sequence(lambda n: f"alias{n}")


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User

    bot = factory.SubFactory(BotFactory)
    chat_id = factory.LazyAttribute(lambda o: o.id)
    id = factory.Sequence(lambda n: f"user_01J000000000000000000{n:05d}")


class ConversationFactory(factory.django.DjangoModelFactory[Conversation]):
    class Meta:
        model = Conversation

    bot = factory.SubFactory(BotFactory)
    id = factory.Sequence(lambda n: f"conv_01J000000000000000000{n:05d}")
    chat_id = factory.LazyAttribute(lambda o: o.id)


class ParticipantFactory(factory.django.DjangoModelFactory[Participant]):
    class Meta:
        model = Participant

    conversation = factory.SubFactory(ConversationFactory)
    user = factory.SubFactory(UserFactory, bot=factory.SelfAttribute("..conversation.bot"))


class MessageFactory(factory.django.DjangoModelFactory[Message]):
    class Meta:
        model = Message

    conversation = factory.SubFactory(ConversationFactory)
    bot = factory.SelfAttribute("conversation.bot")
    user = factory.SubFactory(UserFactory, bot=factory.SelfAttribute("..conversation.bot"))
    type = "text"
    payload: Any = factory.LazyFunction(lambda: {"type": "text", "text": "hello"})


class ScheduledMessageFactory(factory.django.DjangoModelFactory[ScheduledMessage]):
    """A bot message due in an hour."""

    class Meta:
        model = ScheduledMessage

    id = factory.Sequence(lambda n: f"msg_01J000000000000000000{n:05d}")
    conversation = factory.SubFactory(ConversationFactory)
    bot = factory.SelfAttribute("conversation.bot")
    user = factory.SubFactory(UserFactory, bot=factory.SelfAttribute("..conversation.bot"))
    type = "text"
    payload: Any = factory.LazyFunction(lambda: {"type": "text", "text": "later"})
    due_at = factory.LazyFunction(lambda: timezone.now() + timedelta(hours=1))


class WorkflowFactory(factory.django.DjangoModelFactory[Workflow]):
    class Meta:
        model = Workflow

    bot = factory.SubFactory(BotFactory)
    name = "onboarding"


class StateFactory(factory.django.DjangoModelFactory[State]):
    """A state of the bot itself; pass `conversation`, `user` or `workflow`
    (with their `type` and `target_id`) for one of theirs."""

    class Meta:
        model = State

    bot = factory.SubFactory(BotFactory)
    type = StateType.BOT.value
    target_id = factory.SelfAttribute("bot.id")
    name = "session"
    payload: Any = factory.LazyFunction(lambda: {"step": 1})
    created_at = factory.LazyFunction(timezone.now)
    updated_at = factory.SelfAttribute("created_at")


class EventFactory(factory.django.DjangoModelFactory[Event]):
    class Meta:
        model = Event

    bot = factory.SubFactory(BotFactory)
    type = "custom"
    payload: Any = factory.LazyFunction(dict)
    status = EventStatus.PENDING
    due_at = factory.Faker("date_time", tzinfo=__import__("datetime").UTC)
    next_attempt_at = factory.LazyAttribute(
        lambda o: o.due_at if o.status in WAITING_STATUSES else None
    )


def event_attempted_at(bot: Bot, moment: datetime, *, status: str, **fields: Any) -> Event:
    """An event made and last changed at `moment` (its id says when, as a
    real one's does), with one attempt at delivering it then."""
    event = EventFactory(bot=bot, status=status, id=new_id_at("evt", moment), **fields)
    # updated_at is set on every save; only an update can put it in the past.
    Event.objects.filter(id=event.id).update(updated_at=moment)
    DeliveryAttempt.objects.create(
        event=event,
        bot=bot,
        number=1,
        started_at=moment,
        duration_ms=5,
        url="https://bot.example/hook",
        status_code=503,
        outcome=AttemptOutcome.RETRY,
    )
    return event


class FileFactory(factory.django.DjangoModelFactory[File]):
    class Meta:
        model = File

    bot = factory.SubFactory(BotFactory)
    key = factory.Sequence(lambda n: f"docs/file-{n}.txt")
    size = 100
    content_type = "text/plain"
    status = FileStatus.INDEXING_COMPLETED


class PassageFactory(factory.django.DjangoModelFactory[Passage]):
    class Meta:
        model = Passage

    file = factory.SubFactory(FileFactory)
    position = factory.Sequence(lambda n: n)
    content = factory.Sequence(lambda n: f"Passage {n}")


class ChatConnectionFactory(factory.django.DjangoModelFactory[ChatConnection]):
    class Meta:
        model = ChatConnection

    bot = factory.SubFactory(BotFactory)


def token_for(account: Any, **kwargs: Any) -> str:
    """A raw access token for `account`."""
    return access_token_create(account=account, **kwargs)[1]


def member_token(workspace: Workspace, role: str = Role.DEVELOPER) -> str:
    """A raw token of a new account holding `role` in `workspace`."""
    membership = MembershipFactory(workspace=workspace, role=role)
    return token_for(membership.account)


def user_key(connection: ChatConnection, user: User) -> str:
    return user_key_issue(connection=connection, chat_user_id=user.chat_id)
