"""Hosts on one machine: network namespaces joined by a bridge, each with a
veth link of its own, so that the platform's processes run as they would on
separate machines, reaching PostgreSQL, Redis and RabbitMQ over a network
(forwarded from this machine's loopback by socat on the bridge's address)
and each other only through it. A host's link can be cut mid-test.

Needs root, iproute2 and socat (CI's machine has them)."""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.servers import UVICORN, Server
from tests.worker import Worker

# What the hosts reach on the bridge's address, forwarded to this machine's
# loopback: PostgreSQL, Redis, RabbitMQ. Each host through forwarders of its
# own (on ports of its own), so that what a host cut off leaves open (its
# database sessions, maybe in a transaction) can be closed by stopping them.
FORWARDED_PORTS = (5432, 6379, 5672)
DEFAULT_PORTS = {"postgres": 5432, "postgresql": 5432, "redis": 6379, "amqp": 5672}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def hosts_supported() -> str | None:
    """Why hosts cannot be made here, if they cannot."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "socat"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    link: str  # the veth end on the bridge's side
    gateway: str
    number: int
    forwarders: list[subprocess.Popen[bytes]] = field(default_factory=list)
    is_cut: bool = False

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def port(self, port: int) -> int:
        """Where this host reaches the store this machine serves on `port`."""
        return 20_000 + port % 10_000 + self.number * 10

    def url(self, url: str) -> str:
        """`url` (a store on this machine's loopback) as this host reaches it
        ("" for none stays "")."""
        if not url:
            return url
        parts = urlsplit(url)
        netloc = f"{self.gateway}:{self.port(parts.port or DEFAULT_PORTS[parts.scheme])}"
        if "@" in parts.netloc:
            netloc = parts.netloc.rsplit("@", 1)[0] + "@" + netloc
        return urlunsplit(parts._replace(netloc=netloc))

    def forward(self) -> None:
        for port in FORWARDED_PORTS:
            self.forwarders.append(
                subprocess.Popen(
                    [
                        "socat",
                        # Keepalives on the host's side, as a store reached
                        # directly would have them (the engine's sessions ask
                        # PostgreSQL for them): a cut host's connections end,
                        # and so do the forwarded ones, within seconds.
                        f"TCP-LISTEN:{self.port(port)},bind={self.gateway},fork,reuseaddr,"
                        "keepalive,keepidle=2,keepintvl=1,keepcnt=3",
                        f"TCP:127.0.0.1:{port}",
                    ],
                    # Its connections' children with it, to stop them together.
                    start_new_session=True,
                )
            )

    def forwarders_stop(self) -> None:
        for forwarder in self.forwarders:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(forwarder.pid, signal.SIGTERM)
            forwarder.wait()
        self.forwarders.clear()

    def cut(self) -> None:
        """Its link down: nothing reaches it, nothing leaves it."""
        _ip("link", "set", "dev", self.link, "down")
        self.is_cut = True

    def mend(self) -> None:
        """After a cut: what it left open closed, its link up again."""
        self.forwarders_stop()
        self.forward()
        _ip("link", "set", "dev", self.link, "up")
        self.is_cut = False


@dataclass
class Network:
    bridge: str
    gateway: str  # the bridge's address: the stores, forwarded
    hosts: dict[str, Host] = field(default_factory=dict)


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    """A bridge and four hosts on it: web1, web2, worker1, worker2."""
    reason = hosts_supported()
    if reason:
        pytest.skip(reason)
    with hosts_made(("web1", "web2", "worker1", "worker2")) as made:
        yield made


@contextlib.contextmanager
def hosts_made(names: tuple[str, ...]) -> Iterator[Network]:
    """A bridge and a host on it for each of `names` (at most 9), removed
    afterwards whatever happened (bench/many_hosts.py uses it too)."""
    tag = f"{os.getpid() % 100_000}"
    subnet = f"10.231.{os.getpid() % 200 + 20}"
    made = Network(bridge=f"bpb{tag}", gateway=f"{subnet}.1")
    try:
        _ip("link", "add", made.bridge, "type", "bridge")
        _ip("addr", "add", f"{made.gateway}/24", "dev", made.bridge)
        _ip("link", "set", made.bridge, "up")
        for number, name in enumerate(names, start=1):
            host = Host(
                name=name,
                namespace=f"bp{tag}{name}",
                address=f"{subnet}.{10 + number}",
                link=f"bpv{tag}h{number}",
                gateway=made.gateway,
                number=number,
            )
            peer = f"bpp{tag}h{number}"
            _ip("netns", "add", host.namespace)
            _ip("link", "add", host.link, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", host.namespace)
            _ip("link", "set", host.link, "master", made.bridge)
            _ip("link", "set", host.link, "up")
            _ip("-n", host.namespace, "link", "set", peer, "name", "eth0")
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.namespace, "link", "set", "eth0", "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
            made.hosts[name] = host
            host.forward()
        time.sleep(0.2)  # the forwarders listening
        yield made
    finally:
        for host in made.hosts.values():
            host.forwarders_stop()
        for host in made.hosts.values():
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
        subprocess.run(["ip", "link", "del", made.bridge], capture_output=True)


class HostServer(Server):
    """`Server` (uvicorn as the test suite starts it) on a host, on its address."""

    def __init__(self, *, host: Host, env: dict[str, str], folder: Path, port: int) -> None:
        self.host = host
        super().__init__(name=host.name, env=env, folder=folder, port=port)
        self.url = f"http://{host.address}:{self.port}"

    def command(self) -> list[str]:
        command = super().command()
        command[command.index("--host") + 1] = self.host.address
        assert command[0] == str(UVICORN)
        return [*self.host.prefix(), *command]


class HostWorker(Worker):
    """`Worker` (celery worker as the test suite starts it) on a host."""

    def __init__(self, *, host: Host, env: dict[str, str], folder: Path, beat: bool) -> None:
        self.host = host
        super().__init__(name=host.name, env=env, beat=beat, folder=folder)

    def _spawn(self, command: list[str], env: dict[str, str]) -> None:
        super()._spawn([*self.host.prefix(), *command], env)
