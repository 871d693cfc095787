"""The official webchat's start, measured as users run the service: make
run's web (the Procfile's web line, one process a core), worker and beat,
on PostgreSQL and Redis (broker, live-stream bus, rate limits out of reach).

    .venv/bin/python bench/webchat.py [--users 1000 --spread 10 --rounds 3] [--no-browser]

1. initialize against listen: --users end users connect open loop, evenly
   over --spread seconds, each holding its stream open until all have
   connected (then all hang up).
   - initialize: `GET {CHAT_URL}/{webhookId}/initialize` with no key and no
     conversation id: the server makes a user, its key and a conversation,
     then streams; latency = request start -> the first message (`init`)
     fully received;
   - baseline, listen: as many users made beforehand through the chat
     interface, each with a conversation, `GET …/conversations/{id}/listen`
     with its `x-user-key`; latency = request start -> the first message (a
     ping) received.
   p50, p90, p99 and max of each, the ratio initialize / listen (p50, p99),
   the web processes' CPU per connection. A warm-up of a few of each first;
   then --rounds rounds, the order alternating. A phase is measured again
   (up to 3 times) while other processes took more than 0.3 cores during it.
2. browser (--browser, on when Debian's chromium and chromedriver are
   installed): a seeded demo bot answered by examples/echo_bot.py, started as
   the Procfile's demo_bot line starts it; headless Chromium (as
   tests/browser.py configures it) opens `{CHAT_URL}/{webhookId}/webchat` and
   sends BROWSER_MESSAGES messages one after the other, typed into the
   composer + Enter. Latency = the Enter key's keydown -> the bot's reply
   `You said: <text>` in the DOM, both timed in the page (performance.now(),
   a MutationObserver).

Checks (exit 1 when one fails): every initialize answered 200 with `init`
first, carrying the user's `userKey` and a conversation, all different, and
the database holds as many new users and conversations; every listen
answered 200 with a ping first and made no row; no stream ended by the
server while held; the demo workspace's chat limits out of reach; in the
browser, every reply seen and stored (one user message and one bot reply
each).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import api, live, load, machine, servers  # noqa: E402
from harness.project import HIGH_LIMIT, ROOT, Project, bus_project  # noqa: E402
from harness.report import indent, log, ms, percentile, spread, verdict  # noqa: E402

DB = "bench_webchat"
QUIET_WAIT = 60.0  # seconds to wait for a quiet machine before a phase
ATTEMPTS = 3  # of a phase spoilt by background load
CONNECT_TIMEOUT = 120.0  # after the last request, for the last first message
SETTLE = 1.0  # seconds after the hang-up, counted in the phase's CPU
WARMUP_USERS = 20
BROWSER_MESSAGES = 20
REPLY_TIMEOUT = 30.0
PHASES = ("initialize", "listen")

# In the page: the Enter key's keydown (capture, before the webchat's own
# handler) and the moment the awaited text is in the DOM, on the page's clock.
PAGE_TIMERS = r"""
window.__bench = {want: null, pressed: null, seen: null};
document.addEventListener('keydown', (event) => {
  const b = window.__bench;
  if (event.key === 'Enter' && b.want !== null && b.pressed === null) b.pressed = performance.now();
}, true);
new MutationObserver(() => {
  const b = window.__bench;
  if (b.want !== null && b.seen === null && document.body.textContent.includes(b.want)) {
    b.seen = performance.now();
  }
}).observe(document.body, {childList: true, subtree: true, characterData: true});
"""


# ---------------------------------------------------------------- the platform


@dataclass
class Platform:
    """make run's processes on the run's project."""

    proj: Project
    web: servers.AsgiServer
    engine: servers.Engine

    @property
    def chat_url(self) -> str:
        return f"{self.web.base_url}/chat"

    @property
    def groups(self) -> dict[str, list[int]]:
        return {
            "web": self.web.pids(),
            "worker": machine.tree(self.engine.worker),
            "beat": [self.engine.beat],
            "redis": machine.pids_named("redis-server"),
        }

    def rows(self, bot_id: str) -> dict[str, int]:
        """The bot's end users and conversations."""
        row = self.proj.scalar(
            "SELECT json_build_array((SELECT count(*) FROM bots_user WHERE bot_id = %s), "
            "(SELECT count(*) FROM bots_conversation WHERE bot_id = %s))",
            (bot_id, bot_id),
        )
        return {"users": int(row[0]), "conversations": int(row[1])}


