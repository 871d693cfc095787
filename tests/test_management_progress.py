"""Long management commands (seed_demo, reindex_bot_files,
purge_expired_events, rotate_secret_encryption_keys): a progress bar on a
terminal, on stderr only; in a pipe, their summary alone. And what the two
thin commands over services do: re-index a bot's files, purge expired events."""

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from datetime import timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from bots.models import Bot
from events.models import Event, EventStatus
from events.services.retention import events_purge_expired_batches
from files.models import File, FileStatus, Passage
from files.services.file_uploads import file_upload_receive
from files.services.files import file_upsert
from files.signed_urls import UploadGrant
from tests.documents import garbage_pdf
from tests.factories import BotFactory, EventFactory, FileFactory, WorkspaceFactory
from tests.worker import PROJECT_DIR, celery_queue, worker_database_url  # noqa: F401

PYTHON = PROJECT_DIR / ".venv" / "bin" / "python"
RUN_TIMEOUT = 60.0
# What a bar draws, and never in a pipe: its percentage, or a redraw.
BAR_MARKS = ("%|", "\r", "it/s", "/s]")


def run(*args: str) -> tuple[str, str]:
    """call_command with stdout and stderr StringIOs (no terminal): both outputs."""
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def assert_no_bar(*outputs: str) -> None:
    for output in outputs:
        for mark in BAR_MARKS:
            assert mark not in output, output


def run_on_terminal(*args: str, queue: str = "") -> tuple[str, str]:
    """`manage.py …` in a subprocess on the test database, its stderr a
    pseudo-terminal 120 columns wide, its stdout a pipe: answers its stdout
    and what the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": worker_database_url(),
            "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
            "DATA_DIR": str(django_settings.DATA_DIR),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if queue:
        env["CELERY_QUEUE"] = queue
    with subprocess.Popen(
        [str(PYTHON), "manage.py", *args],
        cwd=PROJECT_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    ) as process:
        os.close(slave)
        shown = bytearray()
        deadline = time.monotonic() + RUN_TIMEOUT
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1.0)
                if not ready:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every end of the terminal closed
                    break
                if not chunk:
                    break
                shown += chunk
        finally:
            os.close(master)
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
        code = process.wait(timeout=RUN_TIMEOUT)
    terminal = shown.decode(errors="replace")
    assert code == 0, f"exit {code}\nstdout:\n{stdout}\nterminal:\n{terminal}"
    return stdout, terminal


def indexed_file(bot: Bot, key: str, data: bytes, content_type: str) -> File:
    """A file uploaded with index: true (indexing_pending), its bytes stored."""
    file = file_upsert(bot=bot, key=key, size=len(data), content_type=content_type, index=True)
    return file_upload_receive(
        grant=UploadGrant(file_id=file.id, upload_id=file.upload_id),
        body=io.BytesIO(data),
        length=len(data),
        content_type=content_type,
    )


def expired_event(bot: Bot, *, days_ago: int, status: str = EventStatus.PROCESSED) -> Event:
    event = EventFactory(bot=bot, status=status)
    # updated_at is set on every save; only an update can put it in the past.
    Event.objects.filter(id=event.id).update(updated_at=timezone.now() - timedelta(days=days_ago))
    return event


# reindex_bot_files


@pytest.fixture
def files_of_bot(db: Any, file_storage: Any) -> dict[str, Any]:
    """A bot (workspace without settings) with two readable documents, one
    unreadable, and two files re-indexing leaves alone; another bot's file."""
    bot = BotFactory()
    guide = indexed_file(
        bot, "guide.md", b"# Guide\n\nWelcome.\n\n## Install\n\nRun it.\n", "text/markdown"
    )
    notes = indexed_file(bot, "notes.txt", b"Some notes.\n\nMore notes.\n", "text/plain")
    broken = indexed_file(bot, "broken.pdf", garbage_pdf(), "application/pdf")
    waiting = file_upsert(bot=bot, key="waiting.txt", size=10, index=True)  # no bytes yet
    unindexed = file_upsert(bot=bot, key="plain.txt", size=5)
    unindexed = file_upload_receive(
        grant=UploadGrant(file_id=unindexed.id, upload_id=unindexed.upload_id),
        body=io.BytesIO(b"plain"),
        length=5,
        content_type="text/plain",
    )
    other = indexed_file(BotFactory(), "other.md", b"# Other\n", "text/markdown")
    return {
        "bot": bot,
        "indexed": [guide, notes, broken],
        "readable": [guide, notes],
        "broken": broken,
        "left": [waiting, unindexed],
        "other": other,
    }


