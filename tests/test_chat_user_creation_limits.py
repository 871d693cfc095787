"""The chat interface makes users for clients that show no credential: every
route that makes one (POST users, the webchat's initialize without a key,
users/get-or-create of a key naming nobody yet) counts against the users
made from the client's address a minute and the users made for the bot an
hour, at the limits of the bot's workspace."""

from typing import Any

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from bots.models import User
from chat.keys import user_key_issue
from chat.live.views.initialize import webchat_start
from chat.models import UserKeyMode
from platform_site.api.errors import RateLimited
from platform_site.api.rate_limit import rate_limit_headers
from tests import test_rate_limits as rate_limits
from tests.conftest import assert_error
from tests.factories import BotFactory, ChatConnectionFactory

limiter_in_use = rate_limits.limiter_in_use
limit = rate_limits._limit
parse = rate_limits._parse
assert_rate_limited = rate_limits._assert_rate_limited

pytestmark = pytest.mark.usefixtures("limiter_in_use")


@pytest.fixture
def connection(bot: Any) -> Any:
    return ChatConnectionFactory(bot=bot)


def client(address: str = "198.51.100.7", key: str | None = None) -> APIClient:
    made = APIClient(REMOTE_ADDR=address)
    if key is not None:
        made.credentials(HTTP_X_USER_KEY=key)
    return made


def create_user(connection: Any, address: str = "198.51.100.7") -> Any:
    return client(address).post(f"/chat/{connection.webhook_id}/users", {}, format="json")


def initialize(connection: Any, address: str = "198.51.100.7") -> Any:
    return client(address).get(f"/chat/{connection.webhook_id}/initialize")


def start(connection: Any, address: str = "198.51.100.7") -> Any:
    """The webchat's initialize without a key, up to its stream (which only
    the ASGI application serves)."""
    return webchat_start(
        webhook_id=connection.webhook_id,
        method="GET",
        key=None,
        conversation_chat_id=None,
        remote_addr=address,
    )


def bot_users(connection: Any) -> int:
    return User.objects.filter(bot_id=connection.bot_id).count()


# --- the ceiling of each bot ---------------------------------------------------------


def test_a_bot_s_users_made_an_hour_have_a_ceiling_whatever_the_address(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=2)
    answers = [create_user(connection, f"198.51.100.{n}") for n in (1, 2, 3)]
    assert [a.status_code for a in answers] == [201, 201, 429]
    assert parse(answers[0]["RateLimit-Policy"])["bot-new-users"] == {"q": 2, "w": 3600}
    assert_rate_limited(answers[2])
    # One user back every 3600 / 2 s.
    assert 1790 <= int(answers[2]["Retry-After"]) <= 1800
    assert parse(answers[2]["RateLimit"])["bot-new-users"]["r"] == 0
    assert bot_users(connection) == 2


def test_the_ceiling_is_each_bot_s_own(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=1)
    assert create_user(connection).status_code == 201
    assert_rate_limited(create_user(connection, "198.51.100.8"))
    # Another bot of the same workspace, and a bot of another workspace.
    sibling = ChatConnectionFactory(bot=BotFactory(workspace=bot.workspace))
    assert create_user(sibling, "198.51.100.9").status_code == 201
    stranger = ChatConnectionFactory(bot=BotFactory())
    assert create_user(stranger, "198.51.100.10").status_code == 201


def test_the_ceiling_is_the_workspace_s_setting(bot, connection):
    answer = create_user(connection)
    quotas = parse(answer["RateLimit-Policy"])
    assert quotas["bot-new-users"]["q"] == django_settings.CHAT_USER_CREATION_RATE_LIMIT_PER_HOUR
    assert quotas["bot-new-users"]["q"] == 1000
    # Staff raise it (the Django admin saves through the same service).
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=5000)
    assert parse(create_user(connection)["RateLimit-Policy"])["bot-new-users"]["q"] == 5000


def test_other_routes_are_not_held_back_by_the_ceiling(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=1)
    made = create_user(connection)
    assert_rate_limited(create_user(connection))
    me = client(key=made.json()["key"]).get(f"/chat/{connection.webhook_id}/users/me")
    assert me.status_code == 200
    assert "bot-new-users" not in parse(me["RateLimit-Policy"])


# --- users made from one address -----------------------------------------------------


