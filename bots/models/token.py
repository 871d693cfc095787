from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class AccessToken(models.Model):
    """A personal access token. Only its SHA-256 is kept; the raw token is
    shown once, when it is made."""

    account = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, help_text="First characters, to recognise the token")
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=(
            "Requests a minute this token may make, whatever the workspace; "
            "empty: the platform's ceiling (TOKEN_RATE_LIMIT_PER_MINUTE)."
        ),
    )

    class Meta:
        indexes = [models.Index(fields=["account", "-created_at"], name="token_account_idx")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.account})"
