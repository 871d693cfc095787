from django.conf import settings
from django.db import models

from platform_site.foundation.ids import PrefixedIdField


class Role(models.TextChoices):
    OWNER = "owner"
    ADMINISTRATOR = "administrator"
    MANAGER = "manager"
    DEVELOPER = "developer"
    VIEWER = "viewer"
    BILLING = "billing"


class Workspace(models.Model):
    id = PrefixedIdField(prefix="wkspace")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class Membership(models.Model):
    """An account's role in a workspace."""

    id = PrefixedIdField(prefix="member")
    account = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "account"], name="membership_unique"),
        ]
        indexes = [models.Index(fields=["workspace", "id"], name="membership_list_idx")]

    def __str__(self) -> str:
        return f"{self.account} is {self.role} of {self.workspace_id}"
