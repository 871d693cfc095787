"""Requests refused before a view runs still get the one error body: a Host
that is not served (Django), and a request that does not parse as HTTP
(uvicorn, with the protocol platform_site/Procfile selects). A bad Host is
one line in the log, at WARNING."""

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import assert_error
from tests.raw_http import send_raw
from tests.servers import Server


def test_a_bad_host_is_400_and_one_line_at_warning(api_client, caplog):
    with caplog.at_level(logging.DEBUG):
        response = api_client.get("/healthz", HTTP_HOST="evil.example")
    body = assert_error(response, 400, "InvalidPayload")
    assert "Host" in body["message"] and "evil" not in body["message"]
    # Nothing else is logged at WARNING or above: no trace, no ERROR.
    [line] = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert (line.levelno, line.name, line.exc_info) == (
        logging.WARNING,
        "platform_site.errors",
        None,
    )
    message = line.getMessage()
    assert body["id"] in message and "'evil.example'" in message and "\n" not in message


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """uvicorn as the Procfile starts it. Nothing here reaches the database."""
    folder: Path = tmp_path_factory.mktemp("server")
    env = {**os.environ, "DATA_DIR": str(folder / "data"), "PYTHONUNBUFFERED": "1"}
    started = Server(name="web", env=env, folder=folder)
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(
            b"POST /v1/chat/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
            id="content-length not a number",
        ),
        pytest.param(
            b"POST /v1/chat/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            id="two content-lengths",
        ),
        pytest.param(
            b"GET /v1/\xff\xfe\x01 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            id="raw bytes in the target",
        ),
        pytest.param(b"GET /a b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id="space in the target"),
        pytest.param(b"HELLO\r\n\r\n", id="no request line"),
    ],
)
def test_a_request_that_does_not_parse_gets_the_error_body(server, request_bytes):
    answer = send_raw(server, request_bytes)
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"
    assert int(answer.headers["content-length"]) == len(answer.content)
    body = assert_error(answer, 400, "InvalidPayload")
    assert body["id"] in server.log()


def test_a_bad_host_through_the_server(server):
    answer = send_raw(
        server, b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
    )
    assert answer.headers["content-type"] == "application/json"
    body = assert_error(answer, 400, "InvalidPayload")
    log = server.log()
    assert "Traceback" not in log and "ERROR" not in log
    [line] = [line for line in log.splitlines() if body["id"] in line]
    assert "[warning  ]" in line and "[platform_site.errors]" in line
    assert f"error_id={body['id']}" in line


def test_a_websocket_upgrade_gets_the_error_body_not_a_500(server):
    answer = send_raw(
        server,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n"
        b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    assert answer.headers["content-type"] == "application/json"
    body = assert_error(answer, 400, "InvalidPayload")
    assert "Upgrade: websocket" in body["message"]
    log = server.log()
    assert body["id"] in log
    assert "Traceback" not in log and "Internal Server Error" not in log


def test_an_upload_to_a_bogus_url_is_refused_before_its_body_is_read(server):
    # A gigabyte announced, not a byte of it sent: the refusal comes at once.
    answer = send_raw(
        server,
        b"PUT /v1/uploads/not-a-signed-token HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: text/plain\r\nContent-Length: 1073741824\r\n\r\n",
    )
    assert_error(answer, 403, "Forbidden")
