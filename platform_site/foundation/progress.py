"""Progress of long management commands: a bar on a terminal, nothing in a
pipe, a log or a file, so that there a command's output is its summary alone.
Every command draws it on its stderr, never its stdout, which may be data
(`seed_demo --json > demo.json`)."""

from typing import Never

from django.core.management.base import OutputWrapper
from tqdm import tqdm


def _unstyled(text: str) -> str:
    return text


class _BarStream:
    """A command's OutputWrapper as tqdm needs it: the wrapper would end every
    redraw of the line with a newline, and colour it as an error on a
    terminal."""

    def __init__(self, stream: OutputWrapper) -> None:
        self._stream = stream

    def write(self, text: str) -> None:
        self._stream.write(text, style_func=_unstyled, ending="")

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str | None:
        # tqdm draws its bar in Unicode blocks only on a stream that says UTF-8.
        return getattr(self._stream, "encoding", None)

    def fileno(self) -> int:
        # tqdm reads the terminal's width through it.
        return int(self._stream.fileno())


def command_progress(
    *, stream: OutputWrapper, verbosity: int, desc: str, unit: str, total: int | None = None
) -> "tqdm[Never]":  # generic in its stubs only
    """A bar counting `unit`s, advanced with `.update(n)`; use it as a context
    manager. It shows only when `stream` (the command's self.stderr) is a
    terminal and the command runs at verbosity 1 or more; once done, its last
    state stays on its line, above the summary the command prints."""
    return tqdm(
        desc=desc,
        total=total,
        unit=unit,
        file=_BarStream(stream),
        # None: tqdm draws nothing unless the stream is a terminal.
        disable=None if verbosity > 0 else True,
        dynamic_ncols=True,
    )
