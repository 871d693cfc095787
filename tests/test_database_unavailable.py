"""The database out of reach or out of free connections is a 503 in the error
body, with Retry-After, never a 500."""

import pytest
from django.db import OperationalError

import events.views
from platform_site.api.exception_handler import to_api_error
from tests.conftest import assert_error


def test_an_operational_error_is_unavailable():
    error = to_api_error(OperationalError("couldn't get a connection after 10.00 sec"))
    assert error is not None
    assert (error.status_code, error.headers) == (503, {"Retry-After": "1"})


@pytest.mark.django_db
def test_an_endpoint_whose_database_fails_answers_503(runtime_client, monkeypatch):
    client = runtime_client()

    def out_of_reach(**kwargs):
        raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")

    monkeypatch.setattr(events.views, "event_get", out_of_reach)
    response = client.get("/v1/chat/events/evt_01J0000000000000000000000A")
    body = assert_error(response, 503, "Unavailable")
    assert response["Retry-After"] == "1"
    assert "Connection refused" not in body["message"]
