"""Requests racing on one state's key, each on a connection of its own: none
fails (no unique violation surfaces), no write is lost, and an expired state
that they all meet expires once.

PostgreSQL only: SQLite takes one writer at a time, and its in-memory test
database refuses a second thread's write outright."""

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from bots.models import Bot, Conversation
from chat.models import State
from events.models import Event
from platform_site.api.fields import format_timestamp
from tests.factories import ConversationFactory, StateFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="racing writers need PostgreSQL"),
]

RACERS = 8


def race(call: Callable[[int], Any]) -> list[Any]:
    """`call(n)` on RACERS threads released at once; their results in order."""
    start = threading.Barrier(RACERS)
    results: list[Any] = [None] * RACERS

    def run(number: int) -> None:
        try:
            start.wait()
            results[number] = call(number)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


@pytest.fixture
def conversation(bot: Bot) -> Conversation:
    return ConversationFactory(bot=bot)


@pytest.fixture
def client(runtime_client: Callable[..., APIClient]) -> APIClient:
    return runtime_client()


def path(conversation: Conversation, suffix: str = "") -> str:
    return f"/v1/chat/states/conversation/{conversation.id}/cart{suffix}"


def test_racing_sets_make_one_state_and_the_last_write_stays(client, conversation):
    answers = race(lambda n: client.post(path(conversation), {"payload": {"n": n}}, format="json"))
    assert [answer.status_code for answer in answers] == [200] * RACERS
    assert len({answer.json()["state"]["id"] for answer in answers}) == 1
    # The state is the one of the write that committed last, whole.
    [state] = State.objects.all()
    last = answers[state.payload["n"]].json()["state"]
    assert last["payload"] == state.payload
    assert last["updatedAt"] == format_timestamp(state.updated_at)


def test_racing_get_or_sets_make_it_once(client, conversation):
    answers = race(
        lambda n: client.post(
            path(conversation, "/get-or-set"), {"payload": {"n": n}}, format="json"
        )
    )
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] * (RACERS - 1) + [201]
    [made] = [answer.json()["state"] for answer in answers if answer.status_code == 201]
    assert all(answer.json()["state"] == made for answer in answers)
    assert State.objects.get().payload == made["payload"]


def test_racing_patches_lose_no_key(client, conversation):
    assert client.post(path(conversation), {"payload": {}}, format="json").status_code == 200
    answers = race(
        lambda n: client.patch(path(conversation), {"payload": {f"k{n}": n}}, format="json")
    )
    assert [answer.status_code for answer in answers] == [200] * RACERS
    assert State.objects.get().payload == {f"k{n}": n for n in range(RACERS)}


def test_writes_racing_on_an_expired_state_expire_it_once(client, conversation):
    StateFactory(
        bot=conversation.bot,
        type="conversation",
        target_id=conversation.id,
        conversation=conversation,
        name="cart",
        expiry=1000,
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    answers = race(
        lambda n: client.post(
            path(conversation, "/get-or-set" if n % 2 else ""), {"payload": {"n": n}}, format="json"
        )
    )
    assert {answer.status_code for answer in answers} <= {200, 201}
    assert Event.objects.filter(type="state_expired").count() == 1
    assert State.objects.count() == 1
