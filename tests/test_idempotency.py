"""Idempotency-Key on the POSTs that create (platform_site/api/idempotency.py): a retry is
answered the first answer and creates nothing, on every such route; a key is
its credential's alone; error answers are not kept; of two twins the second
to keep its answer makes nothing; expired keys count as absent and are
purged; and concurrent twins never make two objects, against real servers.
On PostgreSQL a keyed create out of a transaction writes its rows with its
answer in one statement: no round trip more than without a key, with the
same guarantees (a twin waits for it, a crash leaves nothing)."""

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import Model
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.test import APIClient

import events.services.events
import events.views
from bots.models import Bot, Conversation, IdempotencyKey, Membership, Message, Participant, User
from bots.services.idempotency_keys import idempotency_keys_purge_expired
from bots.tasks import purge_expired_idempotency_keys
from chat.keys import user_key_issue
from chat.models import ChatConnection, State
from events.models import Event
from events.services.events import event_build
from platform_site.api.errors import IdempotencyMismatch
from platform_site.api.idempotency import idempotent_run, request_fingerprint
from platform_site.foundation.secret_fields import UndecryptableSecret, secret_seal, secret_unseal
from platform_site.foundation.sql.row_insert import row_insert
from tests.conftest import admin_api, assert_error, runtime_api
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    EventFactory,
    MembershipFactory,
    ParticipantFactory,
    UserFactory,
    member_token,
    token_for,
    user_key,
)
from tests.servers import READ_TIMEOUT, celery_queue, servers  # noqa: F401

REPLAYED = "Idempotent-Replayed"
EVENT = {"type": "order.created", "payload": {"order": 1}}
TEXT = {"type": "text", "text": "hello"}


def keyed(key: str, **extra: Any) -> dict[str, Any]:
    return {"HTTP_IDEMPOTENCY_KEY": key, **extra}


@dataclass
class Chat:
    connection: ChatConnection
    alice: User
    bob: User
    conversation: Conversation

    @property
    def base(self) -> str:
        return f"/chat/{self.connection.webhook_id}"

    def client(self, user: User | None = None) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_X_USER_KEY=user_key(self.connection, user or self.alice))
        return client


@pytest.fixture
def chat(bot: Bot) -> Chat:
    connection = ChatConnectionFactory(bot=bot)
    alice = UserFactory(bot=bot, chat_id="alice")
    bob = UserFactory(bot=bot, chat_id="bob")
    conversation = ConversationFactory(bot=bot, chat_id="room-1", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    return Chat(connection=connection, alice=alice, bob=bob, conversation=conversation)


@pytest.fixture
def runtime(bot: Bot) -> APIClient:
    return runtime_api(member_token(bot.workspace), bot.id)


def post_event(client: APIClient, key: str, body: Any = EVENT, path: str = "/v1/chat/events"):
    return client.post(path, body, format="json", **keyed(key))


# --- A retry -------------------------------------------------------------


@pytest.mark.django_db
def test_a_retry_gets_the_first_answer_and_creates_nothing(runtime):
    first = post_event(runtime, "order-1")
    assert first.status_code == 201, first.content
    assert REPLAYED not in first.headers

    retry = post_event(runtime, "order-1")

    assert retry.status_code == 201
    assert retry.content == first.content
    assert retry[REPLAYED] == "true"
    assert retry["Content-Type"] == first["Content-Type"]
    # Returned from the view, so finalize_response dressed it as any answer.
    assert retry["Allow"] == first["Allow"]
    assert Event.objects.count() == 1


@pytest.mark.django_db
def test_without_a_key_every_post_creates(runtime):
    for _ in range(2):
        assert runtime.post("/v1/chat/events", EVENT, format="json").status_code == 201
    assert Event.objects.count() == 2
    assert not IdempotencyKey.objects.exists()


@pytest.mark.django_db
def test_the_kept_answer_is_its_status_body_and_content_type(runtime):
    first = post_event(runtime, "order-1")
    row = IdempotencyKey.objects.get()
    assert row.status_code == 201
    assert secret_unseal(bytes(row.response_body)) == first.content
    assert row.response_headers == {"Content-Type": first["Content-Type"]}
    assert abs(row.expires_at - row.created_at - timedelta(hours=24)) < timedelta(seconds=1)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({**EVENT, "type": "order.updated"}, "/v1/chat/events"),
        (EVENT, "/v1/chat/events?source=retry"),
    ],
    ids=["another body", "another query"],
)
def test_a_key_reused_with_another_request_is_422(runtime, body, path):
    assert post_event(runtime, "order-1").status_code == 201
    body = assert_error(post_event(runtime, "order-1", body, path), 422, "IdempotencyMismatch")
    assert "Idempotency-Key" in body["message"]
    assert Event.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "key",
    ["", "x" * 256, "caf\xe9", "tab\there", "del\x7f"],
    ids=["empty", "too long", "not ascii", "control", "delete"],
)
def test_a_malformed_key_is_400(runtime, key):
    body = assert_error(post_event(runtime, key), 400, "InvalidPayload")
    assert "Idempotency-Key" in body["message"]
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


