"""The runner `make run` starts the service with (platform_site/procfile_runner.py):
the processes of a Procfile, their lines prefixed with their names, all
stopped when one ends or on Ctrl-C / SIGTERM. Real processes, a Procfile of
small Python commands."""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.worker import PROJECT_DIR

PYTHON = sys.executable


def procfile(folder: Path, scripts: dict[str, str]) -> Path:
    """A Procfile of a process per script (its source), each run by Python."""
    lines = []
    for name, source in scripts.items():
        script = folder / f"{name}.py"
        script.write_text(source)
        lines.append(f"{name}: {PYTHON} {script}\n")
    path = folder / "Procfile"
    path.write_text("# the processes of the test\n\n" + "".join(lines))
    return path


def runner(path: Path, *names: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "-m", "platform_site.procfile_runner", "-f", str(path), *names],
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def lines_of(output: str, name: str) -> list[str]:
    """The text of the lines prefixed `HH:MM:SS name |`."""
    pattern = re.compile(rf"^\d\d:\d\d:\d\d {re.escape(name)} +\| (.*)$")
    return [match[1] for line in output.splitlines() if (match := pattern.match(line))]


def wait_for_line(process: subprocess.Popen[str], text: str, timeout: float = 20.0) -> str:
    """What the runner printed up to the first line holding `text`."""
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"no line with {text!r} in:\n{seen}")


def test_every_line_comes_out_whole_with_its_process_name(tmp_path):
    mark = tmp_path / "other-spoke"
    path = procfile(
        tmp_path,
        {
            # Once the other has spoken (its mark made), so that the runner,
            # which stops everything when this one ends, has its line too.
            "many": (
                "import os, sys, time\n"
                f"while not os.path.exists({str(mark)!r}): time.sleep(0.01)\n"
                "for n in range(5000): print('line', n)\nsys.stdout.write('unended')"
            ),
            "other": (
                "import time\nprint('from the other', flush=True)\n"
                f"open({str(mark)!r}, 'w').close()\ntime.sleep(60)"
            ),
        },
    )
    process = runner(path)
    output, _ = process.communicate(timeout=30)
    many = lines_of(output, "many.1")
    assert many[1:5001] == [f"line {n}" for n in range(5000)]
    # A last line without its line break still comes out, whole.
    assert "unended" in many
    assert "from the other" in lines_of(output, "other.1")


def test_when_one_process_ends_the_others_are_stopped_and_its_status_is_the_runner_s(tmp_path):
    path = procfile(
        tmp_path,
        {
            "lasting": "import time\nprint('up', flush=True)\ntime.sleep(60)",
            "failing": "import time\ntime.sleep(0.5)\nraise SystemExit(3)",
        },
    )
    process = runner(path)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 3
    assert "exited with code 3" in lines_of(output, "failing.1")
    assert "sending SIGTERM" in lines_of(output, "lasting.1")


def test_sigterm_stops_each_process_its_own_way_and_the_runner_exits_0(tmp_path):
    path = procfile(
        tmp_path,
        {
            "graceful": (
                "import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda *a: (print('stopping', flush=True),"
                " sys.exit(0)))\n"
                "print('up', flush=True)\n"
                "time.sleep(60)"
            ),
        },
    )
    process = runner(path)
    wait_for_line(process, "up")
    process.send_signal(signal.SIGINT)  # as Ctrl-C
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert lines_of(output, "graceful.1")[-2:] == ["stopping", "exited with code 0"]


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path, monkeypatch):
    path = procfile(
        tmp_path,
        {
            "stubborn": (
                "import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('up', flush=True)\n"
                "time.sleep(60)"
            ),
        },
    )
    process = subprocess.Popen(
        [
            PYTHON,
            "-c",
            "import sys; import platform_site.procfile_runner as r; r.STOP_GRACE_SECONDS = 1;"
            f" sys.exit(r.main(['-f', {str(path)!r}]))",
        ],
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for_line(process, "up")
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert "still running after 1 s: SIGKILL" in lines_of(output, "stubborn.1")
    assert process.returncode == 0


def test_only_the_processes_named_are_started(tmp_path):
    path = procfile(tmp_path, {"one": "print('one')", "two": "print('two')"})
    process = runner(path, "two")
    output, _ = process.communicate(timeout=30)
    assert lines_of(output, "one.1") == []
    assert "two" in lines_of(output, "two.1")


def test_a_name_not_in_the_procfile_is_refused(tmp_path):
    path = procfile(tmp_path, {"one": "print('one')"})
    process = runner(path, "three")
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 2 and "three" in output


@pytest.mark.parametrize("line", ["no colon here", ": nameless", "empty:"])
def test_a_line_that_is_not_a_procfile_line_is_refused(tmp_path, line):
    path = tmp_path / "Procfile"
    path.write_text(line + "\n")
    process = runner(path)
    output, _ = process.communicate(timeout=30)
    assert process.returncode != 0 and "not a Procfile line" in output


def test_ctrl_c_at_a_terminal_ends_make_quietly_and_with_0(tmp_path):
    """Ctrl-C signals the terminal's foreground process group: the runner
    takes it for itself, so that make, its parent, is not interrupted
    ("make: *** [run] Interrupt", status 130) but ends with the runner's 0."""
    import os
    import pty
    import select
    import shutil

    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    path = procfile(
        tmp_path,
        {"server": "import time\nprint('up', flush=True)\ntime.sleep(60)"},
    )
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        f"run:\n\tcd {PROJECT_DIR} && {PYTHON} -m platform_site.procfile_runner -f {path}\n"
    )
    pid, terminal = pty.fork()
    if pid == 0:  # the child, at the terminal: make, as a user types it
        os.execv(make, [make, "-s", "-f", str(makefile), "run"])
    output = b""

    def read_until(text: bytes, timeout: float) -> None:
        nonlocal output
        deadline = time.monotonic() + timeout
        while text not in output and time.monotonic() < deadline:
            if select.select([terminal], [], [], 0.2)[0]:
                try:
                    output += os.read(terminal, 65536)
                except OSError:  # the terminal closed: everything has ended
                    return

    read_until(b"up", 20)
    os.write(terminal, b"\x03")
    read_until(b"\x00never", 15)
    _, status = os.waitpid(pid, 0)
    text = output.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "Interrupt" not in text
    assert "server.1" in text and "stopped" in text
