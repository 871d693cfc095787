import json
import secrets
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from bots.models import Role
from bots.services import bot_create, membership_create, workspace_create
from bots.tokens import access_token_create
from chat.connections import (
    chat_connection_create,
    chat_user_create,
    conversation_create,
)
from files.models import File, FileStatus, PassageSubtype
from files.services import PassageData, passages_replace

DEMO_PASSAGES = 60


def demo_passages() -> list[PassageData]:
    passages = [PassageData(content="Demo handbook", subtype=PassageSubtype.TITLE)]
    for chapter in range(1, DEMO_PASSAGES):
        if chapter % 10 == 1:
            passages.append(
                PassageData(content=f"Chapter {chapter // 10 + 1}", subtype=PassageSubtype.SUBTITLE)
            )
        else:
            passages.append(
                PassageData(
                    content=(
                        f"Section {chapter}: a bot answers its users through conversations; "
                        "every message a user sends becomes an event that is delivered "
                        "to the bot's webhook, signed, retried and recorded."
                    )
                )
            )
    return passages


class Command(BaseCommand):
    help = (
        "Create a fresh, separate demo workspace (accounts of every role with tokens, a bot "
        "with an indexed file, a chat connection, users and a conversation) and print it."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON object")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        suffix = secrets.token_hex(4)
        accounts = get_user_model().objects

        def account(label: str) -> Any:
            email = f"{label}-{suffix}@demo.local"
            return accounts.create_user(username=email, email=email)

        password = secrets.token_urlsafe(12)
        owner_email = f"owner-{suffix}@demo.local"
        owner = accounts.create_superuser(
            username=owner_email, email=owner_email, password=password
        )
        workspace = workspace_create(name=f"Demo {suffix}", owner=owner)
        tokens = {Role.OWNER.value: access_token_create(account=owner, name="demo")[1]}
        for role in Role:
            if role is Role.OWNER:
                continue
            member = account(role.value)
            membership_create(workspace=workspace, account=member, role=role)
            tokens[role.value] = access_token_create(account=member, name="demo")[1]

        bot = bot_create(workspace=workspace, name="Demo bot", tags={"env": "demo"})

        outsider = account("outsider")
        other_workspace = workspace_create(name=f"Other {suffix}", owner=outsider)
        other_bot = bot_create(workspace=other_workspace, name="Somebody else's bot")
        outsider_token = access_token_create(account=outsider, name="demo")[1]

        passages = demo_passages()
        file = File.objects.create(
            bot=bot,
            key="demo/handbook.md",
            size=sum(len(p.content.encode()) for p in passages),
            content_type="text/markdown",
            index=True,
            status=FileStatus.INDEXING_COMPLETED,
        )
        passages_replace(file=file, passages=passages)

        connection = chat_connection_create(bot=bot, name="Demo chat")
        user, user_key = chat_user_create(connection=connection, name="Demo user")
        conversation = conversation_create(creator=user)
        _, stranger_key = chat_user_create(connection=connection, name="Stranger")

        demo = {
            "baseUrl": settings.PUBLIC_BASE_URL,
            "chatUrl": settings.CHAT_URL,
            "adminUrl": f"{settings.PUBLIC_BASE_URL}/admin/",
            "admin": {"username": owner_email, "password": password},
            "workspaceId": workspace.id,
            "botId": bot.id,
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
        if options["json"]:
            self.stdout.write(json.dumps(demo))
        else:
            self.stdout.write(json.dumps(demo, indent=2))