@pytest.mark.django_db
def test_any_printable_ascii_key_of_up_to_255_characters_is_taken(runtime):
    key = ("A z~!" * 51)[:255]
    assert post_event(runtime, key).status_code == 201
    assert post_event(runtime, key)[REPLAYED] == "true"


# --- Whose key it is -----------------------------------------------------


@pytest.mark.django_db
def test_another_token_of_the_same_bot_does_not_see_the_key(bot, runtime):
    assert post_event(runtime, "order-1").status_code == 201
    other = runtime_api(member_token(bot.workspace), bot.id)
    answer = post_event(other, "order-1")
    assert answer.status_code == 201
    assert REPLAYED not in answer.headers
    assert Event.objects.count() == 2


@pytest.mark.django_db
def test_the_same_token_for_another_bot_does_not_see_the_key(bot):
    membership = MembershipFactory(workspace=bot.workspace)
    token = token_for(membership.account)
    other_bot = BotFactory(workspace=bot.workspace)
    assert post_event(runtime_api(token, bot.id), "order-1").status_code == 201
    answer = post_event(runtime_api(token, other_bot.id), "order-1")
    assert answer.status_code == 201
    assert REPLAYED not in answer.headers
    assert set(Event.objects.values_list("bot_id", flat=True)) == {bot.id, other_bot.id}


@pytest.mark.django_db
def test_another_chat_user_does_not_see_the_key(chat):
    ParticipantFactory(conversation=chat.conversation, user=chat.bob)
    body = {"conversationId": chat.conversation.chat_id, "payload": TEXT}
    for user in (chat.alice, chat.bob):
        answer = chat.client(user).post(f"{chat.base}/messages", body, format="json", **keyed("m"))
        assert answer.status_code == 201
        assert REPLAYED not in answer.headers
    assert Message.objects.count() == 2


@pytest.mark.django_db
def test_a_user_made_without_a_key_is_replayed_to_its_client_address_only(chat):
    def create(address: str) -> Any:
        return APIClient().post(
            f"{chat.base}/users", {}, format="json", **keyed("signup", REMOTE_ADDR=address)
        )

    first = create("203.0.113.7")
    assert first.status_code == 201
    retry = create("203.0.113.7")
    assert (retry.status_code, retry[REPLAYED], retry.content) == (201, "true", first.content)
    elsewhere = create("198.51.100.9")
    assert elsewhere.status_code == 201
    assert REPLAYED not in elsewhere.headers
    assert elsewhere.json()["key"] != first.json()["key"]
    # What is kept holds the user key: encrypted like the secrets at rest.
    with connection.cursor() as cursor:
        cursor.execute("SELECT response_body FROM bots_idempotencykey")
        stored = [bytes(body) for (body,) in cursor.fetchall()]
    assert len(stored) == 2
    assert not any(first.json()["key"].encode() in body for body in stored)
    assert not any(b'"user"' in body for body in stored)


# --- Errors are not kept -------------------------------------------------


@pytest.mark.django_db
def test_a_retry_that_would_fail_now_still_gets_the_first_answer(bot, runtime):
    conversation = ConversationFactory(bot=bot)
    body = {**EVENT, "conversationId": conversation.id}
    first = post_event(runtime, "order-1", body)
    assert first.status_code == 201
    conversation.delete()  # a new request would be 400 ReferenceNotFound

    retry = post_event(runtime, "order-1", body)

    assert (retry.status_code, retry[REPLAYED], retry.content) == (201, "true", first.content)


@pytest.mark.django_db
def test_an_error_answer_is_not_kept_and_the_mended_request_goes_through(runtime):
    assert_error(post_event(runtime, "order-1", {"type": ""}), 400, "InvalidPayload")
    assert not IdempotencyKey.objects.exists()

    mended = post_event(runtime, "order-1")

    assert mended.status_code == 201
    assert REPLAYED not in mended.headers
    assert Event.objects.count() == 1


