"""/docs: Swagger UI over the OpenAPI document, every file of it from this
server, so that it works with no internet access."""

import re

from django.test import Client

from tests.conftest import assert_error


def test_the_docs_page_names_no_other_site():
    response = Client().get("/docs")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert re.findall(r"(?:https?:)?//[\w.-]+", page) == []
    assert '"validatorUrl": null' in page  # Swagger UI's default calls a public validator
    assert "/v1/openapi.json" in page


def test_the_docs_assets_are_served_here():
    client = Client()
    page = client.get("/docs").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert {asset.rsplit("/", 1)[-1] for asset in assets} >= {
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
    }
    for asset in assets:
        assert asset.startswith("/static/"), asset
        response = client.get(asset)
        assert response.status_code == 200, asset
        assert b"".join(response.streaming_content), asset
    schema = client.get("/v1/openapi.json")
    assert schema.status_code == 200 and "paths" in schema.json()


def test_the_docs_page_refuses_other_methods_with_the_error_body(api_client):
    assert_error(api_client.post("/docs", {}, format="json"), 405, "MethodNotFound")
