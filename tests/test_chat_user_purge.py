"""Stale anonymous chat users: a user made by POST users for a client without
a credential, that never took part in a conversation and that nothing refers
to, is deleted by beat once older than CHAT_ANONYMOUS_USER_MAX_AGE_DAYS;
every other user stays."""

import itertools
import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection as db_connection
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from bots.models import Conversation, User
from chat.keys import user_key_issue
from chat.live.views.initialize import webchat_start
from chat.models import FeedbackValue, MessageFeedback, StateType
from chat.services.conversations import conversation_create
from chat.services.user_purge import chat_users_purge_stale
from chat.tasks import purge_stale_chat_users
from tests.conftest import assert_error, runtime_api
from tests.factories import (
    ChatConnectionFactory,
    ConversationFactory,
    EventFactory,
    MessageFactory,
    ScheduledMessageFactory,
    StateFactory,
    WorkflowFactory,
    member_token,
)

UP = FeedbackValue.POSITIVE.value
_addresses = (f"198.51.{n // 250}.{n % 250 + 1}" for n in itertools.count())


@pytest.fixture
def connection(bot: Any) -> Any:
    return ChatConnectionFactory(bot=bot)


def chat(connection: Any, key: str | None = None) -> APIClient:
    # Each from an address of its own: users made from one are limited.
    client = APIClient(REMOTE_ADDR=next(_addresses))
    if key is not None:
        client.credentials(HTTP_X_USER_KEY=key)
    return client


def anonymous(connection: Any, *, days_old: float = 8, **body: Any) -> tuple[User, str]:
    """A user made by POST users, as if `days_old` days ago, and its key."""
    answer = chat(connection).post(f"/chat/{connection.webhook_id}/users", body, format="json")
    assert answer.status_code == 201, answer.content
    user = User.objects.get(bot_id=connection.bot_id, chat_id=answer.json()["user"]["id"])
    aged(user, days_old)
    return user, answer.json()["key"]


def aged(user: User, days_old: float) -> User:
    User.objects.filter(pk=user.pk).update(created_at=timezone.now() - timedelta(days=days_old))
    return user


def remaining(*users: User) -> set[str]:
    return set(User.objects.filter(pk__in=[user.pk for user in users]).values_list("pk", flat=True))


def test_a_stale_anonymous_user_without_a_conversation_is_deleted(connection):
    user, key = anonymous(connection)
    recent, _ = anonymous(connection, days_old=6)

    assert chat_users_purge_stale() == 1
    assert remaining(user, recent) == {recent.pk}
    # Its key names nobody now, in this process and the others.
    me = chat(connection, key).get(f"/chat/{connection.webhook_id}/users/me")
    assert_error(me, 401, "Unauthorized")


def test_the_age_is_a_setting(connection, settings):
    user, _ = anonymous(connection, days_old=2)
    assert chat_users_purge_stale() == 0
    settings.CHAT_ANONYMOUS_USER_MAX_AGE_DAYS = 1
    assert chat_users_purge_stale() == 1
    assert not remaining(user)


def test_a_user_who_made_a_conversation_stays_even_once_it_is_deleted(connection):
    user, key = anonymous(connection, days_old=0)
    client = chat(connection, key)
    made = client.post(f"/chat/{connection.webhook_id}/conversations", {}, format="json")
    assert made.status_code == 201
    chat_id = made.json()["conversation"]["id"]
    gone = client.delete(f"/chat/{connection.webhook_id}/conversations/{chat_id}")
    assert gone.status_code == 200, gone.content
    aged(user, 30)
    assert chat_users_purge_stale() == 0
    assert remaining(user) == {user.pk}


def test_a_user_added_to_a_conversation_stays(bot, connection):
    owner, owner_key = anonymous(connection, days_old=0)
    guest, _ = anonymous(connection, **{"id": "guest"})
    client = chat(connection, owner_key)
    made = client.post(f"/chat/{connection.webhook_id}/conversations", {}, format="json")
    chat_id = made.json()["conversation"]["id"]
    added = client.post(
        f"/chat/{connection.webhook_id}/conversations/{chat_id}/participants",
        {"userId": "guest"},
        format="json",
    )
    assert added.status_code == 201, added.content
    # So does one the bot adds.
    other, _ = anonymous(connection)
    bot_side = runtime_api(member_token(bot.workspace), bot.id)
    conversation = Conversation.objects.get(bot=bot, chat_id=chat_id)
    assert (
        bot_side.post(
            f"/v1/chat/conversations/{conversation.id}/participants",
            {"userId": other.id},
            format="json",
        ).status_code
        == 201
    )
    aged(owner, 30)
    assert chat_users_purge_stale() == 0
    assert remaining(owner, guest, other) == {owner.pk, guest.pk, other.pk}


