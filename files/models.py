from django.db import models

from bots.models import Bot
from platform_site.foundation.ids import PrefixedIdField

FILE_KEY_MAX_LENGTH = 500


class FileStatus(models.TextChoices):
    UPLOAD_PENDING = "upload_pending"
    UPLOAD_FAILED = "upload_failed"
    UPLOAD_COMPLETED = "upload_completed"
    INDEXING_PENDING = "indexing_pending"
    INDEXING_FAILED = "indexing_failed"
    INDEXING_COMPLETED = "indexing_completed"


WAITING_FOR_INDEXING = FileStatus.INDEXING_PENDING


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
    # Passages at most this long; null: settings.FILE_PASSAGE_MAX_LENGTH.
    max_chunk_length = models.PositiveSmallIntegerField(null=True, blank=True)
    public_content_immediately_accessible = models.BooleanField(default=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=30, choices=FileStatus.choices, default=FileStatus.UPLOAD_PENDING
    )
    failed_status_reason = models.CharField(max_length=2000, blank=True)
    # Where the bytes are in the files storage; empty until an upload completes.
    storage_name = models.CharField(max_length=500, blank=True, editable=False)
    # Names the upload URL handed out last: an upsert replaces it, so an
    # older URL can no longer overwrite the new content.
    upload_id = models.CharField(max_length=40, blank=True, editable=False)
    # Bumped whenever the content changes: an indexing run of an older
    # revision throws its result away.
    revision = models.PositiveIntegerField(default=0, editable=False)
    # Bumped whenever the passages are replaced: a nextToken of the old set
    # is refused rather than continued in the new one.
    passages_version = models.PositiveIntegerField(default=0, editable=False)
    # While indexing is pending: the run holding the file (0: none), and when
    # it counts as lost and the file is queued again.
    indexing_lease = models.BigIntegerField(default=0, editable=False)
    indexing_due_at = models.DateTimeField(null=True, blank=True, editable=False)
    indexing_attempts = models.PositiveSmallIntegerField(default=0, editable=False)
    # Passages written without their sentence embeddings (set through the
    # API, too many to embed in indexing's pass, or indexed before semantic
    # search): when the worker's run counts as lost and the file is queued
    # again; null: nothing due.
    embeddings_due_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bot", "key"], name="file_key_unique"),
            models.CheckConstraint(
                condition=models.Q(status=WAITING_FOR_INDEXING, indexing_due_at__isnull=False)
                | (~models.Q(status=WAITING_FOR_INDEXING) & models.Q(indexing_due_at__isnull=True)),
                name="file_indexing_pending_has_due_at",
            ),
        ]
        indexes = [
            models.Index(fields=["bot", "id"], name="file_list_idx"),
            models.Index(
                fields=["indexing_due_at"],
                name="file_indexing_due_idx",
                condition=models.Q(indexing_due_at__isnull=False),
            ),
            models.Index(
                fields=["embeddings_due_at"],
                name="file_embeddings_due_idx",
                condition=models.Q(embeddings_due_at__isnull=False),
            ),
            models.Index(
                fields=["expires_at"],
                name="file_expires_idx",
                condition=models.Q(expires_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.id})"

    @property
    def has_content(self) -> bool:
        return bool(self.storage_name)


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


# Headings: not ranked by search nor embedded (a one-word heading would
# outrank every passage under it), they come with the passages under them.
HEADING_SUBTYPES = (PassageSubtype.TITLE, PassageSubtype.SUBTITLE)


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


class FileEmbeddings(models.Model):
    """The sentence embeddings of a file's passages (files/embeddings/), one
    row per file: semantic search loads a file's vectors in one read and
    keeps them while the file's passages_version stays. Valid while
    `passages_version` and `model` match the file's and the running model's;
    a file whose row is missing or stale is searched by its words alone
    until the worker embeds it (files/services/embeddings.py)."""

    file = models.OneToOneField(
        File, primary_key=True, on_delete=models.CASCADE, related_name="embeddings"
    )
    passages_version = models.PositiveIntegerField()
    model = models.CharField(max_length=100)
    # The embedded passages' positions (uint32) and their vectors (float16,
    # one row of the model's dimensions each), little-endian, in the same order.
    positions = models.BinaryField()
    vectors = models.BinaryField()

    def __str__(self) -> str:
        return f"vectors of {self.file_id} ({self.model})"
