"""Bots' webhook signing secrets and chat connections' encryption keys are
stored encrypted (platform_site/foundation/secret_fields.py): the columns, and so a
dump of the database, hold no usable secret; everything that reads them
through the models still sees the plain value."""

import os
import subprocess
from datetime import timedelta
from io import StringIO
from typing import Any

import jwt
import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from bots.models import Bot
from bots.models.bot import new_signing_secret
from bots.services.bots import bot_signing_secret_rotate
from chat.models import ChatConnection
from events.services.events import event_record
from platform_site.foundation import secret_fields
from platform_site.foundation.secret_fields import (
    UndecryptableSecret,
    is_secret_token,
    stored_secrets_decrypt,
    stored_secrets_encrypt,
)
from tests.conftest import assert_error
from tests.delivering import deliver_due
from tests.factories import BotFactory, ChatConnectionFactory, UserFactory, user_key

pytestmark = pytest.mark.django_db

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()


def stored(model: type[Any], pk: Any, *columns: str) -> tuple[str, ...]:
    """The columns of a row as the database holds them, past the fields."""
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(column) for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {names} FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()


def store_plain(model: type[Any], pk: Any, column: str, value: str) -> None:
    """Write a column as it was before it was encrypted."""
    table, name = (connection.ops.quote_name(n) for n in (model._meta.db_table, column))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {name} = %s WHERE id = %s", [value, pk])


def rotated_bot() -> Bot:
    """A bot whose previous secret still signs: every secret column is filled."""
    return bot_signing_secret_rotate(bot=BotFactory())


def usable_secrets(bot: Bot, chat: ChatConnection) -> list[str]:
    """What a dump must not hold, in any form a reader could use."""
    secrets = [bot.signing_secret, bot.previous_signing_secret, chat.encryption_key]
    bodies = [secret.removeprefix("whsec_") for secret in secrets[:2]]
    assert all(secrets) and all(len(body) == 44 for body in bodies)
    return secrets + bodies


# --- what the models read and what the columns hold ---------------------------


def test_the_models_read_the_plain_secrets():
    bot = rotated_bot()
    chat = ChatConnectionFactory(bot=bot)
    fresh = Bot.objects.get(id=bot.id)
    assert fresh.signing_secret == bot.signing_secret
    assert fresh.signing_secret.startswith("whsec_")
    assert fresh.previous_signing_secret == bot.previous_signing_secret
    assert ChatConnection.objects.get(id=chat.id).encryption_key == chat.encryption_key
    assert list(
        Bot.objects.filter(id=bot.id).values_list("signing_secret", "previous_signing_secret")
    ) == [(bot.signing_secret, bot.previous_signing_secret)]
    assert list(ChatConnection.objects.filter(bot=bot).values("bot__signing_secret")) == [
        {"bot__signing_secret": bot.signing_secret}
    ]


def test_the_columns_hold_tokens_not_secrets():
    bot = rotated_bot()
    chat = ChatConnectionFactory(bot=bot)
    signing, previous = stored(Bot, bot.id, "signing_secret", "previous_signing_secret")
    (key,) = stored(ChatConnection, chat.id, "encryption_key")
    for token in (signing, previous, key):
        assert is_secret_token(token)
        for secret in usable_secrets(bot, chat):
            assert secret not in token


def test_an_absent_previous_secret_stays_empty():
    bot = BotFactory()
    assert stored(Bot, bot.id, "previous_signing_secret") == ("",)
    assert Bot.objects.filter(id=bot.id, previous_signing_secret="").exists()
    assert Bot.objects.get(id=bot.id).previous_signing_secret == ""


def test_the_default_key_is_kept_under_data_dir(settings):
    if "SECRET_ENCRYPTION_KEYS" in os.environ:
        pytest.skip("the keys come from the environment")
    key_file = settings.DATA_DIR / "secret_encryption_key"
    assert settings.SECRET_ENCRYPTION_KEYS == [key_file.read_text().strip()]
    assert key_file.stat().st_mode & 0o077 == 0


