"""The hot path's hand-built SQL: platform_site.foundation.sql.row_insert stores what the
ORM would, rows written together stand or fall together, and
platform_site.foundation.sql.row_select (through chat's one-query lookup) reads back what
the ORM would."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bots.models import Conversation, Message, Participant, User
from chat.selectors.conversations import conversation_reference_and_author
from events.models import Event, EventStatus
from platform_site.foundation.domain_errors import MissingReference, NotPermitted
from platform_site.foundation.sql.row_insert import (
    insert_statement,
    row_insert,
    rows_write,
    update_statement,
)
from tests.factories import BotFactory, ConversationFactory, ParticipantFactory, UserFactory

pytestmark = pytest.mark.django_db


def new_message(participant: Participant, text: str) -> Message:
    """A participant's text message, not stored yet."""
    conversation = participant.conversation
    return Message(
        bot_id=conversation.bot_id,
        conversation=conversation,
        user=participant.user,
        type="text",
        payload={"type": "text", "text": text},
        is_bot=False,
    )


def new_event(bot_id: str, *, conversation_id: str) -> Event:
    """A pending event of a conversation, not stored yet."""
    now = timezone.now()
    return Event(
        bot_id=bot_id,
        type="t",
        payload={},
        status=EventStatus.PENDING,
        due_at=now,
        next_attempt_at=now,
        conversation_id=conversation_id,
    )


def test_an_inserted_event_reads_back_as_the_orm_would_have_stored_it():
    bot = BotFactory()
    now = timezone.now()
    payload = {"text": 'héllo \u2028 "quoted"', "n": 2**53, "nested": [{"a": None}]}
    event = Event(
        bot=bot,
        type="order.created",
        payload=payload,
        status=EventStatus.PENDING,
        due_at=now,
        next_attempt_at=now,
    )
    row_insert(event)
    assert not event._state.adding
    stored = Event.objects.get(pk=event.pk)
    assert stored.payload == payload
    assert stored.bot_id == bot.id
    assert stored.created_at == event.created_at and stored.updated_at == event.updated_at
    assert stored.created_at is not None
    assert stored.attempt_count == 0 and stored.lease == 0
    assert stored.failure_reason is None and stored.conversation_id is None


def test_rows_written_together_are_all_stored():
    participant = ParticipantFactory()
    conversation = participant.conversation
    message = new_message(participant, "hi")
    later = conversation.updated_at + timedelta(minutes=5)
    rows_write(
        insert_statement(message),
        update_statement(Conversation, conversation.pk, updated_at=later),
    )
    assert Message.objects.get(pk=message.pk).payload == {"type": "text", "text": "hi"}
    assert Conversation.objects.get(pk=conversation.pk).updated_at == later


@pytest.mark.skipif(connection.vendor != "postgresql", reason="one statement on PostgreSQL only")
def test_on_postgresql_rows_written_together_are_one_statement():
    conversation = ConversationFactory()
    event = new_event(conversation.bot_id, conversation_id=conversation.pk)
    with CaptureQueriesContext(connection) as queries:
        rows_write(
            update_statement(Conversation, conversation.pk, updated_at=timezone.now()),
            insert_statement(event),
        )
    assert len(queries) == 1
    assert queries[0]["sql"].startswith("WITH w0 AS (UPDATE")


@pytest.mark.django_db(transaction=True)
def test_when_one_row_fails_none_is_stored():
    """The last row names a conversation that does not exist: the message
    before it must not be left behind (on PostgreSQL the statement fails
    whole; elsewhere the transaction rolls back)."""
    participant = ParticipantFactory()
    conversation = participant.conversation
    message = new_message(participant, "lost")
    orphan = new_event(conversation.bot_id, conversation_id="conv_01JZZZZZZZZZZZZZZZZZZZZZZZ")
    with pytest.raises(IntegrityError, match="(?i)foreign key"):
        rows_write(insert_statement(message), insert_statement(orphan))
    assert not Message.objects.filter(pk=message.pk).exists()
    assert not Event.objects.filter(pk=orphan.pk).exists()


def test_inside_a_transaction_the_rows_follow_it():
    participant = ParticipantFactory()
    message = new_message(participant, "rolled back")

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        row_insert(message)
        raise Abort
    assert not Message.objects.filter(pk=message.pk).exists()


def test_the_reference_and_author_read_back_as_the_orm_reads_them():
    participant = ParticipantFactory(
        conversation__tags={"topic": "billing"}, user__tags={"tier": "gold"}, user__name="Ana"
    )
    key_user = User.objects.only("id", "bot_id", "chat_id").get(pk=participant.user_id)
    conversation, author = conversation_reference_and_author(
        user=key_user, chat_id=participant.conversation.chat_id
    )
    assert conversation == participant.conversation
    expected = Conversation.objects.get(pk=conversation.pk)
    for field in Conversation._meta.concrete_fields:
        assert getattr(conversation, field.attname) == getattr(expected, field.attname)
    profile = User.objects.get(pk=author.pk)
    for field in User._meta.concrete_fields:
        assert getattr(author, field.attname) == getattr(profile, field.attname)
    assert author.tags == {"tier": "gold"} and author.name == "Ana"
    assert author.created_at.tzinfo is not None


def test_the_reference_and_author_refusals():
    participant = ParticipantFactory()
    stranger = UserFactory(bot=participant.conversation.bot)
    with pytest.raises(MissingReference):
        conversation_reference_and_author(user=stranger, chat_id="no-such-conversation")
    with pytest.raises(NotPermitted):
        conversation_reference_and_author(user=stranger, chat_id=participant.conversation.chat_id)
    gone = participant.user
    chat_id = participant.conversation.chat_id
    User.objects.filter(pk=gone.pk).delete()
    # Its participations went with it: not a participant any more.
    with pytest.raises(NotPermitted):
        conversation_reference_and_author(user=gone, chat_id=chat_id)