def test_users_made_otherwise_stay(bot, connection):
    # By the bot (runtime API), by the webchat's initialize (with their
    # conversation), by a signed key (users/get-or-create).
    runtime = runtime_api(member_token(bot.workspace), bot.id)
    by_bot = runtime.post("/v1/chat/users", {"tags": {}}, format="json").json()["user"]["id"]
    started = webchat_start(
        webhook_id=connection.webhook_id,
        method="GET",
        key=None,
        conversation_chat_id=None,
        remote_addr="198.51.100.200",
    )
    Conversation.objects.filter(pk=started.conversation.pk).delete()
    signed = user_key_issue(connection=connection, chat_user_id="known")
    made = chat(connection, signed).post(
        f"/chat/{connection.webhook_id}/users/get-or-create", {}, format="json"
    )
    assert made.status_code == 201
    users = list(User.objects.filter(bot=bot))
    assert len(users) == 3
    for user in users:
        aged(user, 30)
    assert chat_users_purge_stale() == 0
    assert {user.pk for user in users} == remaining(*users)
    assert by_bot in remaining(*users)


def test_a_user_anything_refers_to_stays(bot, connection):
    def referred(make: Any) -> User:
        user, _ = anonymous(connection)
        make(user)
        return user

    conversation = ConversationFactory(bot=bot)
    message = MessageFactory(conversation=conversation)
    kept = [
        referred(lambda u: MessageFactory(conversation=conversation, user=u)),
        referred(lambda u: ScheduledMessageFactory(conversation=conversation, user=u)),
        referred(
            lambda u: MessageFeedback.objects.create(message=message, user=u, value="positive")
        ),
        referred(
            lambda u: StateFactory(bot=bot, type=StateType.USER.value, target_id=u.id, user=u)
        ),
        referred(lambda u: WorkflowFactory(bot=bot, user=u)),
        referred(lambda u: EventFactory(bot=bot, user=u)),
        referred(lambda u: Conversation.objects.filter(pk=conversation.pk).update(owner=u)),
    ]
    stale, _ = anonymous(connection)

    assert chat_users_purge_stale() == 1
    assert remaining(stale, *kept) == {user.pk for user in kept}


def test_the_purge_goes_batch_after_batch(connection, settings):
    settings.CHAT_ANONYMOUS_USER_PURGE_BATCH = 2
    stale = [anonymous(connection)[0] for _ in range(5)]
    assert chat_users_purge_stale() == 5
    assert not remaining(*stale)
    assert chat_users_purge_stale() == 0


def test_the_purge_runs_on_beat_through_celery(connection, settings, caplog):
    [entry] = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == purge_stale_chat_users.name
    ]
    assert entry["schedule"] == settings.CHAT_ANONYMOUS_USER_PURGE_INTERVAL == 3600
    assert entry["options"] == {"expires": settings.CHAT_ANONYMOUS_USER_PURGE_INTERVAL}
    assert settings.CHAT_ANONYMOUS_USER_MAX_AGE_DAYS == 7
    anonymous(connection)
    kept, _ = anonymous(connection, days_old=1)

    with caplog.at_level(logging.INFO, logger="chat.tasks"):
        result = purge_stale_chat_users.apply()

    assert result.successful()
    assert result.get() == 1
    assert remaining(kept) == {kept.pk}
    assert "Deleted 1 stale anonymous chat users" in caplog.text


# --- racing requests: rows locked while others wait (PostgreSQL) -------------------------


def run_in_thread(work: Any) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:
            failures.append(error)
        finally:
            db_connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, failures


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(db_connection.vendor != "postgresql", reason="writers take turns on SQLite")
def test_a_conversation_in_the_making_keeps_its_creator(connection):
    user, _ = anonymous(connection)
    made, go = threading.Event(), threading.Event()

    def create() -> None:
        with transaction.atomic():
            conversation_create(creator=User.objects.get(pk=user.pk))
            made.set()
            assert go.wait(10)

    thread, failures = run_in_thread(create)
    assert made.wait(10)
    # The creator's row is held: the purge passes it by rather than wait.
    assert chat_users_purge_stale() == 0
    go.set()
    thread.join(10)
    assert not failures, failures
    assert Conversation.objects.filter(owner_id=user.pk).count() == 1
    assert chat_users_purge_stale() == 0
    assert remaining(user) == {user.pk}


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(db_connection.vendor != "postgresql", reason="writers take turns on SQLite")
def test_a_conversation_asked_for_as_the_purge_deletes_its_creator_is_refused(connection):
    user, key = anonymous(connection)
    purged = threading.Event()
    count: list[int] = []

    def purge() -> None:
        with transaction.atomic():
            count.append(chat_users_purge_stale())
            purged.set()
            time.sleep(1)

    thread, failures = run_in_thread(purge)
    assert purged.wait(10)
    # The key's user is there until the purge commits; then it is gone.
    answer = chat(connection, key).post(
        f"/chat/{connection.webhook_id}/conversations", {}, format="json"
    )
    thread.join(10)
    assert not failures, failures
    assert count == [1]
    assert_error(answer, 400, "ReferenceNotFound")
    assert not Conversation.objects.filter(bot_id=connection.bot_id).exists()
    assert not remaining(user)