# --- keys ---------------------------------------------------------------------


def test_rotating_the_encryption_keys(settings, monkeypatch):
    monkeypatch.setattr(secret_fields, "_BATCH", 1)  # every row a batch of its own
    settings.SECRET_ENCRYPTION_KEYS = [KEY_A]
    bot = rotated_bot()
    chat = ChatConnectionFactory(bot=bot)
    BotFactory(workspace=bot.workspace)  # a current secret only
    settings.SECRET_ENCRYPTION_KEYS = [KEY_B, KEY_A]
    out = StringIO()
    call_command("rotate_secret_encryption_keys", stdout=out)
    assert out.getvalue().splitlines() == [
        "bots.Bot.signing_secret: 2 rotated",
        "bots.Bot.previous_signing_secret: 1 rotated",
        "chat.ChatConnection.encryption_key: 1 rotated",
        "4 secrets rotated in all",
    ]

    settings.SECRET_ENCRYPTION_KEYS = [KEY_B]
    fresh = Bot.objects.get(id=bot.id)
    assert fresh.signing_secret == bot.signing_secret
    assert fresh.previous_signing_secret == bot.previous_signing_secret
    assert ChatConnection.objects.get(id=chat.id).encryption_key == chat.encryption_key
    assert len({b.signing_secret for b in Bot.objects.all()}) == 2
    (token,) = stored(ChatConnection, chat.id, "encryption_key")
    assert Fernet(KEY_B).decrypt(token.encode()).decode() == chat.encryption_key


def test_a_secret_no_key_decrypts_fails_loudly(settings):
    settings.SECRET_ENCRYPTION_KEYS = [KEY_A]
    bot = BotFactory()
    settings.SECRET_ENCRYPTION_KEYS = [KEY_B]
    with pytest.raises(UndecryptableSecret, match="SECRET_ENCRYPTION_KEYS"):
        Bot.objects.get(id=bot.id)
    with pytest.raises(CommandError, match=r"bots\.Bot\.signing_secret: .*SECRET_ENCRYPTION_KEYS"):
        call_command("rotate_secret_encryption_keys", stdout=StringIO())


@pytest.mark.parametrize("keys", [[], ["not a fernet key"]], ids=["none", "malformed"])
def test_unusable_keys_name_the_setting(settings, keys):
    settings.SECRET_ENCRYPTION_KEYS = keys
    with pytest.raises(ImproperlyConfigured, match="SECRET_ENCRYPTION_KEYS"):
        BotFactory()


# --- the data migrations' steps -------------------------------------------------


def test_plain_rows_are_encrypted_once_and_decrypted_back():
    secret = new_signing_secret()
    first, second = BotFactory(), BotFactory()
    store_plain(Bot, first.id, "signing_secret", secret)
    chat = ChatConnectionFactory(bot=first)
    store_plain(ChatConnection, chat.id, "encryption_key", "plain-key")
    using = connection.alias

    assert stored_secrets_encrypt(model=Bot, field_name="signing_secret", using=using) == 1
    assert stored_secrets_encrypt(model=Bot, field_name="signing_secret", using=using) == 0
    assert stored_secrets_encrypt(model=Bot, field_name="previous_signing_secret", using=using) == 0
    assert stored_secrets_encrypt(model=ChatConnection, field_name="encryption_key", using=using)
    assert is_secret_token(stored(Bot, first.id, "signing_secret")[0])
    assert Bot.objects.get(id=first.id).signing_secret == secret
    assert Bot.objects.get(id=second.id).signing_secret == second.signing_secret
    assert ChatConnection.objects.get(id=chat.id).encryption_key == "plain-key"

    assert stored_secrets_decrypt(model=Bot, field_name="signing_secret", using=using) == 2
    assert stored_secrets_decrypt(model=Bot, field_name="signing_secret", using=using) == 0
    assert stored(Bot, first.id, "signing_secret") == (secret,)
    assert stored(Bot, second.id, "signing_secret") == (second.signing_secret,)


