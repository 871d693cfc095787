"""Where served processes spend their CPU: py-spy sampling running
processes (no restart, no instrumentation) and a summary of its samples by
function, on their own (self) and with what they call (inclusive)."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.project import PYTHON

PY_SPY = str(Path(PYTHON).parent / "py-spy")


@contextmanager
def sampled(
    pids: dict[str, list[int]], seconds: float, out: Path, gil: bool = False, rate: int = 250
) -> Iterator[None]:
    """Sample every process of `pids` (role -> pids) for `seconds` while the
    block runs; each process's samples go to out/{role}-{pid}.txt in
    py-spy's raw format. `gil`: only the thread holding the interpreter
    lock (where a process's Python CPU goes); otherwise every running thread.
    `rate`: samples a second of each process."""
    out.mkdir(parents=True, exist_ok=True)
    spies = [
        subprocess.Popen(
            [
                PY_SPY,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(max(1, int(seconds))),
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--output",
                str(out / f"{role}-{pid}.txt"),
                "--nonblocking",
                *(["--gil"] if gil else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for role, group in pids.items()
        for pid in group
    ]
    try:
        yield
    finally:
        for spy in spies:
            spy.wait(timeout=seconds + 60)


def samples_of(out: Path, role: str) -> str:
    """The raw samples of every process of `role` under `out`, together."""
    return "".join(path.read_text() for path in sorted(out.glob(f"{role}-*.txt")))


def report(collapsed: str, top: int) -> None:
    """py-spy's raw format: one line per distinct stack, frames joined by ';'
    (outermost first), then the sample count."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [
            frame.split(" (")[0] + " " + frame.split("/")[-1].rstrip(")")
            for frame in stack.split(";")
        ]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    print(f"{total} samples of running threads")
    if not total:
        return
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"\n== by {title}")
        for frame, count in counter.most_common(top):
            print(f"  {count / total * 100:5.1f}%  {frame}")
