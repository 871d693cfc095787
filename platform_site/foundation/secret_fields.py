"""Secrets kept encrypted at rest. The column of an EncryptedCharField holds a
Fernet token of the value (AES-128-CBC and HMAC-SHA256), never the value, so
that a dump or backup of the database holds no usable secret; the attribute
is the plain value. The keys are SECRET_ENCRYPTION_KEYS: the first encrypts,
any of them decrypts, so that a new key can be put first, every stored value
re-encrypted with it (`manage.py rotate_secret_encryption_keys`), and the old
key dropped."""

import base64
import binascii
import contextlib
import os
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

# A Fernet token: version byte, timestamp (8), IV (16), at least one AES block
# (16), HMAC (32).
_TOKEN_VERSION = 0x80
_TOKEN_OVERHEAD = 1 + 8 + 16 + 32
_AES_BLOCK = 16
# Rows re-written per transaction by the migrations and the key rotation.
_BATCH = 500


class UndecryptableSecret(ImproperlyConfigured):
    """A stored secret that no key of SECRET_ENCRYPTION_KEYS decrypts: the
    setting lacks the key it was encrypted with. Never read as some other
    value: a wrong secret would fail later, far from the cause."""


def _keys() -> tuple[str, ...]:
    return tuple(settings.SECRET_ENCRYPTION_KEYS)


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    if not keys:
        raise ImproperlyConfigured("SECRET_ENCRYPTION_KEYS holds no key")
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(f"SECRET_ENCRYPTION_KEYS: {exc}") from None


def _undecryptable() -> UndecryptableSecret:
    return UndecryptableSecret(
        "A stored secret cannot be decrypted with any key of SECRET_ENCRYPTION_KEYS:"
        " add the key it was encrypted with to the setting"
    )


def secret_encrypt(value: str) -> str:
    """The token to store for `value`. "" stays "": an absent secret has
    nothing to hide, and stays findable."""
    if not value:
        return value
    return _fernet(_keys()).encrypt(value.encode()).decode()


def secret_decrypt(token: str) -> str:
    """The value a stored token holds ("" for "")."""
    if not token:
        return token
    return _decrypted(_keys(), token)


# Keyed by the keys too, so that a change of the setting (tests) is never
# answered from what the old keys decrypted. The delivery engine reads the
# same bot's secret for every event it claims: one decryption serves them all.
@lru_cache(maxsize=4096)
def _decrypted(keys: tuple[str, ...], token: str) -> str:
    try:
        return _fernet(keys).decrypt(token.encode()).decode()
    except InvalidToken:
        raise _undecryptable() from None


# A sealed value: this byte, a random 96-bit nonce, then AES-256-GCM-SIV's
# ciphertext and tag. (Fernet tokens, which seals were before, start with "g".)
_SEALED = b"\x01"
_NONCE = 12


@lru_cache(maxsize=4)
def _sealers(keys: tuple[str, ...]) -> tuple[AESGCMSIV, ...]:
    """An AEAD per key, its key derived from the Fernet key (HKDF-SHA256, a
    purpose of its own). GCM-SIV: a repeated random nonce would tell two
    equal values apart from two others, not give the key away."""
    _fernet(keys)  # each key checked as Fernet keys are
    return tuple(
        AESGCMSIV(
            HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"secret_seal").derive(
                base64.urlsafe_b64decode(key)
            )
        )
        for key in keys
    )


def secret_seal(data: bytes) -> bytes:
    """`data` encrypted with the first key, for larger values kept a while
    (the answers kept for Idempotency-Keys, which may hold a user key), on a
    request's path: AES-GCM-SIV costs a tenth of a Fernet token's CPU there.
    Not cached, unlike secret_decrypt's small values."""
    nonce = os.urandom(_NONCE)
    return _SEALED + nonce + _sealers(_keys())[0].encrypt(nonce, data, None)


def secret_unseal(token: bytes) -> bytes:
    """What secret_seal sealed, with any of the keys (or a Fernet token)."""
    if token[:1] == _SEALED:
        nonce, sealed = token[1 : 1 + _NONCE], token[1 + _NONCE :]
        for sealer in _sealers(_keys()):
            with contextlib.suppress(InvalidTag):
                return sealer.decrypt(nonce, sealed, None)
        raise _undecryptable()
    try:
        return _fernet(_keys()).decrypt(token)
    except InvalidToken:
        raise _undecryptable() from None


def secret_rotate(token: str) -> str:
    """The token re-encrypted with the first key."""
    if not token:
        return token
    try:
        return _fernet(_keys()).rotate(token.encode()).decode()
    except InvalidToken:
        raise _undecryptable() from None


