"""Celery worker processes use one persistent connection, not the web's pool."""

import copy

import pytest
from django.db import connections as django_connections
from django.db.utils import ConnectionHandler

import platform_site.server.worker_connections
from platform_site.server.worker_connections import persistent_connections


@pytest.fixture
def handler(monkeypatch) -> ConnectionHandler:
    """A connection handler of its own, on a copy of the project's settings."""
    databases = {"default": copy.deepcopy(django_connections["default"].settings_dict)}
    own = ConnectionHandler(databases)
    monkeypatch.setattr(platform_site.server.worker_connections, "connections", own)
    return own


def test_a_pool_becomes_one_persistent_connection(handler, settings):
    handler["default"].settings_dict.setdefault("OPTIONS", {})["pool"] = {"max_size": 8}
    handler["default"].settings_dict["CONN_MAX_AGE"] = 0
    settings.DATABASE_WORKER_CONN_MAX_AGE = 321
    persistent_connections()
    assert "pool" not in handler["default"].settings_dict["OPTIONS"]
    assert handler["default"].settings_dict["CONN_MAX_AGE"] == 321


def test_without_a_pool_nothing_changes(handler):
    handler["default"].settings_dict.get("OPTIONS", {}).pop("pool", None)
    before = copy.deepcopy(handler["default"].settings_dict)
    persistent_connections()
    assert handler["default"].settings_dict == before