def assert_a_failing_create_writes_nothing(runtime: Any, monkeypatch: Any) -> None:
    create = events.views.event_create

    def create_then_fail(**kwargs: Any) -> Any:
        create(**kwargs)
        raise RuntimeError("the process fails after the insert")

    monkeypatch.setattr(events.views, "event_create", create_then_fail)
    assert_error(post_event(runtime, "order-1"), 500, "Internal")
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


@pytest.mark.django_db
def test_what_a_failing_request_wrote_is_rolled_back_and_its_key_stays_free(runtime, monkeypatch):
    assert_a_failing_create_writes_nothing(runtime, monkeypatch)


@pytest.mark.django_db
def test_an_error_answered_rather_than_raised_keeps_nothing(bot):
    def handle() -> HttpResponse:
        EventFactory(bot=bot)
        return HttpResponse(status=400)

    answer = idempotent_run(key="order-1", scope="s", fingerprint="f", handle=handle)

    assert answer.status_code == 400
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


# --- The kept body, encrypted ----------------------------------------------


def test_a_kept_body_is_sealed_with_the_first_key_and_read_with_any(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRET_ENCRYPTION_KEYS = [old]
    body = b'{"key":"user key 123"}'
    sealed = secret_seal(body)
    assert sealed[:1] == b"\x01" and body not in sealed
    assert secret_seal(body) != sealed  # a nonce of its own each time
    # A new key put first: what the old one sealed is still read.
    settings.SECRET_ENCRYPTION_KEYS = [new, old]
    assert secret_unseal(sealed) == body
    assert secret_unseal(secret_seal(body)) == body
    # Answers kept as Fernet tokens (before AES-GCM-SIV) are read too.
    assert secret_unseal(Fernet(old).encrypt(body)) == body
    settings.SECRET_ENCRYPTION_KEYS = [new]
    with pytest.raises(UndecryptableSecret):
        secret_unseal(sealed)
    with pytest.raises(UndecryptableSecret):
        secret_unseal(sealed[:-1] + bytes([sealed[-1] ^ 1]))  # tampered with


# --- Twins and expiry ------------------------------------------------------


def kept_row(scope: str, fingerprint: str, **fields: Any) -> IdempotencyKey:
    """The answer another request kept for key "order-1"."""
    now = timezone.now()
    values: dict[str, Any] = {
        "scope": scope,
        "key": "order-1",
        "fingerprint": fingerprint,
        "status_code": 201,
        "response_body": secret_seal(b'{"event":"kept"}'),
        "response_headers": {"Content-Type": "application/json"},
        "created_at": now,
        "expires_at": now + timedelta(hours=24),
        **fields,
    }
    return IdempotencyKey.objects.create(**values)


@pytest.fixture
def scope_and_fingerprint(bot: Bot, runtime: APIClient) -> tuple[str, str]:
    """The scope and fingerprint `post_event(runtime, …)` has, read from a first request."""
    assert post_event(runtime, "probe").status_code == 201
    row = IdempotencyKey.objects.get(key="probe")
    Event.objects.all().delete()
    return row.scope, row.fingerprint


def twin_kept_first(monkeypatch: pytest.MonkeyPatch, answer: Callable[[], Any]) -> None:
    """As when a twin's answer commits while this request makes its object:
    this one cannot keep its own (its INSERT met the twin's key), then finds
    `answer()`. The real race is test_fifty_twins_*, against real servers."""
    monkeypatch.setattr("platform_site.api.idempotency._kept_answer", lambda **kwargs: answer())
    monkeypatch.setattr("platform_site.api.idempotency._answer_keep", lambda **kwargs: False)


@pytest.mark.django_db
def test_a_twin_that_kept_its_answer_first_wins_and_the_loser_makes_nothing(runtime, monkeypatch):
    kept = HttpResponse(b'{"event":"kept"}', status=201)
    twin_kept_first(monkeypatch, lambda: kept)
    answer = post_event(runtime, "order-1")
    assert (answer.status_code, answer.content) == (201, b'{"event":"kept"}')
    assert not Event.objects.exists()


@pytest.mark.django_db
def test_a_twin_that_kept_another_request_first_makes_this_one_422(runtime, monkeypatch):
    def mismatch() -> Any:
        raise IdempotencyMismatch()

    twin_kept_first(monkeypatch, mismatch)
    assert_error(post_event(runtime, "order-1"), 422, "IdempotencyMismatch")
    assert not Event.objects.exists()


@pytest.mark.django_db
def test_an_expired_key_counts_as_absent(runtime, scope_and_fingerprint):
    scope, _ = scope_and_fingerprint
    past = timezone.now() - timedelta(seconds=1)
    kept_row(scope, "another request", expires_at=past)

    answer = post_event(runtime, "order-1")

    assert answer.status_code == 201
    assert REPLAYED not in answer.headers
    row = IdempotencyKey.objects.get(key="order-1")
    assert row.expires_at > timezone.now()
    assert secret_unseal(bytes(row.response_body)) == answer.content


@pytest.mark.django_db
def test_a_key_whose_answer_expired_while_its_twin_ran_is_409(runtime, monkeypatch):
    """The twin's answer was kept, then expired, between this request's
    INSERT and its second look: nothing to replay, nothing made."""
    monkeypatch.setattr("platform_site.api.idempotency._answer_keep", lambda **kwargs: False)
    answer = post_event(runtime, "order-1")
    assert_error(answer, 409, "IdempotencyConflict")
    assert answer["Retry-After"] == "1"
    assert not Event.objects.exists()


def test_the_fingerprint_is_method_full_path_and_body(rf):
    def fingerprint(path: str, body: bytes) -> str:
        return request_fingerprint(Request(rf.post(path, body, content_type="application/json")))

    base = fingerprint("/v1/chat/events", b"{}")
    assert base == fingerprint("/v1/chat/events", b"{}")
    assert base != fingerprint("/v1/chat/events", b"{ }")
    assert base != fingerprint("/v1/chat/events?a=1", b"{}")
    assert base != fingerprint("/v1/chat/messages", b"{}")
    # The integration an event records is part of the request.
    integration = Request(
        rf.post(
            "/v1/chat/events", b"{}", content_type="application/json", HTTP_X_INTEGRATION_ID="i"
        )
    )
    assert base != request_fingerprint(integration)


# --- Purge ---------------------------------------------------------------


def key_row(name: str, expires_in: timedelta) -> IdempotencyKey:
    return IdempotencyKey.objects.create(
        scope="runtime:1:bot_x",
        key=name,
        fingerprint="f",
        status_code=201,
        created_at=timezone.now(),
        expires_at=timezone.now() + expires_in,
    )


@pytest.mark.django_db
def test_the_purge_deletes_expired_keys_in_batches(settings):
    settings.IDEMPOTENCY_PURGE_BATCH = 2
    for n in range(5):
        key_row(f"old-{n}", -timedelta(minutes=1))
    kept = key_row("recent", timedelta(hours=1))

    assert idempotency_keys_purge_expired() == 5
    assert list(IdempotencyKey.objects.all()) == [kept]
    assert idempotency_keys_purge_expired() == 0


@pytest.mark.django_db
def test_the_purge_runs_on_beat_through_celery(settings, caplog):
    [entry] = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == purge_expired_idempotency_keys.name
    ]
    assert entry["schedule"] == settings.IDEMPOTENCY_PURGE_INTERVAL
    key_row("old", -timedelta(minutes=1))
    kept = key_row("recent", timedelta(hours=1))

    with caplog.at_level("INFO", logger="bots.tasks"):
        result = purge_expired_idempotency_keys.apply()

    assert result.get() == 1
    assert list(IdempotencyKey.objects.all()) == [kept]
    assert "Deleted 1 expired idempotency keys" in caplog.text


