from django.db import models

from bots.models import Bot
from platform_site.api.ids import PrefixedIdField

FILE_KEY_MAX_LENGTH = 500


class FileStatus(models.TextChoices):
    UPLOAD_PENDING = "upload_pending"
    UPLOAD_FAILED = "upload_failed"
    UPLOAD_COMPLETED = "upload_completed"
    INDEXING_PENDING = "indexing_pending"
    INDEXING_FAILED = "indexing_failed"
    INDEXING_COMPLETED = "indexing_completed"


class File(models.Model):
    id = PrefixedIdField(prefix="file")
    bot = models.ForeignKey(Bot, on_delete=models.CASCADE, related_name="files")
    key = models.CharField(max_length=FILE_KEY_MAX_LENGTH)
    size = models.BigIntegerField()
    content_type = models.CharField(max_length=200)
    tags = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    access_policies = models.JSONField(default=list, blank=True)
    index = models.BooleanField(default=False)
    status = models.CharField(
        max_length=30, choices=FileStatus.choices, default=FileStatus.UPLOAD_PENDING
    )
    failed_status_reason = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["bot", "key"], name="file_key_unique")]
        indexes = [models.Index(fields=["bot", "id"], name="file_list_idx")]

    def __str__(self) -> str:
        return f"{self.key} ({self.id})"


class PassageType(models.TextChoices):
    CHUNK = "chunk"
    SUMMARY = "summary"
    CONSOLIDATED = "consolidated"
    IMAGE = "image"


class PassageSubtype(models.TextChoices):
    TITLE = "title"
    SUBTITLE = "subtitle"
    PARAGRAPH = "paragraph"
    BLOCKQUOTE = "blockquote"
    LIST = "list"
    TABLE = "table"
    CODE = "code"
    IMAGE = "image"
    PAGE = "page"


class Passage(models.Model):
    id = PrefixedIdField(prefix="psg")
    file = models.ForeignKey(File, on_delete=models.CASCADE, related_name="passages")
    position = models.PositiveIntegerField()
    content = models.TextField()
    type = models.CharField(max_length=20, choices=PassageType.choices, default=PassageType.CHUNK)
    subtype = models.CharField(
        max_length=20, choices=PassageSubtype.choices, default=PassageSubtype.PARAGRAPH
    )
    page_number = models.PositiveIntegerField(null=True, blank=True)
    source_url = models.URLField(max_length=2000, blank=True)

    class Meta:
        # The unique (file, position) index is also the one that serves a page.
        constraints = [
            models.UniqueConstraint(fields=["file", "position"], name="passage_position_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.file_id}#{self.position}"
