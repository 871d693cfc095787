"""demo_seed: a fresh demo workspace, separate from any other, with
something of everything: accounts of every role and their tokens, a bot
with an indexed file, a chat connection with users and a conversation, and
another workspace that none of them may reach. What it answers is what
`seed_demo --json` prints, the banner shows and the tests and benchmarks
read."""

import io
import secrets
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from bots.models import AccessToken, Bot, DeliveryFormat, Role
from bots.services.bots import bot_create, bot_update
from bots.services.members import member_add
from bots.services.tokens import access_token_create
from bots.services.workspaces import workspace_create
from bots.token_checks import InvalidToken, token_check_usable, token_digest
from chat.models import ChatConnection
from chat.services.connections import chat_connection_create
from chat.services.conversations import conversation_create
from chat.services.users import chat_user_create
from files.models import File
from files.services.file_index import file_index
from files.services.file_uploads import file_upload_receive
from files.services.files import file_upsert
from files.signed_urls import UploadGrant

DEMO_CHAPTERS = 5
DEMO_SECTIONS = 9


def demo_handbook() -> str:
    """A Markdown handbook long enough to page through its passages."""
    parts = ["# Demo handbook"]
    for chapter in range(1, DEMO_CHAPTERS + 1):
        parts.append(f"## Chapter {chapter}")
        for section in range(1, DEMO_SECTIONS + 1):
            parts.append(f"### Section {chapter}.{section}")
            parts.append(
                "A bot answers its users through conversations; every message a user"
                " sends becomes an event that is delivered to the bot's webhook, signed,"
                " retried and recorded."
            )
    return "\n\n".join(parts) + "\n"


def demo_file(bot: Bot) -> File:
    """The handbook, uploaded and indexed as a client's file would be; indexed
    here rather than by a worker, so that its passages are there at once."""
    data = demo_handbook().encode()
    file = file_upsert(
        bot=bot,
        key="demo/handbook.md",
        size=len(data),
        content_type="text/markdown",
        index=True,
        tags={"source": "demo"},
    )
    file = file_upload_receive(
        grant=UploadGrant(file_id=file.id, upload_id=file.upload_id),
        body=io.BytesIO(data),
        length=len(data),
        content_type=file.content_type,
    )
    file_index(file_id=file.id, revision=file.revision)
    file.refresh_from_db()
    return file


# The members made besides the owner, one account each.
DEMO_MEMBER_ROLES = [role for role in Role if role is not Role.OWNER]


@transaction.atomic
def demo_seed(
    *,
    webhook_url: str = "",
    delivery_format: str = DeliveryFormat.STANDARD,
    on_member: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """The demo, made in one transaction; `on_member` is called as each
    member's account is made. A webhook URL or format the bot refuses raises
    InvalidValue, and nothing is left behind."""
    suffix = secrets.token_hex(4)
    accounts = get_user_model().objects

    def account(label: str) -> Any:
        email = f"{label}-{suffix}@demo.local"
        return accounts.create_user(username=email, email=email)

    password = secrets.token_urlsafe(12)
    owner_email = f"owner-{suffix}@demo.local"
    owner = accounts.create_superuser(username=owner_email, email=owner_email, password=password)
    workspace = workspace_create(name=f"Demo {suffix}", owner=owner)
    tokens = {Role.OWNER.value: access_token_create(account=owner, name="demo")[1]}
    staff_email = ""
    for role in DEMO_MEMBER_ROLES:
        member = account(role.value)
        if role is Role.ADMINISTRATOR:
            # Staff without being superuser: the Django admin shows it this
            # workspace only.
            member.is_staff = True
            member.set_password(password)
            member.save(update_fields=["is_staff", "password"])
            staff_email = member.email
        member_add(workspace=workspace, account=member, role=role)
        tokens[role.value] = access_token_create(account=member, name="demo")[1]
        on_member()

    bot = bot_create(
        workspace=workspace,
        name="Demo bot",
        tags={"env": "demo"},
        webhook_url=webhook_url,
        delivery_format=delivery_format,
    )
    outsider = account("outsider")
    other_workspace = workspace_create(name=f"Other {suffix}", owner=outsider)
    other_bot = bot_create(workspace=other_workspace, name="Somebody else's bot")
    outsider_token = access_token_create(account=outsider, name="demo")[1]

    file = demo_file(bot)

    connection = chat_connection_create(bot=bot, name="Demo chat")
    user, user_key = chat_user_create(connection=connection, name="Demo user")
    conversation = conversation_create(creator=user)
    _, stranger_key = chat_user_create(connection=connection, name="Stranger")

    return {
        **_service_urls(),
        "admin": {"username": owner_email, "password": password},
        "staff": {"username": staff_email, "password": password},
        "workspaceId": workspace.id,
        "botId": bot.id,
        "webhookUrl": bot.webhook_url,
        "webhookSecret": bot.signing_secret,
        "deliveryFormat": bot.delivery_format,
        "tokens": tokens,
        "outsiderToken": outsider_token,
        "otherBotId": other_bot.id,
        "fileId": file.id,
        "fileKey": file.key,
        "webhookId": connection.webhook_id,
        "userId": user.chat_id,
        "userKey": user_key,
        "conversationId": conversation.chat_id,
        "strangerUserKey": stranger_key,
    }


def demo_reuse(*, saved: dict[str, Any], webhook_url: str) -> dict[str, Any] | None:
    """The demo `saved` describes (what demo_seed answered on an earlier run),
    when it is still whole: its bot in its workspace, its chat connection and
    the owner's live token; else None. Its bot's webhook is pointed at
    `webhook_url` and its URLs at this service, which may have moved since."""
    try:
        digest = token_digest(str(saved["tokens"][Role.OWNER.value]))
        token = AccessToken.objects.select_related("account").filter(token_hash=digest).first()
        # The check every request's token meets: known, not revoked or
        # expired, its account active.
        token_check_usable(
            token=token, digest=digest, account_is_active=bool(token and token.account.is_active)
        )
        bot = Bot.objects.get(id=saved["botId"], workspace_id=saved["workspaceId"])
    except (KeyError, TypeError, InvalidToken, Bot.DoesNotExist):
        return None
    if not ChatConnection.objects.filter(bot=bot, webhook_id=saved.get("webhookId")).exists():
        return None
    if webhook_url and bot.webhook_url != webhook_url:
        bot = bot_update(bot=bot, webhook_url=webhook_url)
    return {**saved, **_service_urls(), "webhookUrl": bot.webhook_url}


def _service_urls() -> dict[str, str]:
    """Where this service is reached, as the demo prints it."""
    return {
        "baseUrl": settings.PUBLIC_BASE_URL,
        "chatUrl": settings.CHAT_URL,
        "adminUrl": f"{settings.PUBLIC_BASE_URL}/admin/",
    }