# --- Every POST that creates ---------------------------------------------


@dataclass
class Route:
    """A POST that creates: who sends it, where, what, and the rows it makes."""

    client: Callable[[Bot, Chat], APIClient]
    path: Callable[[Chat], str]
    body: Callable[[Chat], dict[str, Any]]
    model: type[Model]


def owner_admin(bot: Bot, chat: Chat) -> APIClient:
    return admin_api(member_token(bot.workspace, "owner"), bot.workspace.id)


def new_user_key(bot: Bot, chat: Chat) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_X_USER_KEY=user_key_issue(connection=chat.connection, chat_user_id="carol")
    )
    return client


ROUTES = {
    "createEvent": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/events",
        lambda chat: EVENT,
        Event,
    ),
    "createMessage": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/messages",
        lambda chat: {
            "conversationId": chat.conversation.id,
            "userId": chat.alice.id,
            "payload": TEXT,
        },
        Message,
    ),
    "getOrSetState": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: f"/v1/chat/states/conversation/{chat.conversation.id}/cart/get-or-set",
        lambda chat: {"payload": {"items": 1}},
        State,
    ),
    "getOrCreateMessage": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/messages/get-or-create",
        lambda chat: {
            "conversationId": chat.conversation.id,
            "userId": chat.alice.id,
            "payload": TEXT,
            "tags": {"step": "welcome"},
        },
        Message,
    ),
    "createUser": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/users",
        lambda chat: {"tags": {"crm": "42"}, "name": "Carol"},
        User,
    ),
    "getOrCreateUser": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/users/get-or-create",
        lambda chat: {"tags": {"crm": "42"}},
        User,
    ),
    "createConversation": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/conversations",
        lambda chat: {"channel": "dm", "tags": {"thread": "7"}},
        Conversation,
    ),
    "getOrCreateConversation": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: "/v1/chat/conversations/get-or-create",
        lambda chat: {"channel": "dm", "tags": {"thread": "7"}},
        Conversation,
    ),
    "addParticipant": Route(
        lambda bot, chat: runtime_api(member_token(bot.workspace), bot.id),
        lambda chat: f"/v1/chat/conversations/{chat.conversation.id}/participants",
        lambda chat: {"userId": chat.bob.id},
        Participant,
    ),
    "chatCreateUser": Route(
        lambda bot, chat: APIClient(),
        lambda chat: f"{chat.base}/users",
        lambda chat: {"name": "Carol"},
        User,
    ),
    "chatGetOrCreateUser": Route(
        new_user_key,
        lambda chat: f"{chat.base}/users/get-or-create",
        lambda chat: {"name": "Carol"},
        User,
    ),
    "chatCreateConversation": Route(
        lambda bot, chat: chat.client(),
        lambda chat: f"{chat.base}/conversations",
        lambda chat: {},
        Conversation,
    ),
    "chatGetOrCreateConversation": Route(
        lambda bot, chat: chat.client(),
        lambda chat: f"{chat.base}/conversations/get-or-create",
        lambda chat: {"id": "room-2"},
        Conversation,
    ),
    "chatAddParticipant": Route(
        lambda bot, chat: chat.client(),
        lambda chat: f"{chat.base}/conversations/{chat.conversation.chat_id}/participants",
        lambda chat: {"userId": chat.bob.chat_id},
        Participant,
    ),
    "chatCreateMessage": Route(
        lambda bot, chat: chat.client(),
        lambda chat: f"{chat.base}/messages",
        lambda chat: {"conversationId": chat.conversation.chat_id, "payload": TEXT},
        Message,
    ),
    "chatCreateEvent": Route(
        lambda bot, chat: chat.client(),
        lambda chat: f"{chat.base}/events",
        lambda chat: {"conversationId": chat.conversation.chat_id, "payload": {"a": 1}},
        Event,
    ),
    "createBot": Route(
        owner_admin,
        lambda chat: "/v1/admin/bots",
        lambda chat: {"name": "Second bot"},
        Bot,
    ),
    "createWorkspaceMember": Route(
        owner_admin,
        lambda chat: "/v1/admin/workspace-members",
        lambda chat: {"email": "new@example.test", "role": "viewer"},
        Membership,
    ),
}


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param(name, marks=mark, id=f"{name}-{way}")
        for name in sorted(ROUTES)
        for way, mark in (
            ("in-a-transaction", pytest.mark.django_db),
            ("autocommit", pytest.mark.django_db(transaction=True)),
        )
    ],
)
def test_every_post_that_creates_honours_the_key(bot, chat, operation):
    """In a test's transaction (the usual way), and out of one (on
    PostgreSQL: the rows held and written with the answer, or the
    transaction opened by the first other write)."""
    route = ROUTES[operation]
    client, path, body = route.client(bot, chat), route.path(chat), route.body(chat)
    before = route.model._default_manager.count()

    first = client.post(path, body, format="json", **keyed("create-1"))
    assert first.status_code == 201, first.content
    made = route.model._default_manager.count()
    assert made > before

    retry = client.post(path, body, format="json", **keyed("create-1"))
    assert (retry.status_code, retry.content, retry[REPLAYED]) == (201, first.content, "true")
    assert route.model._default_manager.count() == made
    assert_error(
        client.post(path, {**body, "x": 1}, format="json", **keyed("create-1")),
        422,
        "IdempotencyMismatch",
    )