def is_secret_token(value: str) -> bool:
    """Whether a stored value has the shape of a token (whether or not the
    keys decrypt it), which no plain secret of ours has."""
    try:
        raw = base64.b64decode(value.encode(), altchars=b"-_", validate=True)
    except binascii.Error:
        return False
    body = len(raw) - _TOKEN_OVERHEAD
    return raw[:1] == bytes([_TOKEN_VERSION]) and body >= _AES_BLOCK and body % _AES_BLOCK == 0


class EncryptedCharField(models.CharField):
    """A CharField stored encrypted. max_length bounds the plain value (forms,
    validation); the column is text, the token being longer. Lookups find
    nothing but "": each encryption of a value differs (a random IV)."""

    def get_internal_type(self) -> str:
        return "TextField"

    def get_db_prep_save(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        prepared = super().get_db_prep_save(value, connection)
        return None if prepared is None else secret_encrypt(prepared)

    def from_db_value(
        self, value: str | None, expression: Any, connection: BaseDatabaseWrapper
    ) -> str | None:
        return None if value is None else secret_decrypt(value)


def _plain_encrypted(value: str) -> str | None:
    if is_secret_token(value):
        secret_decrypt(value)  # raises if the keys cannot read it
        return None
    return secret_encrypt(value)


def _encrypted_plain(value: str) -> str | None:
    return secret_decrypt(value) if is_secret_token(value) else None


def stored_secrets_encrypt(*, model: type[models.Model], field_name: str, using: str) -> int:
    """Encrypt the plain values of a field's column (those of rows written
    before it was encrypted); values encrypted already are left as they are,
    so that running it again changes nothing. How many it encrypted."""
    return _stored_secrets_rewrite(model, field_name, using, _plain_encrypted)


def stored_secrets_decrypt(*, model: type[models.Model], field_name: str, using: str) -> int:
    """Decrypt a field's column back to plain values (undoing
    stored_secrets_encrypt); how many it decrypted."""
    return _stored_secrets_rewrite(model, field_name, using, _encrypted_plain)


def stored_secrets_rotate(*, model: type[models.Model], field_name: str, using: str) -> int:
    """Re-encrypt every value of a field's column with the first key; how many."""
    return _stored_secrets_rewrite(model, field_name, using, secret_rotate)


def stored_secrets_rotate_batches(
    *, model: type[models.Model], field_name: str, using: str
) -> Iterator[tuple[int, int]]:
    """stored_secrets_rotate a batch at a time, for a caller that reports
    progress: yields, once each batch has committed, how many rows it read
    and how many of them it re-encrypted."""
    return _stored_secrets_rewrite_batches(model, field_name, using, secret_rotate)


def stored_secrets_count(*, model: type[models.Model], field_name: str, using: str) -> int:
    """How many rows hold a secret in a field's column: those a rewrite reads."""
    table, _, column = _columns(model, field_name, using)
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} <> ''")
        (count,) = cursor.fetchone()
    return int(count)


def _stored_secrets_rewrite(
    model: type[models.Model],
    field_name: str,
    using: str,
    rewrite: Callable[[str], str | None],
) -> int:
    batches = _stored_secrets_rewrite_batches(model, field_name, using, rewrite)
    return sum(rewritten for _, rewritten in batches)


def _columns(model: type[models.Model], field_name: str, using: str) -> tuple[str, str, str]:
    """The quoted table, primary key and column of a model's field."""
    quote = connections[using].ops.quote_name
    meta = model._meta
    field = meta.get_field(field_name)
    assert isinstance(field, models.Field)
    return quote(meta.db_table), quote(meta.pk.column), quote(field.column)


def _stored_secrets_rewrite_batches(
    model: type[models.Model],
    field_name: str,
    using: str,
    rewrite: Callable[[str], str | None],
) -> Iterator[tuple[int, int]]:
    # On the columns, not through the field, which would decrypt on reading
    # and encrypt on writing; and with the model's table and columns only,
    # so that a migration's historical model serves as well. A row is written
    # back only if it still holds what was read: a secret changed meanwhile
    # (a bot's rotation) is kept, not overwritten with the old one.
    connection = connections[using]
    table, pk, column = _columns(model, field_name, using)
    select = f"SELECT {pk}, {column} FROM {table} WHERE {column} <> ''"
    order = f"ORDER BY {pk} LIMIT %s"
    update = f"UPDATE {table} SET {column} = %s WHERE {pk} = %s AND {column} = %s"
    last: Any = None
    while True:
        rewritten = 0
        with transaction.atomic(using=using), connection.cursor() as cursor:
            if last is None:
                cursor.execute(f"{select} {order}", [_BATCH])
            else:
                cursor.execute(f"{select} AND {pk} > %s {order}", [last, _BATCH])
            rows = cursor.fetchall()
            for key, stored in rows:
                new = rewrite(stored)
                if new is not None:
                    cursor.execute(update, [new, key, stored])
                    rewritten += cursor.rowcount
        yield len(rows), rewritten
        if len(rows) < _BATCH:
            return
        last = rows[-1][0]
