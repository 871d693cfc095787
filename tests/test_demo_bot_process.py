"""`make run`'s demo bot: the Procfile's `demo_bot` line, run by a shell as
platform_site/procfile_runner.py runs it, reads the demo's settings from
DATA_DIR/demo.json, listens on ECHO_BOT_PORT and answers the seeded bot's
signed deliveries; a delivery signed with another secret (a bot of an
earlier `make run`) is refused.
The loop through the service itself is tests/test_chat_round_trip.py."""

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def procfile_command(name: str) -> str:
    for line in (ROOT / "platform_site" / "Procfile").read_text().splitlines():
        label, _, command = line.partition(":")
        if label == name:
            return command.strip()
    raise LookupError(name)


@pytest.fixture
def demo_bot(tmp_path: Path) -> Iterator[int]:
    """The Procfile's demo_bot running on a free port; the port."""
    (tmp_path / "demo.json").write_text(
        json.dumps(
            {
                "baseUrl": "http://127.0.0.1:9",
                "tokens": {"developer": "bp_pat_demo"},
                "botId": "bot_01JDEMO0000000000000000000",
                "webhookSecret": SECRET,
            }
        )
    )
    port = free_port()
    command = procfile_command("demo_bot").replace(".venv/bin/python", sys.executable, 1)
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=ROOT,
        env={**os.environ, "DATA_DIR": str(tmp_path), "ECHO_BOT_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the demo bot did not listen"
                time.sleep(0.1)
        yield port
    finally:
        os.killpg(process.pid, 15)
        process.wait(10)


def signed(secret: str, body: bytes, webhook_id: str) -> dict[str, str]:
    moment = datetime.now(UTC).replace(microsecond=0)
    signature = Webhook(secret).sign(webhook_id, moment, body.decode())
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": signature,
        "Content-Type": "application/json",
    }


def test_the_procfile_s_demo_bot_answers_the_demo_s_deliveries(demo_bot: int):
    body = json.dumps({"id": "evt_1", "type": "greeting", "payload": {}}).encode()
    url = f"http://127.0.0.1:{demo_bot}/"
    assert httpx.post(url, content=body, headers=signed(SECRET, body, "evt_1")).status_code == 200
    other = "whsec_" + "C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
    assert httpx.post(url, content=body, headers=signed(other, body, "evt_1")).status_code == 401
