"""Liveness and readiness probes."""

import pytest
from django.db import OperationalError

import platform_site.api.health
from tests.conftest import assert_error

pytestmark = pytest.mark.django_db


def test_healthz(api_client):
    response = api_client.get("/healthz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ok"}


def test_healthz_needs_no_credentials_and_ignores_bad_ones(api_client):
    api_client.credentials(HTTP_AUTHORIZATION="Bearer nonsense")
    assert api_client.get("/healthz").status_code == 200


def test_readyz(api_client):
    response = api_client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["database"] == "ok"
    assert body["broker"] == "ok"
    assert body == {"status": "ready", "database": "ok", "broker": "ok"}


def test_readyz_when_the_broker_is_unreachable(api_client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = api_client.get("/readyz")
    body = assert_error(response, 503, "Unavailable")
    assert response["Retry-After"] == "1"
    assert "broker" in body["message"]
    # Says what is down, without leaking the broker's address or a trace.
    assert "127.0.0.1" not in body["message"]
    assert "Traceback" not in body["message"]


def test_readyz_when_the_database_is_unreachable(api_client, monkeypatch):
    class Unreachable:
        def cursor(self):
            raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")

    monkeypatch.setattr(platform_site.api.health, "connection", Unreachable())
    response = api_client.get("/readyz")
    body = assert_error(response, 503, "Unavailable")
    assert response["Retry-After"] == "1"
    assert body["message"] == "The database is not reachable"


def test_healthz_stays_up_when_the_broker_is_unreachable(api_client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    assert api_client.get("/healthz").status_code == 200


def test_probe_method_not_allowed(api_client):
    assert_error(api_client.post("/healthz", {}, format="json"), 405, "MethodNotFound")


def test_an_unavailable_answer_is_one_warning_line_without_a_trace(api_client, settings, caplog):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    with caplog.at_level("INFO", logger="platform_site.errors"):
        body = assert_error(api_client.get("/readyz"), 503, "Unavailable")
    [line] = [r for r in caplog.records if r.name == "platform_site.errors"]
    assert line.levelname == "WARNING"
    assert line.error_id == body["id"]
    assert line.exc_info is None
    assert "The broker is not reachable" in line.getMessage()
