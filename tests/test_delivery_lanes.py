"""Lanes: how a worker process shares its requests in flight between bots,
cuts the share of a failing webhook and gives it back, and which bots it
stops claiming for."""

from events.engine import lanes as lanes_module
from events.engine.delivery import Delivery
from events.engine.lanes import Lanes
from events.engine.webhook_client import WebhookRequest

NOW = 1_795_000_000.0
_counter = iter(range(1_000_000))


def delivery(bot_id: str, *, send_by: float | None = None) -> Delivery:
    return Delivery(
        event_id=f"evt_{next(_counter)}",
        bot_id=bot_id,
        lease=1,
        due=NOW,
        send_by=send_by or NOW + 40,
        request=WebhookRequest(
            url="http://bot.example/hook",
            message_id="evt",
            body="{}",
            secrets=("whsec_x",),
            timeout=10.0,
        ),
        attempt_count=0,
        first_attempt_at=None,
    )


def queue(lanes: Lanes, bot_id: str, count: int) -> list[Delivery]:
    queued = [delivery(bot_id) for _ in range(count)]
    for each in queued:
        lanes.hold(bot_id)
        lanes.push(each)
    return queued


def pop_all(lanes: Lanes) -> list[Delivery]:
    popped = []
    while (each := lanes.pop()) is not None:
        popped.append(each)
    return popped


def test_a_bot_gets_at_most_its_share_in_flight():
    lanes = Lanes(concurrency=100, per_bot=5, max_held=200)
    queue(lanes, "bot_a", 20)
    assert len(pop_all(lanes)) == 5
    assert lanes.active == 5
    assert lanes.queued == 15
    # One answer frees one slot of the bot's, and only one.
    lanes.done("bot_a", seconds=0.05, congested=False, now=0.0)
    assert len(pop_all(lanes)) == 1


def test_when_slots_run_out_they_go_round_robin_between_bots():
    lanes = Lanes(concurrency=6, per_bot=6, max_held=100)
    queue(lanes, "bot_busy", 30)
    queue(lanes, "bot_b", 5)
    queue(lanes, "bot_c", 5)
    first = [each.bot_id for each in pop_all(lanes)]
    assert first == ["bot_busy", "bot_b", "bot_c"] * 2
    # Freed slots keep alternating: the busy bot does not take them all.
    for bot_id in first:
        lanes.done(bot_id, seconds=0.01, congested=False, now=0.0)
    assert [each.bot_id for each in pop_all(lanes)] == ["bot_busy", "bot_b", "bot_c"] * 2


def test_a_failing_webhook_has_its_share_halved_at_most_once_a_second():
    lanes = Lanes(concurrency=100, per_bot=64, max_held=1000)
    queue(lanes, "bot_down", 200)
    assert len(pop_all(lanes)) == 64
    # Sixty timeouts that come back together are one signal.
    for _ in range(60):
        lanes.done("bot_down", seconds=10.0, congested=True, now=100.0)
    assert lanes.lane("bot_down").limit == 32
    lanes.done("bot_down", seconds=10.0, congested=True, now=100.5)
    assert lanes.lane("bot_down").limit == 32
    # 3 in flight, under the limit of 32: 29 more go.
    assert len(pop_all(lanes)) == 29
    # A second apart, the next failures cut it again, down to the floor.
    for moment in range(101, 120):
        lanes.done("bot_down", seconds=10.0, congested=True, now=float(moment))
    assert lanes.lane("bot_down").limit == lanes_module.FLOOR
    # 13 in flight, over the floor: nothing more is sent until 11 more end.
    assert pop_all(lanes) == []
    for _ in range(11):
        lanes.done("bot_down", seconds=10.0, congested=True, now=120.0)
    assert len(pop_all(lanes)) == 0
    lanes.done("bot_down", seconds=10.0, congested=True, now=120.0)
    assert len(pop_all(lanes)) == 1


def test_answers_give_the_share_back_one_by_one():
    lanes = Lanes(concurrency=100, per_bot=8, max_held=1000)
    lane = lanes.lane("bot_x")
    lane.limit = 2
    queue(lanes, "bot_x", 50)
    sent = len(pop_all(lanes))
    for _ in range(10):
        lanes.done("bot_x", seconds=0.05, congested=False, now=0.0)
        sent += len(pop_all(lanes))
    assert lane.limit == 8
    assert lanes.active == sent - 10 == 8


def test_4xx_and_2xx_do_not_cut_a_share_only_congestion_does():
    lanes = Lanes(concurrency=100, per_bot=8, max_held=1000)
    queue(lanes, "bot_x", 3)
    pop_all(lanes)
    lanes.done("bot_x", seconds=0.05, congested=False, now=0.0)
    assert lanes.lane("bot_x").limit == 8
    lanes.done("bot_x", seconds=0.05, congested=True, now=0.0)
    assert lanes.lane("bot_x").limit == 4


def test_a_bot_is_claimed_for_until_it_holds_what_it_can_send_in_a_second():
    lanes = Lanes(concurrency=100, per_bot=10, max_held=500)
    # Before it has answered, a bot may hold its share and no more.
    queue(lanes, "bot_new", 9)
    assert lanes.saturated() == []
    queue(lanes, "bot_new", 1)
    assert lanes.saturated() == ["bot_new"]
    # Fast answers: it may hold what it sends in QUEUE_SECONDS.
    lane = lanes.lane("bot_new")
    lane.seconds = 0.05
    assert lane.hold_limit(500) == 200
    assert lanes.saturated() == []
    # A black hole at the floor holds the floor.
    lane.seconds, lane.limit = 10.0, 2
    assert lane.hold_limit(500) == 2
    assert lanes.saturated() == ["bot_new"]
    # Never more than the process may hold at all.
    lane.seconds, lane.limit = 0.0001, 10
    assert lane.hold_limit(500) == 500


def test_deliveries_that_can_no_longer_start_in_time_are_taken_out():
    lanes = Lanes(concurrency=1, per_bot=1, max_held=100)
    late = delivery("bot_a", send_by=NOW - 1)
    early = delivery("bot_a", send_by=NOW + 5)
    for each in (early, late):
        lanes.hold("bot_a")
        lanes.push(each)
    assert lanes.take_expired(NOW) == [late]
    assert lanes.queued == 1
    assert lanes.pop() is early


def test_taking_everything_empties_the_queues():
    lanes = Lanes(concurrency=2, per_bot=2, max_held=100)
    queued = queue(lanes, "bot_a", 3) + queue(lanes, "bot_b", 2)
    sent = pop_all(lanes)
    left = lanes.take_all()
    assert sorted(d.event_id for d in sent + left) == sorted(d.event_id for d in queued)
    assert lanes.queued == 0
    assert lanes.pop() is None


def test_idle_lanes_are_forgotten_unless_lately_cut():
    lanes = Lanes(concurrency=10, per_bot=4, max_held=100)
    for bot_id in ("bot_fine", "bot_cut"):
        queue(lanes, bot_id, 1)
        pop_all(lanes)
        lanes.done(bot_id, seconds=1.0, congested=bot_id == "bot_cut", now=50.0)
        lanes.unhold(bot_id)
    lanes.forget_idle(now=60.0)
    assert [lane.bot_id for lane in lanes] == ["bot_cut"]
    assert lanes.throttled()[0].limit == 2
    lanes.forget_idle(now=50.0 + lanes_module.FORGET_SECONDS + 1)
    assert list(lanes) == []
