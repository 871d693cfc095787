"""A person at the Django admin, in headless Chromium: a staff account that
is not a superuser logs in, adds a member to its workspace, creates a token
(shown once) that then works on the admin API, and reads the audit records
it left; a workspace it has no part in never shows. Screenshots of every
page land under tests/output/<test function>/."""

import httpx
import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from bots.models import AccessToken, AuditAction, AuditRecord, Membership, Role
from bots.services.bots import bot_create
from bots.services.workspaces import workspace_create
from bots.token_checks import SHOWN_PREFIX_LENGTH, TOKEN_PREFIX
from tests.browser import Browser, browser, chromium  # noqa: F401
from tests.factories import AccountFactory

# The live server commits: the browser's requests run on their own thread.
pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "a-long-browser-password"
MEMBER_EMAIL = "new.member@example.test"


@pytest.fixture
def staff():
    account = AccountFactory(username="staff@example.test", is_staff=True, is_superuser=False)
    account.set_password(PASSWORD)
    account.save()
    return account


def log_in(window: Browser, account, password: str) -> None:
    window.visit("/admin/login/", "login")
    window.fill("id_username", account.get_username())
    window.fill("id_password", password)
    window.submit("admin-index")
    assert window.path == "/admin/", window.text
    assert window.find_all("#logout-form")


def shows(text: str, action: AuditAction) -> bool:
    """An admin shows an action by its label (a list filter, a cell) or value."""
    return text in (action.value, str(action.label))


def test_staff_adds_a_member_creates_a_token_and_reads_its_audit_records(
    browser: Browser,  # noqa: F811
    staff,
    live_server,
):
    own = workspace_create(name="Lighthouse Keepers", owner=staff)
    own_bot = bot_create(workspace=own, name="Foghorn")
    stranger = AccountFactory(username="stranger@example.test")
    other = workspace_create(name="Foreign Harbour", owner=stranger)
    bot_create(workspace=other, name="Not Yours")
    # What must not show, even in markup, on any page the staff account opens.
    other_workspace = [other.name, other.id, stranger.get_username()]

    log_in(browser, staff, PASSWORD)

    # A member, added through the membership form: only its own workspace is offered.
    browser.visit("/admin/bots/membership/add/", "membership-add")
    workspaces = Select(browser.find("#id_workspace"))
    assert [option.get_attribute("value") for option in workspaces.options] == ["", own.id]
    assert not any(text in browser.source for text in other_workspace)
    workspaces.select_by_value(own.id)
    browser.fill("id_email", MEMBER_EMAIL)
    Select(browser.find("#id_role")).select_by_value(Role.DEVELOPER)
    browser.submit("membership-added")
    assert browser.path == reverse("admin:bots_membership_changelist"), browser.text
    assert MEMBER_EMAIL in browser.find(".messagelist .success").text
    members = {browser.cell(row["account"]): row for row in browser.changelist()}
    assert set(members) == {staff.email, MEMBER_EMAIL}
    assert browser.cell(members[MEMBER_EMAIL]["role"]).lower() == Role.DEVELOPER
    assert not any(text in browser.source for text in other_workspace)
    membership = Membership.objects.get(workspace=own, account__email=MEMBER_EMAIL)
    assert membership.role == Role.DEVELOPER

    # A token for the new member: its raw value is on the next page, once.
    browser.visit("/admin/bots/accesstoken/add/", "token-add")
    browser.fill("id_email", MEMBER_EMAIL)
    browser.fill("id_name", "from the browser")
    browser.fill("id_expires_in_days", "30")
    browser.submit("token-created")
    raw = browser.find("#raw-token").text.strip()
    assert raw.startswith(TOKEN_PREFIX), browser.text
    token = AccessToken.objects.get(prefix=raw[:SHOWN_PREFIX_LENGTH])
    assert browser.path == reverse("admin:bots_accesstoken_change", args=[quote(token.pk)])
    assert token.account == membership.account
    assert token.name == "from the browser"
    assert token.expires_at is not None

    # It works on the admin API, for the workspace its account is a member of only.
    bots = httpx.get(
        f"{live_server.url}/v1/admin/bots",
        headers={"Authorization": f"Bearer {raw}", "x-workspace-id": own.id},
    )
    assert bots.status_code == 200, bots.text
    assert [bot["id"] for bot in bots.json()["bots"]] == [own_bot.id]
    not_a_member = httpx.get(
        f"{live_server.url}/v1/admin/bots",
        headers={"Authorization": f"Bearer {raw}", "x-workspace-id": other.id},
    )
    assert not_a_member.status_code == 401, not_a_member.text

    # Opening the page again (a GET, as a person would) shows it no more.
    browser.visit(browser.path, "token-page-again")
    assert not browser.find_all("#raw-token")
    assert raw not in browser.source
    assert token.prefix in browser.text

    # The audit records, as the staff account sees them: what it did.
    browser.visit("/admin/bots/auditrecord/", "audit-records")
    rows = browser.changelist()
    listed = [(browser.cell(row["action"]), browser.cell(row["actor_label"])) for row in rows]
    token_rows = [
        row for row in rows if shows(browser.cell(row["action"]), AuditAction.TOKEN_CREATED)
    ]
    assert len(token_rows) == 1, listed
    assert browser.cell(token_rows[0]["actor_label"]) == staff.email
    assert any(
        shows(action, AuditAction.MEMBER_ADDED) and actor == staff.email for action, actor in listed
    ), listed
    assert not any(text in browser.source for text in other_workspace)

    record = AuditRecord.objects.get(action=AuditAction.TOKEN_CREATED, target_id=token.pk)
    assert record.actor == staff
    assert record.client_ip == "127.0.0.1"
    link = next(a for cell in token_rows[0].values() for a in cell.find_elements(By.TAG_NAME, "a"))
    browser.click_through(link, "audit-record")
    assert browser.path == reverse("admin:bots_auditrecord_change", args=[quote(record.pk)])
    assert shows(browser.field("action"), AuditAction.TOKEN_CREATED)
    assert browser.field("actor_label") == staff.email
    assert browser.field("target_type") == "token"
    assert browser.field("target_id") == str(token.pk)
    assert browser.field("client_ip") == "127.0.0.1"
    assert token.prefix in browser.field("changes_json")
    assert not any(text in browser.source for text in other_workspace)
