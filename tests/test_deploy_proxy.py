"""deploy/, proven: the web process as its systemd unit starts it, on a host's
loopback behind Debian's nginx with deploy/nginx/bot-platform.conf (its name
and certificate changed to a test's, self-signed), reached by a client on
another host (network namespaces, tests/hosts.py) over TLS on the proxy's
non-loopback address. Through the proxy: the Django admin's login (CSRF),
the client's own address (what rate limits count), the live stream unbuffered,
an upload of the maximum size, and /metrics closed."""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests.hosts import Host, hosts_made, hosts_supported
from tests.worker import PROJECT_DIR, worker_database_url

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NAME = "bots.test"
ORIGIN = f"https://{NAME}"
UPLOAD_MAX = 8 * 1024 * 1024
SITE = PROJECT_DIR / "deploy" / "nginx" / "bot-platform.conf"


def _reason() -> str | None:
    reason = hosts_supported()
    if reason:
        return reason
    for tool in ("nginx", "openssl", "curl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install nginx-light openssl curl)"
    return None


@dataclass
class Deployment:
    proxy: Host
    client: Host
    folder: Path
    web_log: Path
    demo: dict

    def curl(self, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        """curl on the client host, the proxy's name resolved to its address."""
        command = [
            *self.client.prefix(),
            "curl",
            "--silent",
            "--insecure",
            "--resolve",
            f"{NAME}:443:{self.proxy.address}",
            "--resolve",
            f"{NAME}:80:{self.proxy.address}",
            *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def status(self, path: str, *args: str) -> int:
        done = self.curl("--output", "/dev/null", "--write-out", "%{http_code}", *args, path)
        return int(done.stdout or 0)


def _nginx_conf(folder: Path) -> Path:
    """The deployment's site, its name and certificate the test's, in a main
    configuration whose files are all in `folder`."""
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={NAME}",
            "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    site = SITE.read_text()
    site = site.replace("bots.example.com", NAME)
    site = site.replace("/etc/ssl/bot-platform/fullchain.pem", str(folder / "cert.pem"))
    site = site.replace("/etc/ssl/bot-platform/privkey.pem", str(folder / "key.pem"))
    site = re.sub(r"\n\s*listen \[::\]:\d+[^;]*;", "", site)
    (folder / "site.conf").write_text(site)
    main = folder / "nginx.conf"
    main.write_text(
        f"worker_processes 1;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log;\n"
        "events { worker_connections 256; }\n"
        f"http {{\n  access_log {folder}/access.log;\n"
        f"  client_body_temp_path {folder}/body;\n  proxy_temp_path {folder}/proxy;\n"
        f"  include {folder}/site.conf;\n}}\n"
    )
    return main


def _store_url(host: Host, url: str) -> str:
    """A store's URL as the proxy host reaches it (files and SQLite as they are)."""
    return host.url(url) if url.startswith(("postgres", "redis", "amqp")) else url


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    reason = _reason()
    if reason and os.environ.get("CI"):
        pytest.fail(f"CI must run the deployment's proxy test: {reason}")
    if reason:
        pytest.skip(reason)
    out = io.StringIO()
    call_command("seed_demo", "--json", stdout=out)
    demo = json.loads(out.getvalue())
    get_user_model().objects.create_superuser(
        username="root@proxy.test", email="root@proxy.test", password="proxy-pass-1"
    )
    with hosts_made(("proxy", "client")) as network:
        proxy, client = network.hosts["proxy"], network.hosts["client"]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "DATABASE_URL": _store_url(proxy, worker_database_url()),
            "CELERY_BROKER_URL": _store_url(proxy, django_settings.CELERY_BROKER_URL),
            "LIVE_STREAM_REDIS_URL": _store_url(proxy, django_settings.LIVE_STREAM_REDIS_URL),
            "DATA_DIR": str(tmp_path / "data"),
            "SECRET_KEY": django_settings.SECRET_KEY,
            "SECRET_ENCRYPTION_KEYS": ",".join(django_settings.SECRET_ENCRYPTION_KEYS),
            # As deploy/systemd/bot-platform.env says.
            "PUBLIC_BASE_URL": ORIGIN,
            "ALLOWED_HOSTS": NAME,
            "CSRF_TRUSTED_ORIGINS": ORIGIN,
            "FORWARDED_ALLOW_IPS": "127.0.0.1",
            "FILE_UPLOAD_MAX_SIZE": str(UPLOAD_MAX),
            "LOG_FLUSH_SECONDS": "0",
        }
        web_log = tmp_path / "web.log"
        conf = _nginx_conf(tmp_path)
        with web_log.open("wb") as log:
            # As deploy/systemd/bot-platform-web.service starts it.
            web = subprocess.Popen(
                [
                    *proxy.prefix(),
                    str(PROJECT_DIR / ".venv" / "bin" / "python"),
                    "-m",
                    "platform_site.serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "8000",
                    "--workers",
                    "1",
                ],
                cwd=PROJECT_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        subprocess.run([*proxy.prefix(), "nginx", "-c", str(conf)], check=True)
        deployed = Deployment(proxy, client, tmp_path, web_log, demo)
        try:
            deadline = time.monotonic() + 30
            while deployed.status(f"{ORIGIN}/healthz") != 200:
                assert web.poll() is None, web_log.read_text()
                assert time.monotonic() < deadline, web_log.read_text()
                time.sleep(0.2)
            yield deployed
        finally:
            subprocess.run([*proxy.prefix(), "nginx", "-c", str(conf), "-s", "stop"])
            web.send_signal(signal.SIGTERM)
            try:
                web.wait(timeout=20)
            except subprocess.TimeoutExpired:
                web.kill()
                web.wait()


def test_plain_http_is_sent_to_https_and_metrics_are_closed(deployment):
    redirected = deployment.curl(
        "--write-out", "%{http_code} %{redirect_url}", f"http://{NAME}/healthz"
    )
    assert redirected.stdout.endswith(f"301 {ORIGIN}/healthz")
    assert deployment.status(f"{ORIGIN}/metrics") == 404


def test_the_client_s_own_address_reaches_the_service(deployment):
    assert deployment.status(f"{ORIGIN}/healthz?from=client") == 200
    deadline = time.monotonic() + 10
    pattern = re.compile(r"GET /healthz 200 .*client=(\S+)")
    while time.monotonic() < deadline:
        found = pattern.findall(deployment.web_log.read_text(errors="replace"))
        if found:
            assert found[-1] == deployment.client.address
            return
        time.sleep(0.1)
    pytest.fail(deployment.web_log.read_text())


def test_a_staff_login_to_the_django_admin_passes_its_csrf_check(deployment):
    jar = str(deployment.folder / "cookies")
    page = deployment.curl("--cookie-jar", jar, f"{ORIGIN}/admin/login/").stdout
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token, page
    login = deployment.curl(
        "--cookie", jar, "--cookie-jar", jar,
        "--header", f"Origin: {ORIGIN}", "--header", f"Referer: {ORIGIN}/admin/login/",
        "--data-urlencode", f"csrfmiddlewaretoken={token[1]}",
        "--data-urlencode", "username=root@proxy.test",
        "--data-urlencode", "password=proxy-pass-1",
        "--data-urlencode", "next=/admin/",
        "--write-out", "%{http_code} %{redirect_url}", "--output", "/dev/null",
        f"{ORIGIN}/admin/login/",
    )  # fmt: skip
    assert login.stdout == f"302 {ORIGIN}/admin/"
    assert deployment.status(f"{ORIGIN}/admin/", "--cookie", jar) == 200


def test_the_live_stream_passes_each_message_at_once(deployment):
    demo = deployment.demo
    chat = f"{ORIGIN}/chat/{demo['webhookId']}"
    key = f"x-user-key: {demo['userKey']}"
    listen = [
        *deployment.client.prefix(), "curl", "--silent", "--insecure", "--no-buffer",
        "--resolve", f"{NAME}:443:{deployment.proxy.address}", "--header", key,
        f"{chat}/conversations/{demo['conversationId']}/listen",
    ]  # fmt: skip
    listener = subprocess.Popen(listen, stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().startswith("data:")  # the first ping
        body = json.dumps(
            {"conversationId": demo["conversationId"], "payload": {"type": "text", "text": "hi"}}
        )
        sent_at = time.monotonic()
        posted = deployment.curl(
            "--header", key, "--header", "Content-Type: application/json", "--data", body,
            "--write-out", "%{http_code}", "--output", "/dev/null", f"{chat}/messages",
        )  # fmt: skip
        assert posted.stdout == "201"
        while True:
            line = listener.stdout.readline()
            if "message_created" in line:
                break
            assert line, "the stream ended"
        # Unbuffered: the event comes well before any buffer would fill or time out.
        assert time.monotonic() - sent_at < 5
    finally:
        listener.kill()
        listener.wait()


def test_an_upload_of_the_maximum_size_streams_through(deployment):
    demo = deployment.demo
    runtime = [
        "--header", f"Authorization: Bearer {demo['tokens']['owner']}",
        "--header", f"x-bot-id: {demo['botId']}",
    ]  # fmt: skip
    made = deployment.curl(
        *runtime, "--request", "PUT", "--header", "Content-Type: application/json",
        "--data", json.dumps({"key": "max.bin", "size": UPLOAD_MAX}), f"{ORIGIN}/v1/files",
    )  # fmt: skip
    upload_url = json.loads(made.stdout)["file"]["uploadUrl"]
    assert upload_url.startswith(f"{ORIGIN}/v1/uploads/")
    blob = deployment.folder / "max.bin"
    blob.write_bytes(b"\0" * UPLOAD_MAX)
    uploaded = deployment.curl(
        "--request", "PUT", "--header", "Content-Type: application/octet-stream",
        "--data-binary", f"@{blob}", upload_url, timeout=60,
    )  # fmt: skip
    file = json.loads(uploaded.stdout)["file"]
    assert (file["size"], file["status"]) == (UPLOAD_MAX, "upload_completed")
