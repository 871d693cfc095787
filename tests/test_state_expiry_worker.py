"""A state's expiry end to end: set through the runtime API with an expiry,
then, once idle that long, retired by a real Celery worker's claim and
delivered to the bot's webhook (a local receiver) as a `state_expired` event.

Waits poll; nothing here asserts on speed, only on order."""

from datetime import datetime
from typing import Any

import pytest

from chat.models import State
from tests.factories import ConversationFactory
from tests.worker import celery_queue, wait_until, workers

__all__ = ["celery_queue", "workers"]  # fixtures, used by name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The receiver's clock and the worker's are the same clock, read at different
# moments and rounded differently: allow this much.
CLOCK_TOLERANCE = 0.05


def test_a_worker_delivers_state_expired_once_the_state_is_idle(
    runtime_client, hooked, receiver, workers
):
    conversation = ConversationFactory(bot=hooked)
    workers.start(beat=False)
    client = runtime_client()
    path = f"/v1/chat/states/conversation/{conversation.id}/cart"

    # Seconds ahead, so that a loaded machine still finds it alive.
    response = client.post(path, {"payload": {"items": 2}, "expiry": 3000}, format="json")
    assert response.status_code == 200, response.content
    state: dict[str, Any] = response.json()["state"]
    assert client.get(path).status_code == 200

    [request] = receiver.wait_for(1, timeout=30)
    delivered = request.json()
    assert delivered["type"] == "state_expired"
    assert delivered["payload"] == {"state": state}
    assert delivered["conversationId"] == conversation.id
    expires_at = datetime.fromisoformat(state["expiresAt"].replace("Z", "+00:00"))
    assert request.at >= expires_at.timestamp() - CLOCK_TOLERANCE, "delivered before it expired"

    wait_until(lambda: not State.objects.exists(), message="the state was deleted", workers=workers)
    assert client.get(path).status_code == 404
    assert len(receiver.requests) == 1
