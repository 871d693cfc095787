"""Bot messages with a `schedule`, and `POST /v1/chat/messages/get-or-create`:
answered at once, out of every list, read and listener until due, then made
by the workers' claim (events/engine/claims.py) at the time they were due."""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from django.utils import timezone
from ulid import ULID

from bots.models import Bot, Conversation, Message, User
from chat.live.bus import conversation_channel
from chat.models import ScheduledMessage
from chat.services.scheduled_messages import scheduled_messages_publish
from events.engine.claims import deliveries_claim
from platform_site.api.fields import format_timestamp
from tests.conftest import assert_error
from tests.factories import ConversationFactory, EventFactory, ParticipantFactory, UserFactory

pytestmark = pytest.mark.django_db

URL = "/v1/chat/messages"
GET_OR_CREATE = "/v1/chat/messages/get-or-create"
T = TypeVar("T")
TEXT = {"type": "text", "text": "Reminder: your order ships today"}


class RecordingBus:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def publish(self, channel: str, message: str) -> None:
        self.sent.append((channel, json.loads(message)))


@pytest.fixture
def bus(monkeypatch: pytest.MonkeyPatch) -> RecordingBus:
    recording = RecordingBus()
    monkeypatch.setattr("chat.live.publish.live_bus", lambda: recording)
    return recording


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run a call, then what waits on its commit (publishing to listeners)."""

    def run(call: Callable[[], T]) -> T:
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


@pytest.fixture
def conversation(bot: Bot) -> Conversation:
    return ConversationFactory(bot=bot, chat_id="support-1")


@pytest.fixture
def author(bot: Bot, conversation: Conversation) -> User:
    user = UserFactory(bot=bot, chat_id="the-bot")
    ParticipantFactory(conversation=conversation, user=user)
    return user


def body(conversation: Conversation, author: User, **fields: Any) -> dict[str, Any]:
    return {"conversationId": conversation.id, "userId": author.id, "payload": TEXT, **fields}


def schedule_in(seconds: float) -> dict[str, Any]:
    return {"dateTime": format_timestamp(timezone.now() + timedelta(seconds=seconds))}


def created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.content
    message: dict[str, Any] = response.json()["message"]
    return message


def listed(client: Any, conversation: Conversation) -> list[str]:
    response = client.get(URL, {"conversationId": conversation.id})
    assert response.status_code == 200, response.content
    return [m["id"] for m in response.json()["messages"]]


def id_time(message_id: str) -> datetime:
    return ULID.from_str(message_id.removeprefix("msg_")).datetime


# --- scheduling ---------------------------------------------------------------------------


def test_a_scheduled_message_is_answered_as_it_will_be(runtime_client, conversation, author):
    due = timezone.now() + timedelta(hours=1)
    message = created(
        runtime_client().post(
            URL,
            body(
                conversation, author, tags={"k": "v"}, schedule={"dateTime": format_timestamp(due)}
            ),
            format="json",
        )
    )
    assert message["createdAt"] == message["updatedAt"] == format_timestamp(due)
    # Its id sorts where it will appear: a ULID of the due time.
    assert abs(id_time(message["id"]) - due) < timedelta(milliseconds=1)
    assert (message["payload"], message["tags"], message["direction"]) == (
        TEXT,
        {"k": "v"},
        "outgoing",
    )
    scheduled = ScheduledMessage.objects.get()
    assert (scheduled.id, scheduled.conversation_id, scheduled.user_id) == (
        message["id"],
        conversation.id,
        author.id,
    )


def test_until_due_it_is_in_no_list_read_or_listener(runtime_client, conversation, author, bus):
    client = runtime_client()
    message = created(
        client.post(URL, body(conversation, author, schedule={"delay": 60_000}), format="json")
    )
    assert Message.objects.count() == 0
    assert listed(client, conversation) == []
    assert_error(client.get(f"{URL}/{message['id']}"), 404, "ResourceNotFound")
    assert bus.sent == []


def test_when_due_the_claim_makes_it_at_the_time_it_was_due(
    runtime_client, conversation, author, bus, committed
):
    client = runtime_client()
    message = created(
        client.post(URL, body(conversation, author, schedule={"delay": 60_000}), format="json")
    )
    ScheduledMessage.objects.update(due_at=timezone.now() - timedelta(seconds=1))
    due = ScheduledMessage.objects.get().due_at
    message_id = message["id"]

    committed(lambda: deliveries_claim(limit=10))

    assert not ScheduledMessage.objects.exists()
    row = Message.objects.get(id=message_id)
    assert row.is_bot and (row.conversation_id, row.user_id) == (conversation.id, author.id)
    assert row.created_at == due
    conversation.refresh_from_db()
    assert conversation.updated_at >= due
    assert listed(client, conversation) == [message_id]
    assert client.get(f"{URL}/{message_id}").status_code == 200
    # Streamed once, with chat ids, as a bot message.
    assert bus.sent == [
        (
            conversation_channel(conversation.id),
            {
                "type": "message_created",
                "data": {
                    "id": message_id,
                    "createdAt": format_timestamp(due),
                    "conversationId": "support-1",
                    "userId": "the-bot",
                    "payload": TEXT,
                    "isBot": True,
                },
            },
        )
    ]
    # And it is no event for the bot, which wrote it.
    deliveries_claim(limit=10)
    assert Message.objects.count() == 1


def test_a_message_not_due_yet_is_left_and_its_time_is_the_next_due(
    runtime_client, conversation, author
):
    created(
        runtime_client().post(
            URL, body(conversation, author, schedule={"delay": 30_000}), format="json"
        )
    )
    claimed = deliveries_claim(limit=10)
    assert ScheduledMessage.objects.count() == 1 and Message.objects.count() == 0
    due = ScheduledMessage.objects.get().due_at.timestamp()
    assert claimed.next_due == pytest.approx(due)


def test_the_next_due_is_the_earliest_of_events_and_messages(
    runtime_client, bot, conversation, author
):
    later = timezone.now() + timedelta(seconds=90)
    EventFactory(bot=bot, status="scheduled", due_at=later)
    created(
        runtime_client().post(
            URL, body(conversation, author, schedule={"delay": 45_000}), format="json"
        )
    )
    message_due = ScheduledMessage.objects.get().due_at.timestamp()
    assert deliveries_claim(limit=10).next_due == pytest.approx(message_due)


def test_due_messages_are_made_earliest_first_and_in_batches(
    bot, conversation, author, bus, committed
):
    now = timezone.now()
    for seconds in (3, 1, 2):
        due = now - timedelta(seconds=seconds)
        ScheduledMessage.objects.create(
            id=f"msg_{ULID.from_datetime(due)}",
            bot=bot,
            conversation=conversation,
            user=author,
            type="text",
            payload=TEXT,
            due_at=due,
        )
    assert committed(lambda: scheduled_messages_publish(now=now, limit=2)) == 2
    assert committed(lambda: scheduled_messages_publish(now=now, limit=2)) == 1
    assert committed(lambda: scheduled_messages_publish(now=now, limit=2)) == 0
    made = list(Message.objects.order_by("id").values_list("created_at", flat=True))
    assert made == sorted(made) and len(made) == 3
    assert [sent["data"]["createdAt"] for _, sent in bus.sent] == [
        format_timestamp(m) for m in made
    ]


def test_deleting_the_conversation_first_cancels_it(runtime_client, conversation, author, bus):
    created(
        runtime_client().post(
            URL, body(conversation, author, schedule={"delay": 60_000}), format="json"
        )
    )
    conversation.delete()
    assert not ScheduledMessage.objects.exists()
    assert scheduled_messages_publish(now=timezone.now() + timedelta(hours=1)) == 0
    assert bus.sent == []


@pytest.mark.parametrize(
    "schedule",
    [{"delay": 0}, {"dateTime": "2020-01-01T00:00:00.000Z"}],
    ids=["no-delay", "past"],
)
def test_a_schedule_due_now_makes_the_message_at_once(
    runtime_client, conversation, author, bus, committed, schedule
):
    client = runtime_client()
    message = created(
        committed(
            lambda: client.post(URL, body(conversation, author, schedule=schedule), format="json")
        )
    )
    assert listed(client, conversation) == [message["id"]]
    assert not ScheduledMessage.objects.exists()
    assert len(bus.sent) == 1


@pytest.mark.parametrize(
    "schedule",
    [
        {},
        {"delay": 1000, "dateTime": "2030-01-01T00:00:00Z"},
        {"delay": -1},
        {"delay": "soon"},
        {"dateTime": "tomorrow"},
        {"dateTime": "2030-01-01T00:00:00"},
        {"at": "2030-01-01T00:00:00Z"},
        "2030-01-01T00:00:00Z",
        {"delay": 10**20},
    ],
)
def test_a_bad_schedule_is_refused_and_nothing_stored(
    runtime_client, conversation, author, schedule
):
    response = runtime_client().post(
        URL, body(conversation, author, schedule=schedule), format="json"
    )
    assert_error(response, 400, "InvalidPayload")
    assert not ScheduledMessage.objects.exists() and not Message.objects.exists()


def test_a_scheduled_message_still_checks_its_references(runtime_client, bot, author):
    other = ConversationFactory()
    response = runtime_client().post(
        URL,
        {
            "conversationId": other.id,
            "userId": author.id,
            "payload": TEXT,
            "schedule": {"delay": 1000},
        },
        format="json",
    )
    assert_error(response, 400, "ReferenceNotFound")
    assert not ScheduledMessage.objects.exists()


def test_a_viewer_may_not_schedule(runtime_client, conversation, author):
    response = runtime_client("viewer").post(
        URL, body(conversation, author, schedule={"delay": 1000}), format="json"
    )
    assert_error(response, 403, "Forbidden")


# --- get-or-create ------------------------------------------------------------------------


def get_or_create(client: Any, payload: dict[str, Any], status: int) -> dict[str, Any]:
    response = client.post(GET_OR_CREATE, payload, format="json")
    assert response.status_code == status, response.content
    answer: dict[str, Any] = response.json()
    assert set(answer) == {"message", "meta"}
    assert answer["meta"] == {"created": status == 201}
    return answer["message"]


def test_get_or_create_makes_it_once(runtime_client, conversation, author):
    client = runtime_client()
    tags = {"external": "42"}
    first = get_or_create(client, body(conversation, author, tags=tags), 201)
    again = get_or_create(client, body(conversation, author, tags=tags), 200)
    assert again == first
    assert Message.objects.count() == 1


def test_without_discriminating_tags_all_tags_must_be_the_same(
    runtime_client, conversation, author
):
    client = runtime_client()
    get_or_create(client, body(conversation, author, tags={"a": "1", "b": "2"}), 201)
    get_or_create(client, body(conversation, author, tags={"a": "1"}), 201)
    get_or_create(client, body(conversation, author, tags={"a": "1", "b": "2"}), 200)
    assert Message.objects.count() == 2


def test_discriminating_tags_match_on_those_alone(runtime_client, conversation, author):
    client = runtime_client()
    first = get_or_create(client, body(conversation, author, tags={"a": "1", "b": "2"}), 201)
    found = get_or_create(
        client,
        body(conversation, author, tags={"a": "1", "b": "other"}, discriminateByTags=["a"]),
        200,
    )
    assert found["id"] == first["id"]
    get_or_create(
        client,
        body(conversation, author, tags={"a": "2"}, discriminateByTags=["a"]),
        201,
    )


def test_tags_given_null_or_empty_are_left_out(runtime_client, conversation, author):
    message = get_or_create(
        runtime_client(), body(conversation, author, tags={"a": "1", "b": None, "c": ""}), 201
    )
    assert message["tags"] == {"a": "1"}


def test_with_nothing_to_match_on_a_new_message_is_made(runtime_client, conversation, author):
    client = runtime_client()
    get_or_create(client, body(conversation, author), 201)
    get_or_create(client, body(conversation, author), 201)
    get_or_create(client, body(conversation, author, tags={"a": "1"}, discriminateByTags=[]), 201)
    assert Message.objects.count() == 3


def test_a_message_of_another_conversation_does_not_match(
    runtime_client, bot, conversation, author
):
    client = runtime_client()
    get_or_create(client, body(conversation, author, tags={"a": "1"}), 201)
    elsewhere = ConversationFactory(bot=bot)
    get_or_create(client, body(elsewhere, author, tags={"a": "1"}), 201)


def test_a_scheduled_message_matches_before_it_is_due(runtime_client, conversation, author):
    client = runtime_client()
    first = get_or_create(
        client, body(conversation, author, tags={"a": "1"}, schedule={"delay": 60_000}), 201
    )
    again = get_or_create(
        client, body(conversation, author, tags={"a": "1"}, schedule={"delay": 60_000}), 200
    )
    assert again == first
    assert ScheduledMessage.objects.count() == 1 and not Message.objects.exists()


def test_the_payload_is_needed_only_to_create(runtime_client, conversation, author):
    client = runtime_client()
    first = get_or_create(client, body(conversation, author, tags={"a": "1"}), 201)
    without = {
        "conversationId": conversation.id,
        "userId": author.id,
        "type": "text",
        "tags": {"a": "1"},
    }
    assert get_or_create(client, without, 200)["id"] == first["id"]
    response = client.post(GET_OR_CREATE, {**without, "tags": {"a": "2"}}, format="json")
    assert_error(response, 400, "InvalidPayload")
    assert Message.objects.count() == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"discriminateByTags": "a"},
        {"discriminateByTags": [""]},
        {"discriminateByTags": [1]},
        {"tags": {"a": 1}},
        {"unknown": True},
    ],
)
def test_get_or_create_refuses_a_bad_body(runtime_client, conversation, author, fields):
    response = runtime_client().post(
        GET_OR_CREATE, body(conversation, author, **fields), format="json"
    )
    assert_error(response, 400, "InvalidPayload")
    assert not Message.objects.exists()


def test_get_or_create_is_not_a_message_id(runtime_client):
    """The route is not read as GET /v1/chat/messages/{id}."""
    assert_error(runtime_client().get(GET_OR_CREATE), 405, "MethodNotFound")


def test_a_viewer_may_not_get_or_create(runtime_client, conversation, author):
    response = runtime_client("viewer").post(
        GET_OR_CREATE, body(conversation, author), format="json"
    )
    assert_error(response, 403, "Forbidden")


def test_ulid_of_a_far_due_time_is_valid(runtime_client, conversation, author):
    due = datetime(2999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    message = created(
        runtime_client().post(
            URL,
            body(conversation, author, schedule={"dateTime": format_timestamp(due)}),
            format="json",
        )
    )
    assert abs(id_time(message["id"]) - due) < timedelta(milliseconds=1)


def test_a_claim_told_not_to_look_leaves_due_messages_and_their_time_out(
    runtime_client, bot, conversation, author
):
    # The engine looks at the clock's other work in a while, not at every
    # claim (events/engine/loop.py, CLOCK_WORK_INTERVAL).
    created(
        runtime_client().post(
            URL, body(conversation, author, schedule={"delay": 45_000}), format="json"
        )
    )
    ScheduledMessage.objects.update(due_at=timezone.now() - timedelta(seconds=1))
    claimed = deliveries_claim(limit=10, clock_work=False)
    assert (claimed.looked_at_clock_work, claimed.clock_work_due, claimed.next_due) == (
        False,
        None,
        None,
    )
    assert ScheduledMessage.objects.count() == 1 and Message.objects.count() == 0

    later = timezone.now() + timedelta(seconds=30)
    ScheduledMessage.objects.update(due_at=later)
    looked = deliveries_claim(limit=10)
    assert looked.looked_at_clock_work
    assert looked.clock_work_due == looked.next_due == pytest.approx(later.timestamp())
