"""Idempotency-Key on the POSTs that create (bots/idempotency.py): a retry is
answered the first answer and creates nothing, on every such route; a key is
its credential's alone; error answers are not kept; of two twins the second
to keep its answer makes nothing; expired keys count as absent and are
purged; and concurrent twins never make two objects, against real servers."""

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import connection
from django.db.models import Model
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.test import APIClient

import events.views
from bots.idempotency import idempotency_keys_purge_expired, idempotent_run, request_fingerprint
from bots.models import Bot, Conversation, IdempotencyKey, Membership, Message, Participant, User
from bots.tasks import purge_expired_idempotency_keys
from chat.keys import user_key_issue
from chat.models import ChatConnection, State
from events.models import Event
from platform_site.api.errors import IdempotencyMismatch
from platform_site.secret_fields import secret_seal, secret_unseal
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


@pytest.mark.django_db
def test_what_a_failing_request_wrote_is_rolled_back_and_its_key_stays_free(runtime, monkeypatch):
    create = events.views.event_create

    def create_then_fail(**kwargs: Any) -> Any:
        create(**kwargs)
        raise RuntimeError("the process fails after the insert")

    monkeypatch.setattr(events.views, "event_create", create_then_fail)
    assert_error(post_event(runtime, "order-1"), 500, "Internal")
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


@pytest.mark.django_db
def test_an_error_answered_rather_than_raised_keeps_nothing(bot):
    def handle() -> HttpResponse:
        EventFactory(bot=bot)
        return HttpResponse(status=400)

    answer = idempotent_run(key="order-1", scope="s", fingerprint="f", handle=handle)

    assert answer.status_code == 400
    assert not Event.objects.exists()
    assert not IdempotencyKey.objects.exists()


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
    monkeypatch.setattr("bots.idempotency._kept_answer", lambda **kwargs: answer())
    monkeypatch.setattr("bots.idempotency._answer_keep", lambda **kwargs: False)


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
    monkeypatch.setattr("bots.idempotency._answer_keep", lambda **kwargs: False)
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


@pytest.mark.django_db
@pytest.mark.parametrize("operation", sorted(ROUTES))
def test_every_post_that_creates_honours_the_key(bot, chat, operation):
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
