"""Every curl line that `make run` prints works against the demo it describes."""

import io
import json
import shlex
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def banner_lines(tmp_path) -> list[str]:
    out = io.StringIO()
    call_command("seed_demo", "--json", stdout=out)
    demo_json = tmp_path / "demo.json"
    demo_json.write_text(out.getvalue().strip().splitlines()[-1])
    banner = io.StringIO()
    call_command("demo_banner", str(demo_json), stdout=banner)
    return banner.getvalue().splitlines()


def banner_curls(tmp_path) -> list[list[str]]:
    return [shlex.split(line) for line in banner_lines(tmp_path) if line.startswith("curl")]


def test_every_curl_line_of_the_banner_succeeds(tmp_path):
    curls = banner_curls(tmp_path)
    assert len(curls) >= 8
    tried = 0
    for words in curls:
        method = words[words.index("-X") + 1]
        url = next(word for word in words if word.startswith(settings.PUBLIC_BASE_URL))
        if url.endswith("/listen"):
            continue  # a stream that does not end; tests/test_chat_live*.py cover it
        headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
        body = words[words.index("-d") + 1] if "-d" in words else None
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        response = APIClient().generic(
            method,
            path,
            data=body or "",
            content_type=headers.pop("Content-Type", "application/json"),
            **{f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()},
        )
        assert response.status_code in (200, 201), (shlex.join(words), response.content)
        json.loads(response.content)
        tried += 1
    assert tried == len(curls) - 1


def test_the_banner_links_the_api_docs(tmp_path):
    [line] = [line for line in banner_lines(tmp_path) if "API docs:" in line]
    docs_url, openapi_url = (word.rstrip(")") for word in line.split() if word.startswith("http"))
    assert docs_url == f"{settings.PUBLIC_BASE_URL}/docs"
    for url in (docs_url, openapi_url):
        assert APIClient().get(urlsplit(url).path).status_code == 200, url


def test_the_banner_links_the_demo_bot_s_webchat_page(tmp_path):
    [line] = [line for line in banner_lines(tmp_path) if "Webchat:" in line]
    url = next(word for word in line.split() if word.startswith("http"))
    response = APIClient().get(urlsplit(url).path)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
