"""States that expire: expiry is idleness (writes move it, reads do not), an
expired state reads as absent before it is swept, and the delivery clock
(chat/services/state_expiry.py, run by each claim) turns it into one
`state_expired` event for its bot and deletes it."""

from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest
from django.utils import timezone

from bots.models import Bot, Conversation
from chat.models import State
from chat.presenters import state_json
from chat.selectors.states import state_next_expiry
from chat.services.state_expiry import states_expire
from events.engine.claims import deliveries_claim
from events.models import Event, EventStatus
from tests.factories import ConversationFactory, StateFactory, UserFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

T = TypeVar("T")


@pytest.fixture
def conversation(bot: Bot) -> Conversation:
    return ConversationFactory(bot=bot)


@pytest.fixture
def wakes(monkeypatch: pytest.MonkeyPatch) -> list[None]:
    """The delivery wake-ups asked for."""
    asked: list[None] = []
    monkeypatch.setattr("events.services.events.deliveries_wake", lambda: asked.append(None))
    return asked


def conversation_state(conversation: Conversation, **fields: Any) -> State:
    return StateFactory(
        bot=conversation.bot,
        type="conversation",
        target_id=conversation.id,
        conversation=conversation,
        **fields,
    )


def expired(state: State, seconds: float = 1) -> State:
    """The state, as if its expiry had passed `seconds` ago (unswept)."""
    state.expiry = 60_000
    state.expires_at = timezone.now() - timedelta(seconds=seconds)
    state.save()
    return state


def url(state: State, suffix: str = "") -> str:
    return f"/v1/chat/states/{state.type}/{state.target_id}/{state.name}{suffix}"


def expired_events() -> list[Event]:
    return list(Event.objects.filter(type="state_expired").order_by("id"))


# --- idleness -------------------------------------------------------------------------


def test_every_write_moves_the_expiry_and_reads_do_not(runtime_client, bot):
    client = runtime_client()
    state = StateFactory(bot=bot)
    path = url(state)

    def expires_at() -> datetime:
        moment = State.objects.get().expires_at
        assert moment is not None
        return moment

    client.post(path, {"payload": {"a": 1}, "expiry": 60_000}, format="json")
    writes = [expires_at()]
    for method, suffix, body in (
        ("post", "", {"payload": {"a": 2}}),
        ("patch", "", {"payload": {"b": 1}}),
        ("post", "/expiry", {"expiry": 60_000}),
    ):
        response = getattr(client, method)(f"{path}{suffix}", body, format="json")
        assert response.status_code == 200, response.content
        writes.append(expires_at())
        updated_at = State.objects.get().updated_at
        assert writes[-1] == updated_at + timedelta(minutes=1)
    assert writes == sorted(writes) and len(set(writes)) == len(writes)

    assert client.get(path).status_code == 200
    assert client.post(f"{path}/get-or-set", {"payload": {}}, format="json").status_code == 200
    assert expires_at() == writes[-1]


# --- an expired state is absent -------------------------------------------------------


def test_an_expired_state_reads_as_absent_before_it_is_swept(runtime_client, bot):
    client = runtime_client()
    state = expired(StateFactory(bot=bot))
    assert client.get(url(state)).status_code == 404
    assert State.objects.filter(pk=state.pk).exists()  # a read retires nothing
    assert not expired_events()


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [("patch", "", {"payload": {"a": 1}}), ("post", "/expiry", {"expiry": 1000})],
)
def test_a_change_of_an_expired_state_is_404_and_retires_it(
    runtime_client, conversation, method, suffix, body
):
    state = expired(conversation_state(conversation))
    response = getattr(runtime_client(), method)(url(state, suffix), body, format="json")
    assert response.status_code == 404, response.content
    assert not State.objects.exists()
    [event] = expired_events()
    assert event.payload == {"state": state_json(state)}


@pytest.mark.parametrize(
    ("suffix", "status"), [("", 200), ("/get-or-set", 201)], ids=["set", "get-or-set"]
)
def test_a_write_replaces_an_unswept_expired_state_and_it_expires_once(
    runtime_client, conversation, suffix, status
):
    old = expired(conversation_state(conversation, payload={"cart": ["a"]}))
    response = runtime_client().post(url(old, suffix), {"payload": {"cart": []}}, format="json")
    assert response.status_code == status, response.content
    fresh = response.json()["state"]
    assert fresh["id"] != old.id and fresh["payload"] == {"cart": []}
    assert fresh["createdAt"] == fresh["updatedAt"]
    assert "expiry" not in fresh  # the old state's expiry went with it
    [event] = expired_events()
    assert event.payload == {"state": state_json(old)}
    assert event.payload["state"]["payload"] == {"cart": ["a"]}
    assert event.conversation_id == conversation.id
    # The clock finds nothing more to retire: the bot hears of it once.
    assert states_expire(now=timezone.now()) == 0
    assert len(expired_events()) == 1