def test_every_post_that_creates_is_documented_as_taking_a_key():
    document = APIClient().get("/v1/openapi.json").json()
    taking = {
        operation["operationId"]: operation
        for item in document["paths"].values()
        for method, operation in item.items()
        if method == "post"
        and any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
    }
    assert set(taking) == set(ROUTES)
    for operation in taking.values():
        [parameter] = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]
        assert (parameter["in"], parameter["schema"]["maxLength"]) == ("header", 255)
        responses = operation["responses"]
        assert responses["409"]["content"]["application/json"]["schema"]["allOf"][1]["properties"][
            "type"
        ]["enum"] == ["AlreadyExists", "IdempotencyConflict"]
        assert responses["422"]["content"]["application/json"]["schema"]["allOf"][1]["properties"][
            "type"
        ]["enum"] == ["IdempotencyMismatch"]
        for status, response in responses.items():
            if status.startswith("2"):
                assert REPLAYED in response["headers"], (operation["operationId"], status)


# --- PostgreSQL: the rows and the answer in one statement -----------------

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="one statement on PostgreSQL only"
)


@dataclass
class Wire:
    """What the driver sent and received (libpq's trace of the protocol)."""

    lines: list[str] = field(default_factory=list)

    @property
    def round_trips(self) -> int:
        return sum("\tReadyForQuery\t" in line for line in self.lines if line.startswith("B"))

    @property
    def statements(self) -> list[str]:
        return [line for line in self.lines if line.startswith("F") and "\tParse\t" in line]

    @property
    def begins(self) -> int:
        return sum('\tQuery\t "BEGIN"' in line for line in self.lines if line.startswith("F"))


