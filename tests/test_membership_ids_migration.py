"""bots.0005 gives memberships prefixed ids in place of integers: every row is
kept, in the same order, and what names one by id follows it (audit records,
the Django admin's log). It runs back and forth on PostgreSQL and SQLite."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from platform_site.foundation.ids import is_id

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("bots", "0004_workspace_settings_audit_records"),
    ("admin", "0003_logentry_add_action_flag_choices"),
    # Named so that the state of the models used below is their latest.
    ("contenttypes", "0002_remove_content_type_name"),
    ("auth", "0012_alter_user_first_name_max_length"),
]
AFTER = [("bots", "0005_membership_prefixed_id")]
CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture
def migrated_back():
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_memberships_and_their_references_follow_the_new_ids(migrated_back):
    apps = migrated_back
    accounts = apps.get_model("auth", "User")
    workspaces = apps.get_model("bots", "Workspace")
    memberships = apps.get_model("bots", "Membership")
    records = apps.get_model("bots", "AuditRecord")
    content_types = apps.get_model("contenttypes", "ContentType")
    log_entries = apps.get_model("admin", "LogEntry")

    workspace = workspaces.objects.create(id="wkspace_01J0000000000000000000000A", name="w")
    old_ids = []
    for number in range(4):
        account = accounts.objects.create(username=f"u{number}", email=f"u{number}@example.test")
        membership = memberships.objects.create(account=account, workspace=workspace, role="viewer")
        # The last three in one millisecond: their order must hold all the same.
        memberships.objects.filter(pk=membership.pk).update(
            created_at=CREATED + timedelta(seconds=min(number, 1)),
            updated_at=CREATED + timedelta(days=number),
        )
        old_ids.append(str(membership.pk))
    records.objects.create(
        id="audit_01J0000000000000000000000A",
        workspace=workspace,
        action="member.role_changed",
        target_type="member",
        target_id=old_ids[1],
    )
    records.objects.create(
        id="audit_01J0000000000000000000000B",
        workspace=workspace,
        action="token.created",
        target_type="token",
        target_id=old_ids[1],
    )
    membership_type, _ = content_types.objects.get_or_create(app_label="bots", model="membership")
    log_entries.objects.create(
        content_type=membership_type,
        object_id=old_ids[2],
        object_repr="u2",
        action_flag=2,
        user_id=accounts.objects.get(username="u0").pk,
        action_time=CREATED,
    )

    apps = migrate(AFTER)
    memberships = apps.get_model("bots", "Membership")
    rows = list(
        memberships.objects.order_by("id").values_list(
            "id", "account__username", "created_at", "updated_at", "role"
        )
    )
    assert [row[1] for row in rows] == ["u0", "u1", "u2", "u3"]
    assert all(is_id(row[0], "member") for row in rows)
    assert rows[3][2:] == (CREATED + timedelta(seconds=1), CREATED + timedelta(days=3), "viewer")
    new_id = {username: pk for pk, username, *_ in rows}
    records = apps.get_model("bots", "AuditRecord")
    assert records.objects.get(action="member.role_changed").target_id == new_id["u1"]
    assert records.objects.get(action="token.created").target_id == old_ids[1]
    assert apps.get_model("admin", "LogEntry").objects.get().object_id == new_id["u2"]

    apps = migrate(BEFORE)
    rows = list(
        apps.get_model("bots", "Membership")
        .objects.order_by("id")
        .values_list("id", "account__username", "updated_at")
    )
    assert [row[1] for row in rows] == ["u0", "u1", "u2", "u3"]
    assert rows[3][2] == CREATED + timedelta(days=3)
    numbered = {username: str(pk) for pk, username, _ in rows}
    records = apps.get_model("bots", "AuditRecord")
    assert records.objects.get(action="member.role_changed").target_id == numbered["u1"]
    assert apps.get_model("admin", "LogEntry").objects.get().object_id == numbered["u2"]