def test_a_delete_of_an_expired_state_is_404(runtime_client, bot):
    state = expired(StateFactory(bot=bot))
    response = runtime_client().post(url(state), {"payload": None}, format="json")
    assert response.status_code == 404
    assert len(expired_events()) == 1 and not State.objects.exists()


# --- the clock ------------------------------------------------------------------------


def test_the_clock_turns_expired_states_into_events_and_deletes_them(bot, conversation):
    user = UserFactory(bot=bot)
    workflow = WorkflowFactory(bot=bot)
    of_conversation = expired(conversation_state(conversation, name="cart"), seconds=3)
    of_user = expired(
        StateFactory(bot=bot, type="user", target_id=user.id, user=user, name="profile"),
        seconds=2,
    )
    of_workflow = expired(
        StateFactory(bot=bot, type="workflow", target_id=workflow.id, workflow=workflow),
        seconds=1,
    )
    of_bot = expired(StateFactory(bot=bot, name="global"), seconds=0.5)
    later = StateFactory(bot=bot, name="later", expiry=60_000)
    later.expires_at = timezone.now() + timedelta(minutes=1)
    later.save()
    never = StateFactory(bot=bot, name="never")

    assert states_expire(now=timezone.now()) == 4

    assert set(State.objects.values_list("pk", flat=True)) == {later.pk, never.pk}
    events = expired_events()
    assert [event.payload["state"]["id"] for event in events] == [
        of_conversation.id,
        of_user.id,
        of_workflow.id,
        of_bot.id,
    ]
    for event, state in zip(events, (of_conversation, of_user, of_workflow, of_bot), strict=True):
        assert event.payload == {"state": state_json(state)}
        assert event.bot_id == bot.id
        assert event.status == EventStatus.PENDING and event.next_attempt_at is not None
    assert (events[0].conversation_id, events[0].user_id) == (conversation.id, None)
    assert (events[1].conversation_id, events[1].user_id) == (None, user.id)
    assert events[2].workflow_id == workflow.id
    assert (events[3].conversation_id, events[3].user_id, events[3].workflow_id) == (None,) * 3
    assert events[0].payload["state"]["conversationId"] == conversation.id
    assert events[0].payload["state"]["expiry"] == 60_000
    assert "expiresAt" in events[0].payload["state"]


def test_the_clock_takes_them_in_batches_until_one_is_short(bot):
    for number in range(5):
        expired(StateFactory(bot=bot, name=f"s{number}"), seconds=number + 1)
    assert states_expire(now=timezone.now(), batch=2) == 5
    assert len(expired_events()) == 5 and not State.objects.exists()
    assert states_expire(now=timezone.now(), batch=2) == 0


def test_a_claim_retires_expired_states_and_delivers_their_events(bot):
    state = expired(StateFactory(bot=bot))
    deliveries_claim(limit=10)
    assert not State.objects.filter(pk=state.pk).exists()
    [event] = expired_events()
    # The next claim takes it, like any event due now.
    claimed = deliveries_claim(limit=10)
    assert claimed.event_ids == [event.id]


def test_the_next_expiry_is_the_clocks_next_due(bot):
    now = timezone.now()
    assert state_next_expiry(after=now) is None
    soon = StateFactory(bot=bot, name="soon", expiry=1000, expires_at=now + timedelta(seconds=30))
    StateFactory(bot=bot, name="later", expiry=1000, expires_at=now + timedelta(minutes=5))
    StateFactory(bot=bot, name="gone", expiry=1000, expires_at=now - timedelta(seconds=1))
    StateFactory(bot=bot, name="never")
    assert state_next_expiry(after=now) == soon.expires_at
    assert deliveries_claim(limit=10).next_due == pytest.approx(soon.expires_at.timestamp())


def test_the_next_expiry_is_one_indexed_read(bot, django_assert_num_queries):
    StateFactory(bot=bot, expiry=1000, expires_at=timezone.now() + timedelta(seconds=30))
    with django_assert_num_queries(1):
        state_next_expiry(after=timezone.now())


def test_states_of_a_deleted_conversation_never_expire(bot, conversation):
    expired(conversation_state(conversation))
    conversation.delete()
    assert states_expire(now=timezone.now()) == 0
    assert not expired_events()


# --- waking the clock -----------------------------------------------------------------


def test_a_write_that_expires_soon_wakes_a_worker_once_committed(
    runtime_client, bot, wakes, django_capture_on_commit_callbacks
):
    client = runtime_client()
    path = f"/v1/chat/states/bot/{bot.id}/session"
    with django_capture_on_commit_callbacks(execute=True):
        client.post(path, {"payload": {}, "expiry": 60_000}, format="json")
    assert wakes == []  # the workers look again before then
    with django_capture_on_commit_callbacks(execute=True):
        client.post(path, {"payload": {}, "expiry": 100}, format="json")
    assert wakes == [None]
