from django.db import models

# The constraint a second answer for a key meets (platform_site/api/idempotency.py tells
# a taken key by it).
IDEMPOTENCY_KEY_UNIQUE = "idempotency_key_unique"


class IdempotencyKey(models.Model):
    """The first answer to a POST sent with an `Idempotency-Key`, kept so that
    a retry of the same request is answered with it instead of creating again
    (platform_site/api/idempotency.py). Written in the transaction that made what it
    describes: there is no row for a request still running."""

    # Whose key it is: the credential and the bot, workspace or chat
    # connection it acts on (see platform_site/api/idempotency.py).
    scope = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    # SHA-256 of the request (method, path, body), to tell a retry from a reuse.
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    # Encrypted (platform_site/foundation/secret_fields.py): an answer may hold a secret.
    response_body = models.BinaryField(default=b"")
    response_headers = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "key"], name=IDEMPOTENCY_KEY_UNIQUE),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.scope})"
