"""Memberships get prefixed ULID ids (`member_01J…`) instead of integers.

A primary key cannot change type in place on every database (SQLite cannot
alter one at all), so the rows are copied into a new table with their new
ids, the old table is dropped and the new one takes its name. Each new id's
time is its membership's creation time, and ids are made strictly
increasing in the old order, so listing by id ("oldest first") keeps its
order. What names a membership by id is rewritten too: the audit records
of member changes (their `target_id`) and the Django admin's change log.
Reversible: going back copies the rows under new integer ids.
"""

import secrets

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from ulid import ULID

import platform_site.foundation.ids

ROLE_CHOICES = [
    ("owner", "Owner"),
    ("administrator", "Administrator"),
    ("manager", "Manager"),
    ("developer", "Developer"),
    ("viewer", "Viewer"),
    ("billing", "Billing"),
]


def _increasing_member_ids(created):
    """A `member_` id per creation time, each greater than the one before."""
    previous = -1
    for moment in created:
        milliseconds = int(moment.timestamp() * 1000)
        candidate = int.from_bytes(milliseconds.to_bytes(6, "big") + secrets.token_bytes(10), "big")
        previous = max(candidate, previous + 1)
        yield f"member_{ULID.from_int(previous)}"


def _rename_references(apps, db, renamed):
    """Point what names a membership at its new id: `renamed` maps old id
    strings to new ones."""
    records = apps.get_model("bots", "AuditRecord")
    for old_id, new_id in renamed.items():
        records.objects.using(db).filter(target_type="member", target_id=old_id).update(
            target_id=new_id
        )
    try:
        log_entries = apps.get_model("admin", "LogEntry")
        content_types = apps.get_model("contenttypes", "ContentType")
    except LookupError:  # the Django admin is not installed
        return
    content_type = (
        content_types.objects.using(db).filter(app_label="bots", model="membership").first()
    )
    if content_type is None:
        return
    for old_id, new_id in renamed.items():
        log_entries.objects.using(db).filter(
            content_type_id=content_type.pk, object_id=old_id
        ).update(object_id=new_id)


def _copy(source, target, db, new_ids=None):
    rows = list(source.objects.using(db).order_by("id"))
    ids = list(new_ids(row.created_at for row in rows)) if new_ids else [None] * len(rows)
    copies = [
        target(
            id=new_id,
            account_id=row.account_id,
            workspace_id=row.workspace_id,
            role=row.role,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )
        for row, new_id in zip(rows, ids, strict=True)
    ]
    if new_ids:
        target.objects.using(db).bulk_create(copies, batch_size=500)
    else:
        # One at a time, so each gets its number in order; then the times,
        # which auto_now(_add) overwrote on save (update() leaves them).
        for row, copy in zip(rows, copies, strict=True):
            copy.save(using=db)
            target.objects.using(db).filter(pk=copy.pk).update(
                created_at=row.created_at, updated_at=row.updated_at
            )
    return {str(row.pk): str(copy.pk) for row, copy in zip(rows, copies, strict=True)}


def forwards(apps, schema_editor):
    db = schema_editor.connection.alias
    renamed = _copy(
        apps.get_model("bots", "Membership"),
        apps.get_model("bots", "PrefixedMembership"),
        db,
        new_ids=_increasing_member_ids,
    )
    _rename_references(apps, db, renamed)


def backwards(apps, schema_editor):
    db = schema_editor.connection.alias
    renamed = _copy(
        apps.get_model("bots", "PrefixedMembership"), apps.get_model("bots", "Membership"), db
    )
    _rename_references(apps, db, renamed)


class Migration(migrations.Migration):
    dependencies = [
        ("bots", "0004_workspace_settings_audit_records"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Plain timestamps while the rows are copied: auto_now(_add) would
        # overwrite them with the time of the copy.
        migrations.CreateModel(
            name="PrefixedMembership",
            fields=[
                (
                    "id",
                    platform_site.foundation.ids.PrefixedIdField(
                        editable=False,
                        max_length=36,
                        prefix="member",
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("role", models.CharField(choices=ROLE_CHOICES, max_length=20)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                (
                    "account",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bots.workspace",
                    ),
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
        migrations.DeleteModel(name="Membership"),
        migrations.RenameModel(old_name="PrefixedMembership", new_name="Membership"),
        migrations.AlterField(
            model_name="membership",
            name="created_at",
            field=models.DateTimeField(auto_now_add=True),
        ),
        migrations.AlterField(
            model_name="membership",
            name="updated_at",
            field=models.DateTimeField(auto_now=True),
        ),
        migrations.AlterField(
            model_name="membership",
            name="account",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="memberships",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="membership",
            name="workspace",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="memberships",
                to="bots.workspace",
            ),
        ),
        migrations.AddConstraint(
            model_name="membership",
            constraint=models.UniqueConstraint(
                fields=("workspace", "account"), name="membership_unique"
            ),
        ),
        migrations.AddIndex(
            model_name="membership",
            index=models.Index(fields=["workspace", "id"], name="membership_list_idx"),
        ),
    ]