@contextlib.contextmanager
def platform() -> Iterator[Platform]:
    """A fresh project on PostgreSQL and Redis, served as `make run` serves
    it: the web on a port it knows beforehand (PUBLIC_BASE_URL, whence
    CHAT_URL, names it, as make run's defaults name port 8000), worker, beat."""
    with bus_project(DB, queue="bench-webchat") as proj:
        port = servers.free_port()
        proj.env["PUBLIC_BASE_URL"] = f"http://127.0.0.1:{port}"
        with (
            servers.procfile_web(proj, workers=machine.cores(), port=port) as web,
            servers.engine(proj, proj.env["CELERY_QUEUE"]) as engine,
        ):
            yield Platform(proj, web, engine)


def limits_checked(plat: Platform) -> list[str]:
    """The demo workspace's chat limits (address, and the users made from an
    address and for the bot: initialize without a key counts against them;
    user) are out of reach, as the harness sets them."""
    values = plat.proj.scalar(
        "SELECT json_build_array(s.chat_address_rate_limit_per_minute, "
        "s.chat_address_user_creation_rate_limit_per_minute, "
        "s.chat_user_creation_rate_limit_per_hour, "
        "s.chat_user_rate_limit_per_minute) FROM bots_workspacesettings s "
        "JOIN bots_bot b ON b.workspace_id = s.workspace_id WHERE b.id = %s",
        (plat.proj.demo["botId"],),
    )
    if min(values) < HIGH_LIMIT:
        return [
            "the demo workspace's chat limits (address, users made from an address, "
            f"users made for the bot, user) are {values}: not out of reach"
        ]
    return []


# ---------------------------------------------------------------- 1. initialize against listen


@dataclass
class Start:
    """One initialize: when it was requested, its answer, its first message."""

    requested_at: float = 0.0
    status: int = 0
    first_at: float = 0.0
    first: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    ended: bool = False  # the server ended the stream
    connected: asyncio.Event = field(default_factory=asyncio.Event)


async def initialize(session: aiohttp.ClientSession, url: str, start: Start) -> None:
    """One webchat's start, read as live.listen reads a listener's stream:
    the first message's arrival, then the stream held until cancelled."""
    loop = asyncio.get_running_loop()
    try:
        start.requested_at = loop.time()
        async with session.get(url, headers={"Accept": "text/event-stream"}) as answer:
            start.status = answer.status
            if answer.status != 200:
                start.error = f"HTTP {answer.status}: {(await answer.text())[:200]}"
                return
            async for line in answer.content:
                now = loop.time()
                if line.startswith(b"data: ") and not start.first_at:
                    start.first_at = now
                    start.first = json.loads(line[6:])
                    start.connected.set()
            start.ended = True
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        start.error = repr(exc)
    finally:
        start.connected.set()


@dataclass
class Held:
    """A phase's streams, all connected and held, then hung up."""

    name: str
    latencies: list[float]
    problems: list[str]
    all_in: float  # first request -> last first message, s
    lag: list[float]  # the client's event loop lateness
    init_ids: list[tuple[str, str, str]] = field(default_factory=list)  # user, key, conversation


async def hold_open(
    n: int,
    spread_s: float,
    open_one: Callable[[aiohttp.ClientSession, int], Coroutine[Any, Any, None]],
    ready: list[asyncio.Event],
) -> tuple[float, list[float]]:
    """`n` streams opened open loop, evenly over `spread_s` seconds, each held
    until every one has its first message (or failed); then all hung up.
    Answers (first request -> last first message in s, the loop's lag)."""
    loop = asyncio.get_running_loop()
    lag: list[float] = []
    stop = asyncio.Event()
    lag_task = asyncio.create_task(load.loop_lag(lag, stop))
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None),
    )
    tasks: list[asyncio.Task[None]] = []
    began = loop.time() + 0.05
    try:
        async for i, _ in load.on_schedule(began, n / spread_s, n):
            tasks.append(asyncio.create_task(open_one(session, i)))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await asyncio.gather(*(event.wait() for event in ready))
        all_in = loop.time() - began
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()
        await lag_task
    await asyncio.sleep(SETTLE)  # the servers let go of the streams
    return all_in, lag