def test_reindex_queues_every_indexed_file_after_commit(
    files_of_bot, django_capture_on_commit_callbacks
):
    before = {file.id: file.revision for file in File.objects.all()}
    with django_capture_on_commit_callbacks() as queued:
        out, err = run("reindex_bot_files", files_of_bot["bot"].id)

    assert out == "3 queued, 2 skipped\n"
    assert err == ""
    assert len(queued) == 3  # one index_file task each, sent once its reindex committed
    for file in files_of_bot["indexed"]:
        file.refresh_from_db()
        assert file.status == FileStatus.INDEXING_PENDING
        assert file.revision == before[file.id] + 1
    for file in [*files_of_bot["left"], files_of_bot["other"]]:
        assert File.objects.get(id=file.id).revision == before[file.id]
    assert File.objects.get(id=files_of_bot["left"][1].id).status == FileStatus.UPLOAD_COMPLETED


def test_reindex_inline_indexes_here_and_counts_failures(
    files_of_bot, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as queued:
        out, err = run("reindex_bot_files", files_of_bot["bot"].id, "--inline")

    assert out == "2 indexed, 1 failed, 2 skipped\n"
    assert_no_bar(out, err)
    assert err == ""
    assert queued == []  # no task: nothing waits on a worker
    for file in files_of_bot["readable"]:
        file.refresh_from_db()
        assert file.status == FileStatus.INDEXING_COMPLETED
        assert Passage.objects.filter(file=file).exists()
    broken = File.objects.get(id=files_of_bot["broken"].id)
    assert broken.status == FileStatus.INDEXING_FAILED
    assert broken.failed_status_reason
    other = File.objects.get(id=files_of_bot["other"].id)
    assert other.status == FileStatus.INDEXING_PENDING
    assert not Passage.objects.filter(file=other).exists()


def test_reindex_inline_twice_keeps_one_set_of_passages(files_of_bot):
    run("reindex_bot_files", files_of_bot["bot"].id, "--inline")
    guide = files_of_bot["readable"][0]
    first = list(Passage.objects.filter(file=guide).values_list("content", flat=True))

    out, _ = run("reindex_bot_files", files_of_bot["bot"].id, "--inline")

    assert out == "2 indexed, 1 failed, 2 skipped\n"
    again = list(Passage.objects.filter(file=guide).values_list("content", flat=True))
    assert again == first


@pytest.mark.django_db
def test_reindex_of_an_unknown_bot_is_refused():
    with pytest.raises(CommandError, match=r"No bot has the id 'bot_nope'"):
        run("reindex_bot_files", "bot_nope")


def test_reindex_at_verbosity_0_prints_nothing(files_of_bot):
    out, err = run("reindex_bot_files", files_of_bot["bot"].id, "--inline", "--verbosity", "0")
    assert (out, err) == ("", "")
    assert File.objects.get(id=files_of_bot["broken"].id).status == FileStatus.INDEXING_FAILED


@pytest.mark.django_db(transaction=True)
def test_reindex_draws_a_bar_on_a_terminal(celery_queue):  # noqa: F811
    bot = BotFactory()
    for number in range(3):
        FileFactory(bot=bot, index=True, storage_name=f"{bot.id}/stored-{number}")
    FileFactory(bot=bot, status=FileStatus.UPLOAD_PENDING)

    stdout, terminal = run_on_terminal("reindex_bot_files", bot.id, queue=celery_queue)

    assert stdout == "3 queued, 1 skipped\n"
    assert "3/3" in terminal and "%|" in terminal, terminal
    statuses = File.objects.filter(bot=bot).values_list("status", flat=True)
    assert list(statuses).count(FileStatus.INDEXING_PENDING) == 3


# purge_expired_events


@pytest.fixture
def events_to_purge(db: Any) -> dict[str, list[Event]]:
    """Default retention (30 days): three finished events past it, one
    finished within it, one waiting event past it."""
    bot = BotFactory(workspace=WorkspaceFactory())
    expired = [expired_event(bot, days_ago=31 + number) for number in range(3)]
    kept = [
        expired_event(bot, days_ago=29),
        expired_event(bot, days_ago=400, status=EventStatus.PENDING),
    ]
    return {"expired": expired, "kept": kept}


def remaining() -> set[str]:
    return set(Event.objects.values_list("id", flat=True))


def test_purge_deletes_expired_events_and_keeps_the_rest(events_to_purge, settings):
    settings.EVENT_RETENTION_BATCH = 2
    out, err = run("purge_expired_events")

    assert out == "3 events past their workspace's retention deleted\n"
    assert err == ""
    assert remaining() == {event.id for event in events_to_purge["kept"]}


def test_purge_dry_run_counts_and_deletes_nothing(events_to_purge):
    before = remaining()
    out, err = run("purge_expired_events", "--dry-run")

    assert out == "3 events past their workspace's retention would go\n"
    assert err == ""
    assert remaining() == before


def test_purge_at_verbosity_0_prints_nothing_but_a_dry_runs_count(events_to_purge):
    dry_run = run("purge_expired_events", "--dry-run", "--verbosity", "0")
    assert dry_run == ("3 events past their workspace's retention would go\n", "")
    assert run("purge_expired_events", "--verbosity", "0") == ("", "")
    assert remaining() == {event.id for event in events_to_purge["kept"]}


def test_the_purge_goes_a_batch_at_a_time(events_to_purge, settings):
    settings.EVENT_RETENTION_BATCH = 2
    assert list(events_purge_expired_batches()) == [2, 1]
    assert list(events_purge_expired_batches()) == []


@pytest.mark.django_db(transaction=True)
def test_purge_draws_a_bar_on_a_terminal():
    bot = BotFactory()
    for number in range(3):
        expired_event(bot, days_ago=31 + number)
    kept = expired_event(bot, days_ago=1)

    stdout, terminal = run_on_terminal("purge_expired_events")

    assert stdout == "3 events past their workspace's retention deleted\n"
    assert "3/3" in terminal and "%|" in terminal, terminal
    assert remaining() == {kept.id}


@pytest.mark.django_db(transaction=True)
def test_verbosity_0_draws_no_bar_even_on_a_terminal():
    expired_event(BotFactory(), days_ago=31)

    stdout, terminal = run_on_terminal("purge_expired_events", "--verbosity", "0")

    assert stdout == ""
    assert "%|" not in terminal and "1/1" not in terminal, terminal
    assert remaining() == set()


# rotate_secret_encryption_keys


@pytest.mark.django_db
def test_rotation_prints_its_summary_only_in_a_pipe(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRET_ENCRYPTION_KEYS = [old]
    BotFactory.create_batch(2)
    settings.SECRET_ENCRYPTION_KEYS = [new, old]

    out, err = run("rotate_secret_encryption_keys")

    assert out.splitlines() == [
        "bots.Bot.signing_secret: 2 rotated",
        "bots.Bot.previous_signing_secret: 0 rotated",
        "chat.ChatConnection.encryption_key: 0 rotated",
        "2 secrets rotated in all",
    ]
    assert err == ""
    settings.SECRET_ENCRYPTION_KEYS = [new]
    assert len({bot.signing_secret for bot in Bot.objects.all()}) == 2
    assert run("rotate_secret_encryption_keys", "--verbosity", "0") == ("", "")


@pytest.mark.django_db(transaction=True)
def test_rotation_draws_a_bar_per_field_on_a_terminal():
    BotFactory.create_batch(3)

    stdout, terminal = run_on_terminal("rotate_secret_encryption_keys")

    assert stdout.splitlines()[0] == "bots.Bot.signing_secret: 3 rotated"
    assert stdout.splitlines()[-1] == "3 secrets rotated in all"
    assert re.search(r"bots\.Bot\.signing_secret: +100%\|.*3/3", terminal), terminal


# seed_demo


@pytest.mark.django_db
def test_seed_demo_json_stays_clean_in_a_pipe():
    out, err = run("seed_demo", "--json")
    assert_no_bar(out, err)
    assert err == ""
    assert json.loads(out)["botId"].startswith("bot_")


@pytest.mark.django_db(transaction=True)
def test_seed_demo_draws_its_bar_on_stderr_never_in_the_json():
    stdout, terminal = run_on_terminal("seed_demo", "--json")

    demo = json.loads(stdout)  # nothing but the JSON on stdout
    assert Bot.objects.filter(id=demo["botId"]).exists()
    assert "demo accounts" in terminal and "5/5" in terminal, terminal
    assert_no_bar(stdout)
