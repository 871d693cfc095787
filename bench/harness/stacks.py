"""py-spy on served processes under load: their stacks recorded while a
phase runs, then read back as shares of samples by function."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@contextmanager
def recorded(
    pids: list[int], out: Path, seconds: float, *, rate: int = 200, gil: bool = False
) -> Iterator[None]:
    """py-spy on each of `pids` for `seconds` (`gil`: only the thread holding
    the GIL), raw (collapsed) stacks to `out`.<pid>.txt; waits for them at the end."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    runs = [
        subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
             "--rate", str(rate), "--format", "raw", "--threads", "--nonblocking",
             *(["--gil"] if gil else []), "--output", f"{out}.{pid}.txt"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for pid in pids
    ]  # fmt: skip
    try:
        yield
    finally:
        for run in runs:
            run.wait()


def files(out: Path) -> list[Path]:
    """What `recorded` wrote for `out`."""
    return sorted(out.parent.glob(out.name + ".*.txt"))


@dataclass
class Samples:
    count: int
    own: dict[str, int]  # by the frame running
    total: dict[str, int]  # by every frame on the stack

    def top(self, by: dict[str, int], count: int, indent: str = "    ") -> list[str]:
        ranked = sorted(by.items(), key=lambda item: -item[1])[:count]
        return [f"{indent}{hits / self.count:6.1%}  {frame[:140]}" for frame, hits in ranked]


def samples(out: Path) -> Samples:
    """Every stack `recorded` wrote for `out`, its thread and process frames left out."""
    read = Samples(count=0, own={}, total={})
    for path in files(out):
        for line in path.read_text().splitlines():
            stack, _, weight = line.rpartition(" ")
            if not weight.isdigit():
                continue
            frames = [
                frame
                for frame in stack.split(";")
                if frame and not frame.startswith(("thread", "process"))
            ]
            read.count += int(weight)
            if frames:
                read.own[frames[-1]] = read.own.get(frames[-1], 0) + int(weight)
            for frame in set(frames):
                read.total[frame] = read.total.get(frame, 0) + int(weight)
    return read


def summary(out: Path, count: int = 25) -> str:
    """Own and total samples by function over everything `recorded` wrote for `out`."""
    read = samples(out)
    if not read.count:
        return "  (no samples)"
    return "\n".join(
        [
            f"  {read.count} samples; own time:",
            *read.top(read.own, count),
            "  total time:",
            *read.top(read.total, count),
        ]
    )