def test_users_made_from_one_address_a_minute_are_limited(bot, connection):
    limit(bot.workspace, chat_address_user_creation_rate_limit_per_minute=2)
    answers = [create_user(connection) for _ in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 429]
    assert parse(answers[0]["RateLimit-Policy"])["address-new-users"] == {"q": 2, "w": 60}
    assert_rate_limited(answers[2])
    assert 29 <= int(answers[2]["Retry-After"]) <= 30
    # Another address makes its own; the same one still reads and writes.
    assert create_user(connection, "198.51.100.99").status_code == 201
    key = answers[0].json()["key"]
    assert client(key=key).get(f"/chat/{connection.webhook_id}/users/me").status_code == 200
    # The bots of a workspace share the count of an address.
    sibling = ChatConnectionFactory(bot=BotFactory(workspace=bot.workspace))
    assert_rate_limited(create_user(sibling))


def test_the_address_limit_on_users_made_is_tighter_than_on_requests(bot, connection):
    quotas = parse(create_user(connection)["RateLimit-Policy"])
    assert quotas["address-new-users"]["q"] == 10
    assert quotas["address"]["q"] == 600
    answers = [create_user(connection) for _ in range(10)]
    assert [a.status_code for a in answers] == [201] * 9 + [429]


# --- every route that makes a user ---------------------------------------------------


def test_initialize_without_a_key_counts_as_a_user_made(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=2)
    assert create_user(connection, "198.51.100.1").status_code == 201
    made = start(connection, "198.51.100.2")
    assert made.user.chat_id
    assert parse(rate_limit_headers(made.listener.rate_limit)["RateLimit"])["bot-new-users"] == {
        "r": 0,
        "t": 3600,
    }
    refused = initialize(connection, "198.51.100.3")
    assert_rate_limited(refused)
    with pytest.raises(RateLimited):
        start(connection, "198.51.100.4")
    assert_rate_limited(create_user(connection, "198.51.100.5"))
    # Refused, nothing is made: neither the user nor its conversation.
    assert bot_users(connection) == 2


def test_initialize_without_a_key_counts_against_the_address(bot, connection):
    limit(bot.workspace, chat_address_user_creation_rate_limit_per_minute=1)
    start(connection)
    assert_rate_limited(initialize(connection))
    assert_rate_limited(create_user(connection))
    assert bot_users(connection) == 1


def test_initialize_with_a_key_makes_no_user_and_is_not_counted(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=1)
    made = start(connection)
    resumed = webchat_start(
        webhook_id=connection.webhook_id,
        method="GET",
        key=made.key,
        conversation_chat_id=made.conversation.chat_id,
        remote_addr="198.51.100.7",
    )
    assert resumed.user.pk == made.user.pk
    assert "bot-new-users" not in parse(
        rate_limit_headers(resumed.listener.rate_limit)["RateLimit"]
    )


def test_get_or_create_counts_when_it_makes_the_user(bot, connection):
    connection.user_key_mode = UserKeyMode.MANUAL
    connection.save(update_fields=["user_key_mode"])
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=1)
    url = f"/chat/{connection.webhook_id}/users/get-or-create"

    def get_or_create(chat_id: str) -> Any:
        key = user_key_issue(connection=connection, chat_user_id=chat_id)
        return client(key=key).post(url, {}, format="json")

    made = get_or_create("ada")
    assert made.status_code == 201
    assert "bot-new-users" in parse(made["RateLimit-Policy"])
    # Found, it makes nothing and is not counted as made.
    found = get_or_create("ada")
    assert found.status_code == 200
    assert "bot-new-users" not in parse(found["RateLimit-Policy"])
    assert_rate_limited(get_or_create("grace"))
    assert not User.objects.filter(bot=bot, chat_id="grace").exists()


def test_the_admin_secret_s_keys_make_no_user(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=1)
    admin = client()
    admin.credentials(HTTP_X_ADMIN_SECRET=connection.encryption_key)
    for n in range(3):
        answer = admin.post(
            f"/chat/{connection.webhook_id}/users/key", {"id": f"user-{n}"}, format="json"
        )
        assert answer.status_code == 200
        assert "bot-new-users" not in parse(answer["RateLimit-Policy"])
    assert bot_users(connection) == 0
    assert create_user(connection).status_code == 201


def test_a_refusal_is_the_one_error_body(bot, connection):
    limit(bot.workspace, chat_user_creation_rate_limit_per_hour=1)
    create_user(connection)
    body = assert_error(create_user(connection, "198.51.100.8"), 429, "RateLimited")
    assert body["message"].startswith("Too many requests")
