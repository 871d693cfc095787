import pytest

from tests.conftest import assert_error

pytestmark = pytest.mark.django_db


def test_create_event(runtime_client):
    response = runtime_client().post(
        "/v1/chat/events", {"type": "t", "payload": {}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["event"]["status"] == "pending"


def test_unknown_route_is_json_404(api_client):
    assert_error(api_client.get("/nope"), 404, "ResourceNotFound")