def test_encrypting_refuses_a_token_of_another_key(settings):
    settings.SECRET_ENCRYPTION_KEYS = [KEY_A]
    BotFactory()
    settings.SECRET_ENCRYPTION_KEYS = [KEY_B]
    with pytest.raises(UndecryptableSecret):
        stored_secrets_encrypt(model=Bot, field_name="signing_secret", using=connection.alias)


# --- what uses the secrets ------------------------------------------------------


def test_deliveries_verify_with_the_bots_secrets(hooked, receiver):
    previous = hooked.signing_secret
    bot_signing_secret_rotate(bot=hooked)
    event = event_record(bot_id=hooked.id, type="order.created", payload={})
    assert deliver_due() == {"processed": 1}
    [received] = receiver.requests
    current = Bot.objects.get(id=hooked.id).signing_secret
    assert current != previous
    assert Webhook(current).verify(received.body, received.headers)["id"] == event.id
    assert Webhook(previous).verify(received.body, received.headers)["id"] == event.id
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(received.body, received.headers)


def test_expired_previous_secret_is_not_sent(hooked, receiver):
    bot_signing_secret_rotate(bot=hooked)
    Bot.objects.filter(id=hooked.id).update(
        previous_signing_secret_expires_at=timezone.now() - timedelta(seconds=1)
    )
    event_record(bot_id=hooked.id, type="order.created", payload={})
    deliver_due()
    [received] = receiver.requests
    assert len(received.headers["webhook-signature"].split(" ")) == 1
    Webhook(Bot.objects.get(id=hooked.id).signing_secret).verify(received.body, received.headers)


def test_chat_user_keys_still_validate(bot):
    chat = ChatConnectionFactory(bot=bot)
    base = f"/chat/{chat.webhook_id}"
    issued = APIClient().post(f"{base}/users", {}, format="json")
    assert issued.status_code == 201, issued.content
    key = issued.json()["key"]
    stored_key = ChatConnection.objects.get(id=chat.id).encryption_key
    assert jwt.decode(key, stored_key, algorithms=["HS256"])["id"] == issued.json()["user"]["id"]
    assert APIClient(HTTP_X_USER_KEY=key).get(f"{base}/users/me").status_code == 200
    mine = user_key(chat, UserFactory(bot=bot))
    assert APIClient(HTTP_X_USER_KEY=mine).get(f"{base}/users/me").status_code == 200
    forged = jwt.encode(
        {"id": issued.json()["user"]["id"]}, "a guessed key, " + "x" * 32, algorithm="HS256"
    )
    assert_error(APIClient(HTTP_X_USER_KEY=forged).get(f"{base}/users/me"), 401, "Unauthorized")


# --- a dump of the database -------------------------------------------------------


def database_dump() -> str:
    """The whole database as SQL, as a backup would hold it."""
    if connection.vendor == "postgresql":
        database = connection.settings_dict
        command = ["pg_dump", "--no-password", "-h", database["HOST"] or "127.0.0.1"]
        command += ["-p", str(database["PORT"] or 5432), "-U", database["USER"] or "postgres"]
        environment = {**os.environ, "PGPASSWORD": database["PASSWORD"] or ""}
        dump = subprocess.run(
            [*command, database["NAME"]], env=environment, capture_output=True, check=True
        )
        return dump.stdout.decode()
    connection.ensure_connection()
    return "\n".join(connection.connection.iterdump())


@pytest.mark.django_db(transaction=True)
def test_a_database_dump_holds_no_usable_secret():
    bot = rotated_bot()
    chat = ChatConnectionFactory(bot=bot)
    dump = database_dump()
    # The dump has the rows: their ids and tokens are in it.
    assert bot.id in dump and chat.webhook_id in dump
    assert stored(Bot, bot.id, "signing_secret")[0] in dump
    for secret in usable_secrets(bot, chat):
        assert secret not in dump