async def initialize_phase(plat: Platform, n: int, spread_s: float) -> Held:
    url = f"{plat.chat_url}/{plat.proj.demo['webhookId']}/initialize"
    starts = [Start() for _ in range(n)]
    all_in, lag = await hold_open(
        n,
        spread_s,
        lambda session, i: initialize(session, url, starts[i]),
        [s.connected for s in starts],
    )
    problems: list[str] = []
    latencies: list[float] = []
    ids: list[tuple[str, str, str]] = []
    for start in starts:
        data = start.first.get("data") or {}
        user, conversation = data.get("user") or {}, data.get("conversation") or {}
        if start.status != 200 or start.error:
            problems.append(f"not answered 200 ({start.error or start.status})")
        elif start.first.get("type") != "init":
            problems.append(f"first message not init: {str(start.first)[:80]}")
        elif not (user.get("userKey") and user.get("id") and conversation.get("id")):
            problems.append("init without user.userKey, user.id or conversation.id")
        else:
            latencies.append(start.first_at - start.requested_at)
            ids.append((user["id"], user["userKey"], conversation["id"]))
        if start.ended:
            problems.append("stream ended by the server while held")
    for column, name in enumerate(("user ids", "keys", "conversation ids")):
        if len({item[column] for item in ids}) != len(ids):
            problems.append(f"init {name} not all different")
    return Held("initialize", latencies, problems, all_in, lag, ids)


async def listen_phase(plat: Platform, rooms: list[api.Room], spread_s: float) -> Held:
    webhook = plat.proj.demo["webhookId"]
    gate = asyncio.Semaphore(len(rooms))  # never closed: the schedule sets the pace
    listeners = [live.Listener(room=i, member=room.members[0]) for i, room in enumerate(rooms)]

    def open_one(session: aiohttp.ClientSession, i: int) -> Coroutine[Any, Any, None]:
        url = f"{plat.chat_url}/{webhook}/conversations/{rooms[i].conversation_id}/listen"
        return live.listen(session, url, listeners[i], gate)

    all_in, lag = await hold_open(
        len(rooms), spread_s, open_one, [item.connected for item in listeners]
    )
    problems: list[str] = []
    latencies: list[float] = []
    for item in listeners:
        if item.status != 200 or item.error:
            problems.append(f"not answered 200 ({item.error or item.status})")
        elif not item.pings or item.other_types or item.arrivals:
            problems.append(f"first message not a ping ({dict(item.other_types)})")
        else:
            latencies.append(item.pings[0] - item.requested_at)
        if item.ended:
            problems.append("stream ended by the server while held")
    return Held("listen", latencies, problems, all_in, lag)


Attempt = machine.Attempt[Held]


def measured_phase(
    plat: Platform,
    name: str,
    rooms: list[api.Room],
    args: argparse.Namespace,
    attempts: int = ATTEMPTS,
) -> list[Attempt]:
    """One phase (all its attempts), its rows counted and its CPU accounted."""
    n = len(rooms)

    def run() -> Coroutine[Any, Any, Held]:
        if name == "initialize":
            return initialize_phase(plat, n, args.spread * n / args.users)
        return listen_phase(plat, rooms, args.spread * n / args.users)

    return asyncio.run(
        machine.measure_async(
            name,
            run,
            count=lambda: plat.rows(plat.proj.demo["botId"]),
            groups=plat.groups,
            quiet_wait=QUIET_WAIT,
            attempts=attempts,
        )
    )


def phase_checked(label: str, attempts: list[Attempt], n: int) -> list[str]:
    """Every attempt's streams right, and the rows it made: N users and N
    conversations for initialize, none for listen."""
    failures = []
    for attempt in attempts:
        held = attempt.result
        where = f"{label} {held.name} (attempt {attempt.attempt})"
        counted: dict[str, int] = {}
        for problem in held.problems:
            counted[problem] = counted.get(problem, 0) + 1
        failures += [f"{where}: {times} of {n}: {problem}" for problem, times in counted.items()]
        want = n if held.name == "initialize" else 0
        if attempt.stored != {"users": want, "conversations": want}:
            failures.append(f"{where}: {want} users and conversations expected, {attempt.stored}")
    return failures


