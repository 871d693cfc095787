"""Runs the processes of a Procfile together, as `make run` starts the
service (web, worker, beat and the demo bot), their output on one terminal,
each line prefixed with the time and the process's name.

    python -m platform_site.procfile_runner [-f platform_site/Procfile] [NAME ...]

Its output costs little per line: the processes' pipes are read in chunks
on one thread and written out a chunk at a time. (honcho, which ran them
before, passed each line from a reader process to its printer through a
multiprocessing queue and flushed it alone: BENCHMARKS.md §16.)

When one process ends, the others are stopped, and the runner exits with
its status. Ctrl-C (SIGINT) or SIGTERM stops them all: each gets SIGTERM,
its own, not its children's (Celery's worker stops its pool itself), and
SIGKILL to its whole process group after STOP_GRACE_SECONDS; then the
runner exits 0. At a terminal, Ctrl-C reaches the runner alone
(terminal_taken), so that `make run` ends with it, quietly and with 0."""

import argparse
import ctypes
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

STOP_GRACE_SECONDS = 10.0
READ_SIZE = 65536
# After a read, the runner lets output pile up this long before it reads
# again: under load a web process writes an access line a request, and one
# wake-up and one write a line cost the runner about 70 µs each.
GATHER_SECONDS = 0.01
# Colours of the names, in the order of the Procfile (on a terminal only).
COLOURS = (36, 33, 32, 35, 34, 31)


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    colour: int
    # What came after the last line break of its output so far.
    partial: bytes = b""
    open: bool = True


@dataclass
class Runner:
    children: list[Child] = field(default_factory=list)
    colour: bool = False
    width: int = 0
    stopping: bool = False
    stop_sent_at: float | None = None
    exit_code: int = 0

    def start(self, entries: list[tuple[str, str]], cwd: Path) -> None:
        self.width = max(len(name) for name, _ in entries) + 3
        for index, (name, command) in enumerate(entries):
            label = f"{name}.1"
            process = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {command}"],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                preexec_fn=_child_setup,
            )
            os.set_blocking(process.stdout.fileno(), False)  # type: ignore[union-attr]
            child = Child(label, process, COLOURS[index % len(COLOURS)])
            self.children.append(child)
            self.say(f"started with pid {process.pid}", child)

    def say(self, text: str, child: Child | None = None) -> None:
        """A line of the runner's own."""
        name = child.name if child else "system"
        self.write(self.prefixed(name, child.colour if child else 0, [text.encode()]))

    def prefixed(self, name: str, colour: int, lines: list[bytes]) -> bytes:
        prefix = f"{time.strftime('%H:%M:%S')} {name.ljust(self.width)}| "
        if self.colour and colour:
            prefix = f"\033[0m\033[{colour}m{prefix}\033[0m"
        head = prefix.encode()
        return b"".join(head + line + b"\n" for line in lines)

    @staticmethod
    def write(data: bytes) -> None:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:  # the reader went away: keep supervising
            pass

    def relay(self, child: Child) -> bool:
        """Whatever the child wrote since: its whole lines, prefixed, in one
        write; a line it has not ended yet waits for its end. Whether
        anything came (its pipe does not block)."""
        try:
            data = os.read(child.process.stdout.fileno(), READ_SIZE)  # type: ignore[union-attr]
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            child.open = False
            if child.partial:
                self.write(self.prefixed(child.name, child.colour, [child.partial]))
                child.partial = b""
            return False
        lines = (child.partial + data).split(b"\n")
        child.partial = lines.pop()
        if lines:
            self.write(self.prefixed(child.name, child.colour, lines))
        return True

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.stop_sent_at = time.monotonic()
        for child in self.children:
            if child.process.poll() is None:
                self.say("sending SIGTERM", child)
                child.process.send_signal(signal.SIGTERM)

    def kill_late(self) -> None:
        if self.stop_sent_at is None or time.monotonic() - self.stop_sent_at < STOP_GRACE_SECONDS:
            return
        for child in self.children:
            if child.process.poll() is None:
                self.say(f"still running after {STOP_GRACE_SECONDS:g} s: SIGKILL", child)
                try:
                    os.killpg(child.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.stop_sent_at = None

    def run(self) -> int:
        selector = selectors.DefaultSelector()
        for child in self.children:
            selector.register(child.process.stdout, selectors.EVENT_READ, child)  # type: ignore[arg-type]
        running = list(self.children)
        while running:
            ready = selector.select(timeout=0.5)
            for key, _ in ready:
                self.relay(key.data)
            for key in list(selector.get_map().values()):
                if not key.data.open:
                    selector.unregister(key.fileobj)
            for child in list(running):
                code = child.process.poll()
                if code is None:
                    continue
                # What it wrote last (a process it left behind may hold the
                # pipe open: the runner does not wait for it).
                while child.open and self.relay(child):
                    pass
                running.remove(child)
                # Ended by the SIGTERM the runner sent: what was asked, no failure.
                stopped = self.stopping and code == -signal.SIGTERM
                self.say("stopped" if stopped else f"exited with code {code}", child)
                if not self.stopping:
                    self.exit_code = code
                    self.stop()
            self.kill_late()
            if ready:
                time.sleep(GATHER_SECONDS)
        return self.exit_code


def _child_setup() -> None:
    """In each child, before its command: out of the terminal's process
    group (Ctrl-C reaches the runner alone, which stops each process its own
    way), and, on Linux, sent SIGTERM should the runner die without
    stopping it (killed with SIGKILL, say), rather than left running."""
    os.setsid()
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def terminal_taken() -> Callable[[], None]:
    """At a terminal, the runner leads a process group of its own and makes it
    the terminal's foreground one; answers what gives the terminal back.

    Ctrl-C signals the terminal's foreground process group: without this,
    make's too, and make, though the runner stops everything cleanly and exits
    0, then dies of the signal ("make: *** [run] Interrupt", status 130).
    Run from no terminal (CI, a supervisor), nothing changes."""
    try:
        terminal = sys.stdin.fileno()
        previous = os.tcgetpgrp(terminal)
    except (OSError, ValueError):
        return lambda: None

    def foreground(group: int) -> None:
        # A background group that sets the foreground is sent SIGTTOU.
        handler = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(terminal, group)
        finally:
            signal.signal(signal.SIGTTOU, handler)

    try:
        os.setpgid(0, 0)
        foreground(os.getpgrp())
    except OSError:
        return lambda: None
    return lambda: foreground(previous)


def procfile_entries(path: Path) -> list[tuple[str, str]]:
    entries = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, separator, command = line.partition(":")
        if not separator or not name.strip() or not command.strip():
            raise SystemExit(f"{path}: not a Procfile line: {line!r}")
        entries.append((name.strip(), command.strip()))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-f", "--procfile", type=Path, default=Path("platform_site/Procfile"))
    parser.add_argument("-d", "--directory", type=Path, default=Path("."))
    parser.add_argument("names", nargs="*", help="the processes to run (all by default)")
    args = parser.parse_args(argv)
    entries = procfile_entries(args.procfile)
    if args.names:
        unknown = set(args.names) - {name for name, _ in entries}
        if unknown:
            parser.error(f"not in {args.procfile}: {', '.join(sorted(unknown))}")
        entries = [entry for entry in entries if entry[0] in args.names]
    runner = Runner(colour=sys.stdout.isatty())

    def stop(signum: int, frame: object) -> None:
        runner.stop()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    give_back = terminal_taken()
    try:
        runner.start(entries, args.directory)
        return runner.run()
    finally:
        give_back()


if __name__ == "__main__":
    sys.exit(main())