@contextlib.contextmanager
def wire() -> Iterator[Wire]:
    """The messages this thread's connection exchanges with PostgreSQL while inside."""
    from psycopg import pq

    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    seen = Wire()
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield seen
        finally:
            pgconn.untrace()
            trace.seek(0)
            seen.lines = trace.read().splitlines()


@on_postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("operation", "more"),
    [
        # Rows written by rows_write: held, and written with the answer.
        ("createEvent", 0),
        ("chatCreateMessage", 0),
        ("createMessage", 0),
        # A service in a transaction of its own: the answer's INSERT in it.
        ("createBot", 1),
    ],
)
def test_a_keyed_create_costs_one_statement_more_at_most_and_no_transaction_more(
    bot, chat, operation, more
):
    route = ROUTES[operation]
    client, path, body = route.client(bot, chat), route.path(chat), route.body(chat)
    bodies = iter([{**route.body(chat), "name": f"Bot {n}"} for n in range(3)])
    if operation != "createBot":
        bodies = iter([body] * 3)
    # Warm: the credentials remembered, the token's last use written.
    assert client.post(path, next(bodies), format="json").status_code == 201

    with wire() as unkeyed:
        assert client.post(path, next(bodies), format="json").status_code == 201
    with wire() as keyed_:
        answer = client.post(path, next(bodies), format="json", **keyed("one-trip"))
        assert answer.status_code == 201

    assert keyed_.round_trips == unkeyed.round_trips + more
    assert keyed_.begins == unkeyed.begins
    assert len(keyed_.statements) == len(unkeyed.statements) + more
    assert not [line for line in keyed_.lines if "SAVEPOINT" in line]
    assert "bots_idempotencykey" in "".join(keyed_.statements[-1:])
    assert IdempotencyKey.objects.get().key == "one-trip"


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_block_rolled_back_to_its_unsent_savepoint_is_undone(bot):
    """A service's atomic block entered before anything was written starts
    the transaction instead of sending a savepoint: rolled back to, the
    transaction is, and what follows starts another."""

    def handle() -> HttpResponse:
        with contextlib.suppress(IntegrityError), transaction.atomic():
            undone = EventFactory(bot=bot, type="undone")
            EventFactory(bot=bot, id=undone.id)  # fails: the transaction is in error
        EventFactory(bot=bot, type="kept")
        with transaction.atomic():  # a savepoint now: the transaction is open
            EventFactory(bot=bot, type="nested")
        return HttpResponse(b"made", status=201)

    with wire() as sent:
        answer = idempotent_run(key="order-1", scope="s", fingerprint="f", handle=handle)

    assert answer.status_code == 201
    assert sorted(Event.objects.values_list("type", flat=True)) == ["kept", "nested"]
    assert secret_unseal(bytes(IdempotencyKey.objects.get().response_body)) == b"made"
    sent_sql = "\n".join(line for line in sent.lines if line.startswith("F"))
    assert sent_sql.count("SAVEPOINT") == 2  # the nested block's, and its release


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_what_a_keyed_create_sets_off_waits_for_its_statement(runtime, monkeypatch):
    woken: list[int] = []
    # The wake-up of a worker for the new event, once it is committed.
    monkeypatch.setattr(
        events.services.events, "deliveries_wake", lambda: woken.append(Event.objects.count())
    )
    assert post_event(runtime, "order-1").status_code == 201
    assert woken == [1]  # after the statement, which stored the event
    assert post_event(runtime, "order-1")[REPLAYED] == "true"
    assert woken == [1]  # the replay made nothing and woke nobody


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_failing_request_leaves_nothing_held_or_written(runtime, monkeypatch):
    assert_a_failing_create_writes_nothing(runtime, monkeypatch)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_write_of_another_kind_opens_the_transaction_and_rolls_back_with_it(
    bot, runtime, monkeypatch
):
    def write_then_fail(**kwargs: Any) -> Any:
        EventFactory(bot=bot)  # through the ORM: not held, the transaction opens
        raise RuntimeError("the process fails after the insert")

    monkeypatch.setattr(events.views, "event_create", write_then_fail)
    assert_error(post_event(runtime, "order-1"), 500, "Internal")
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_read_after_held_rows_sees_them(bot):
    def handle() -> HttpResponse:
        event = event_build(bot_id=bot.id, type="t", payload={})
        row_insert(event)  # held
        # A statement after held rows opens the transaction and writes them first.
        assert Event.objects.filter(pk=event.pk).exists()
        return HttpResponse(b"made", status=201)

    with wire() as sent:
        answer = idempotent_run(key="order-1", scope="s", fingerprint="f", handle=handle)

    assert answer.status_code == 201
    assert sent.begins == 1
    assert Event.objects.count() == 1
    assert secret_unseal(bytes(IdempotencyKey.objects.get().response_body)) == b"made"


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_out_of_a_transaction_an_expired_key_counts_as_absent(runtime, scope_and_fingerprint):
    scope, _ = scope_and_fingerprint
    kept_row(scope, "another request", expires_at=timezone.now() - timedelta(seconds=1))

    answer = post_event(runtime, "order-1")

    assert answer.status_code == 201
    assert REPLAYED not in answer.headers
    row = IdempotencyKey.objects.get(key="order-1")
    assert row.expires_at > timezone.now()
    assert secret_unseal(bytes(row.response_body)) == answer.content
    assert Event.objects.count() == 1


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_reference_deleted_before_the_statement_is_reported_as_without_a_key(
    bot, runtime, monkeypatch
):
    """The held event names a conversation deleted (by another connection)
    after it was looked up: the statement fails whole, and the request runs
    again the usual way, which finds the conversation missing."""
    conversation = ConversationFactory(bot=bot)
    lookup = events.services.events.conversation_reference_get

    def looked_up_then_deleted(**kwargs: Any) -> Any:
        found = lookup(**kwargs)
        with other_connection() as other:
            other.execute("DELETE FROM bots_conversation WHERE id = %s", (conversation.id,))
        return found

    monkeypatch.setattr(
        events.services.events, "conversation_reference_get", looked_up_then_deleted
    )
    answer = post_event(runtime, "order-1", {**EVENT, "conversationId": conversation.id})

    assert_error(answer, 400, "ReferenceNotFound")
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