def start_rounds(
    plat: Platform, args: argparse.Namespace, failures: list[str]
) -> dict[str, list[Attempt]]:
    """The listen phase's users, a warm-up, then the rounds, order
    alternating; every attempt checked, the last of each phase reported."""
    log(f"{args.users} users with a conversation each, through the chat interface")
    rooms = api.make_rooms_sync(
        plat.web.base_url, plat.proj.demo["webhookId"], rooms=args.users, per_room=1
    )
    log(f"warm-up: {WARMUP_USERS} of each")
    for name in PHASES:
        warm = measured_phase(plat, name, rooms[:WARMUP_USERS], args, attempts=1)
        failures += phase_checked("warm-up", warm, WARMUP_USERS)
    reported: dict[str, list[Attempt]] = {name: [] for name in PHASES}
    for r in range(args.rounds):
        for name in PHASES if r % 2 == 0 else PHASES[::-1]:
            log(f"round {r + 1}: {name}, {args.users} users over {args.spread:g} s")
            attempts = measured_phase(plat, name, rooms, args)
            failures += phase_checked(f"round {r + 1}", attempts, args.users)
            reported[name].append(attempts[-1])
    return reported


# ---------------------------------------------------------------- 2. the browser round trip


@dataclass
class Trips:
    """The browser's round trips: Enter -> reply in the DOM, ms each."""

    url: str
    browser: str
    page_ready: float  # s, driver.get -> the composer in the DOM
    latencies: list[float]  # ms
    stored: dict[str, int]


