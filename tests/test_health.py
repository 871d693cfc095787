"""Liveness and readiness probes."""

import pytest
from django.db import OperationalError

import platform_site.health
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

    monkeypatch.setattr(platform_site.health, "connection", Unreachable())
    response = api_client.get("/readyz")
    body = assert_error(response, 503, "Unavailable")
    assert response["Retry-After"] == "1"
    assert body["message"] == "The database is not reachable"


def test_healthz_stays_up_when_the_broker_is_unreachable(api_client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    assert api_client.get("/healthz").status_code == 200


def test_probe_method_not_allowed(api_client):
    assert_error(api_client.post("/healthz", {}, format="json"), 405, "MethodNotFound")