@contextlib.contextmanager
def other_connection(*, autocommit: bool = True) -> Iterator[Any]:
    """A psycopg connection of its own to the test database."""
    import psycopg

    db = connection.settings_dict
    with psycopg.connect(
        dbname=db["NAME"],
        host=db["HOST"],
        port=db["PORT"] or None,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        autocommit=autocommit,
    ) as other:
        yield other


def key_taken_by_another_transaction(other: Any, scope: str, fingerprint: str) -> None:
    """A twin's answer for "order-1", written and not committed yet."""
    now = timezone.now()
    other.execute(
        "INSERT INTO bots_idempotencykey (scope, key, fingerprint, status_code, response_body,"
        " response_headers, created_at, expires_at) VALUES (%s, 'order-1', %s, 201, %s,"
        ' \'{"Content-Type": "application/json"}\', %s, %s)',
        (scope, fingerprint, secret_seal(b'{"event":"twin"}'), now, now + timedelta(hours=1)),
    )


@dataclass
class InFlight:
    """A request sent from a thread of its own."""

    thread: threading.Thread
    answers: list[Any] = field(default_factory=list)

    def answer(self) -> Any:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        [answer] = self.answers
        return answer


def sent_apart(send: Callable[[], Any]) -> InFlight:
    in_flight = InFlight(threading.Thread(target=lambda: None))

    def run() -> None:
        try:
            in_flight.answers.append(send())
        finally:
            connections.close_all()

    in_flight.thread = threading.Thread(target=run)
    in_flight.thread.start()
    return in_flight


