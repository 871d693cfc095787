"""GET /: a page for people (the admin's "View site" goes there); any other
unknown path stays a JSON 404."""

import pytest
from django.test import Client

from tests.conftest import assert_error

pytestmark = pytest.mark.django_db


def test_the_home_page_links_to_the_docs_the_admin_and_the_webchat():
    response = Client().get("/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    for link in ('href="/docs"', 'href="/admin/"', 'href="/v1/openapi.json"', "/webchat"):
        assert link in page


def test_the_home_page_takes_no_post():
    response = Client().post("/", {})
    assert_error(response, 405, "MethodNotFound")


def test_the_favicon_is_served():
    response = Client().get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert b"<svg" in b"".join(response.streaming_content)


def test_other_unknown_paths_stay_json_404s():
    assert_error(Client().get("/nothing-here"), 404, "ResourceNotFound")