@contextlib.contextmanager
def echo_bot(proj: Project, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """examples/echo_bot.py as the Procfile's demo_bot line starts it (on
    DATA_DIR/demo.json and ECHO_BOT_PORT), until it listens."""
    line = servers.procfile_command("demo_bot")
    log(f"Procfile demo_bot: {line} (ECHO_BOT_PORT={port})")
    log_path = proj.data_dir / "echo_bot.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "-c", f"exec {line}"],
            cwd=ROOT,
            env={**proj.env, "ECHO_BOT_PORT": str(port)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("echo bot did not start:\n" + log_path.read_text())
            time.sleep(0.1)
        yield process
    finally:
        servers.stop_process(process)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver, as tests/browser.py
    configures it (nothing downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tests.browser import CHROMEDRIVER, PAGE_LOAD_TIMEOUT, chrome_options

    os.environ["SE_OFFLINE"] = "1"
    driver = webdriver.Chrome(
        service=Service(executable_path=str(CHROMEDRIVER)), options=chrome_options()
    )
    try:
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
        yield driver
    finally:
        driver.quit()


def conversation_typed(driver: Any, composer: Any, count: int) -> list[float]:
    """`count` messages typed one after the other, each awaited: Enter ->
    `You said: <text>` in the DOM, ms (nan when it never came)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    run = secrets.token_hex(3)
    latencies = []
    for i in range(count):
        text = f"webchat bench {run} {i:02d}"
        driver.execute_script(
            "window.__bench.want = arguments[0]; window.__bench.pressed = null; "
            "window.__bench.seen = null;",
            f"You said: {text}",
        )
        composer.send_keys(text + Keys.ENTER)
        try:
            WebDriverWait(driver, REPLY_TIMEOUT).until(
                lambda d: d.execute_script("return window.__bench.seen !== null")
            )
        except TimeoutException:
            latencies.append(float("nan"))
            continue
        pressed, seen = driver.execute_script(
            "return [window.__bench.pressed, window.__bench.seen]"
        )
        latencies.append(seen - pressed if pressed is not None else float("nan"))
    return latencies


def browser_round_trip(plat: Platform) -> Trips:
    """A demo bot of its own (seed_demo pointed at the echo bot), the echo
    bot, and Chromium at its webchat."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    proj = plat.proj
    port = servers.free_port()
    out = proj.manage("seed_demo", "--json", "--webhook-url", f"http://127.0.0.1:{port}/")
    text = out.strip().splitlines()[-1]
    (proj.data_dir / "demo.json").write_text(text)
    demo = json.loads(text)
    url = f"{demo['chatUrl']}/{demo['webhookId']}/webchat"
    with echo_bot(proj, port), chromium() as driver:
        machine.wait_for_quiet(QUIET_WAIT)
        log(f"Chromium at {url}: {BROWSER_MESSAGES} messages")
        opened = time.monotonic()
        driver.get(url)
        composer = WebDriverWait(driver, REPLY_TIMEOUT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "textarea.bpComposerInput")
        )
        page_ready = time.monotonic() - opened
        driver.execute_script(PAGE_TIMERS)
        latencies = conversation_typed(driver, composer, BROWSER_MESSAGES)
        version = str(driver.capabilities.get("browserVersion", "?"))
    time.sleep(1)  # a late reply would still be stored
    stored = {
        "user": int(
            proj.scalar(
                "SELECT count(*) FROM bots_message WHERE bot_id = %s AND NOT is_bot "
                "AND payload->>'text' LIKE 'webchat bench %%'",
                (demo["botId"],),
            )
        ),
        "bot": int(
            proj.scalar(
                "SELECT count(*) FROM bots_message WHERE bot_id = %s AND is_bot "
                "AND payload->>'text' LIKE 'You said: webchat bench %%'",
                (demo["botId"],),
            )
        ),
    }
    return Trips(url, version, page_ready, latencies, stored)


def trips_checked(trips: Trips) -> list[str]:
    failures = []
    missed = sum(value != value for value in trips.latencies)  # nan: never seen
    if missed:
        failures.append(f"browser: {missed} of {BROWSER_MESSAGES} replies not seen in the page")
    want = {"user": BROWSER_MESSAGES, "bot": BROWSER_MESSAGES}
    if trips.stored != want:
        failures.append(f"browser: stored {trips.stored}, expected {want}")
    return failures


# ---------------------------------------------------------------- report


def server_log_problems(plat: Platform) -> list[str]:
    """Lines of the web's log that tell of an error (it logs at WARNING)."""
    text = plat.web.log_path.read_text(errors="replace")
    return [
        line
        for line in text.splitlines()
        if any(word in line for word in ("Error", "ERROR", "Traceback", "Exception"))
    ]


def cpu_line(attempt: Attempt, n: int) -> str:
    cpu = attempt.cpu
    per = "  ".join(
        f"{group} {cpu.per_request_ms(group, n):.3f}"
        for group in ("web", "postgres", "redis", "client")
    )
    return (
        f"CPU ms/connection: {per}; other {cpu.other:.2f} cores "
        f"(attempt {attempt.attempt}, background {attempt.background:.2f} before)"
    )


def print_starts(args: argparse.Namespace, reported: dict[str, list[Attempt]]) -> None:
    print()
    print(
        f"== 1. initialize against listen: {args.users} end users connecting open loop over "
        f"{args.spread:g} s, each holding its stream until all have connected"
    )
    print(
        f"make run's web ({servers.procfile_command('web')}, {machine.cores()} processes, "
        f"access log on), worker, beat; PostgreSQL; Redis broker, bus and rate limiter "
        f"(chat limits {HIGH_LIMIT:,} a minute); aiohttp client, a connection per user"
    )
    for r in range(args.rounds):
        for name in PHASES if r % 2 == 0 else PHASES[::-1]:
            attempt = reported[name][r]
            held = attempt.result
            print(f"  round {r + 1} {name:10s} {spread(held.latencies)}")
            print(
                f"      all connected {held.all_in:.1f} s after the first request; client loop "
                f"lag p99 {ms(percentile(held.lag, 99))}"
            )
            print(indent(cpu_line(attempt, args.users), "      "))


def pooled(reported: dict[str, list[Attempt]], name: str) -> list[float]:
    return [value for attempt in reported[name] for value in attempt.result.latencies]


def print_result(
    args: argparse.Namespace,
    reported: dict[str, list[Attempt]],
    trips: Trips | None,
    log_problems: list[str],
) -> None:
    print()
    print("RESULT webchat")
    print(f"  {args.users} users over {args.spread:g} s, {args.rounds} rounds (pooled)")
    for name in PHASES:
        print(f"  {name:10s} request -> first message  {spread(pooled(reported, name))}")
    init, base = pooled(reported, "initialize"), pooled(reported, "listen")
    ratios = {q: percentile(init, q) / percentile(base, q) for q in (50, 99)}
    print(
        f"  ratio initialize / listen   p50 {ratios[50]:6.2f} x   p99 {ratios[99]:6.2f} x   "
        f"(target p99 <= 1.5: {'met' if ratios[99] <= 1.5 else 'NOT met'})"
    )
    rounds = [
        f"{percentile(i.result.latencies, 50) / percentile(b.result.latencies, 50):.2f}/"
        f"{percentile(i.result.latencies, 99) / percentile(b.result.latencies, 99):.2f}"
        for i, b in zip(reported["initialize"], reported["listen"], strict=True)
    ]
    print(f"  ratio p50/p99 by round      {'  '.join(rounds)}")
    web = {
        name: sorted(a.cpu.per_request_ms("web", args.users) for a in reported[name])
        for name in PHASES
    }
    mid = {name: values[len(values) // 2] for name, values in web.items()}
    print(
        f"  web CPU per connection (median of rounds): initialize {mid['initialize']:.3f} ms, "
        f"listen {mid['listen']:.3f} ms, ratio {mid['initialize'] / mid['listen']:.2f} x"
    )
    if trips is not None:
        values = [v for v in trips.latencies if v == v]
        print(
            f"  browser, Enter -> 'You said: …' in the DOM  p50 {percentile(values, 50):8.1f}  "
            f"p90 {percentile(values, 90):8.1f}  max {max(values, default=float('nan')):8.1f} ms"
            f"  (n={len(values)})"
        )
    print(f"  web log: {len(log_problems)} error lines")
    for line in log_problems[:10]:
        print(f"    {line[:200]}")
    noisy = [
        f"round {r + 1} {name} {a.cpu.other:.2f}"
        for name in PHASES
        for r, a in enumerate(reported[name])
        if a.cpu.other > machine.BACKGROUND_LIMIT
    ]
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")


def print_trips(trips: Trips) -> None:
    print()
    print(f"== 2. the browser round trip: headless Chromium {trips.browser} at {trips.url}")
    print(
        f"make run's web, worker, beat and demo_bot ({servers.procfile_command('demo_bot')}); "
        f"page opened -> composer in the DOM {trips.page_ready * 1000:.0f} ms"
    )
    print(
        f"  {BROWSER_MESSAGES} messages typed one after the other, Enter (keydown) -> the "
        f"bot's 'You said: <text>' in the DOM (performance.now(), MutationObserver):"
    )
    print("  each (ms): " + " ".join(f"{v:.0f}" for v in trips.latencies))
    print(f"  stored: {trips.stored['user']} user messages, {trips.stored['bot']} bot replies")


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    browser = all(os.access(p, os.X_OK) for p in ("/usr/bin/chromium", "/usr/bin/chromedriver"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--users", type=int, default=1000, help="end users connecting")
    parser.add_argument("--spread", type=float, default=10, help="seconds they connect over")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of initialize and listen")
    parser.add_argument(
        "--browser",
        action=argparse.BooleanOptionalAction,
        default=browser,
        help="the browser round trip (default: on when chromium and chromedriver are installed)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    machine.raise_file_limit(2 * args.users + 1000)
    machine.start("== the official webchat's start: initialize against listen; the browser")
    started = time.monotonic()
    failures: list[str] = []
    trips: Trips | None = None
    with platform() as plat:
        failures += limits_checked(plat)
        reported = start_rounds(plat, args, failures)
        if args.browser:
            trips = browser_round_trip(plat)
            failures += trips_checked(trips)
        log_problems = server_log_problems(plat)
    print_starts(args, reported)
    if trips is not None:
        print_trips(trips)
    print_result(args, reported, trips, log_problems)
    log(f"done in {time.monotonic() - started:.0f} s")
    return verdict(
        failures,
        "  correctness: every initialize 200 with init first (userKey, conversation; all "
        "different) and its user and conversation stored; every listen 200 with a ping "
        "first, nothing stored; no stream ended while held"
        + ("; every browser reply seen and stored" if trips is not None else ""),
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