def backend_waiting_on_the_key(other: Any) -> int:
    """The PostgreSQL process whose statement waits on a lock to write a
    kept answer (the twin's uncommitted key), once there is one."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = other.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%%bots_idempotencykey%%'"
        ).fetchone()
        if row:
            return int(row[0])
        time.sleep(0.02)
    raise AssertionError("no statement waits on the key")


@on_postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("twin", ["commits", "rolls back"])
def test_a_twin_waits_for_the_first_and_gets_its_answer_or_goes_ahead(
    runtime, scope_and_fingerprint, twin
):
    scope, fingerprint = scope_and_fingerprint
    with other_connection(autocommit=False) as first:
        key_taken_by_another_transaction(first, scope, fingerprint)
        in_flight = sent_apart(lambda: post_event(runtime, "order-1"))
        with other_connection() as watcher:
            backend_waiting_on_the_key(watcher)
        first.commit() if twin == "commits" else first.rollback()
        answer = in_flight.answer()

    assert answer.status_code == 201
    if twin == "commits":
        assert (answer[REPLAYED], answer.content) == ("true", b'{"event":"twin"}')
        assert not Event.objects.exists()  # the waiting twin's event was never written
    else:
        assert REPLAYED not in answer.headers
        assert Event.objects.count() == 1
        row = IdempotencyKey.objects.get(key="order-1")
        assert secret_unseal(bytes(row.response_body)) == answer.content


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_crash_during_the_statement_leaves_neither_the_object_nor_the_answer(
    runtime, scope_and_fingerprint
):
    """The request's backend is killed while its one statement (the event
    and the kept answer) waits: neither was written, and the key is free."""
    scope, fingerprint = scope_and_fingerprint
    with other_connection(autocommit=False) as first:
        key_taken_by_another_transaction(first, scope, fingerprint)
        in_flight = sent_apart(lambda: post_event(runtime, "order-1"))
        with other_connection() as watcher:
            pid = backend_waiting_on_the_key(watcher)
            watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
        answer = in_flight.answer()
        first.rollback()

    assert answer.status_code >= 500
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.filter(key="order-1").exists()
    mended = post_event(runtime, "order-1")  # the key is free
    assert (mended.status_code, REPLAYED in mended.headers) == (201, False)


# --- Concurrent twins, against real servers ------------------------------


TWINS = 50


def post_at_once(urls: list[str], body: Any, headers: dict[str, str]) -> list[httpx.Response]:
    """TWINS identical requests spread over the URLs, released together from as many threads."""
    start = threading.Barrier(TWINS)
    answers: list[httpx.Response] = []
    failures: list[BaseException] = []

    def send(url: str) -> None:
        try:
            start.wait()
            answers.append(httpx.post(url, json=body, headers=headers, timeout=READ_TIMEOUT * 3))
        except BaseException as error:  # reported below, with the others
            failures.append(error)

    threads = [threading.Thread(target=send, args=(urls[n % len(urls)],)) for n in range(TWINS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    return answers


def assert_one_made(answers: list[httpx.Response]) -> None:
    """One 201 made it; the others are its replays or 409s."""
    assert len(answers) == TWINS
    made = [a for a in answers if a.status_code == 201 and REPLAYED not in a.headers]
    replays = [a for a in answers if a.status_code == 201 and REPLAYED in a.headers]
    conflicts = [a for a in answers if a.status_code == 409]
    assert len(made) == 1, [(a.status_code, a.text[:200]) for a in answers]
    assert len(made) + len(replays) + len(conflicts) == TWINS, [a.status_code for a in answers]
    assert all(a.content == made[0].content for a in replays)
    assert all(a.json()["type"] == "IdempotencyConflict" for a in conflicts)


@pytest.fixture
def two_servers(servers, monkeypatch) -> list[Any]:  # noqa: F811
    # More view threads than the default, so twins really run at once.
    monkeypatch.setenv("WEB_THREADS", "8")
    return [servers(), servers()]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_fifty_twins_make_one_event(bot, two_servers):
    headers = {
        "Authorization": f"Bearer {member_token(bot.workspace)}",
        "x-bot-id": bot.id,
        "Idempotency-Key": "order-1",
    }
    answers = post_at_once([f"{s.url}/v1/chat/events" for s in two_servers], EVENT, headers)
    assert_one_made(answers)
    assert Event.objects.count() == 1
    assert IdempotencyKey.objects.get().status_code == 201


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_fifty_twins_make_one_chat_message(chat, two_servers):
    headers = {"x-user-key": user_key(chat.connection, chat.alice), "Idempotency-Key": "msg-1"}
    body = {"conversationId": chat.conversation.chat_id, "payload": TEXT}
    answers = post_at_once([f"{s.url}{chat.base}/messages" for s in two_servers], body, headers)
    assert_one_made(answers)
    assert Message.objects.count() == 1
    assert IdempotencyKey.objects.get().status_code == 201
