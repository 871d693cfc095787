"""Files an end user sends through the official webchat (POST {chat}/…/files):
files of the bot, read by the bot like any other (GET /v1/files, their
`url`), made through the files app's own upsert. Each user's keys are their
own (`webchat/{user}/{key}`), so that nobody replaces another's file; the
content is public at its `url` (the webchat puts that URL in the message
that carries the file), and nothing is indexed."""

from datetime import datetime

from django.db import transaction

from bots.models import User
from files.models import File
from files.services.files import file_upsert

PUBLIC = "public_content"


@transaction.atomic
def chat_file_create(
    *,
    user: User,
    key: str,
    size: int,
    content_type: str | None,
    tags: dict[str, str],
    access_policies: list[str],
    expires_at: datetime | None,
) -> File:
    return file_upsert(
        bot=user.bot,
        key=chat_file_key(user=user, key=key),
        size=size,
        content_type=content_type,
        index=False,
        tags={**tags, "webchat:userId": user.chat_id},
        access_policies=sorted({*access_policies, PUBLIC}),
        expires_at=expires_at,
    )


def chat_file_key(*, user: User, key: str) -> str:
    return f"webchat/{user.chat_id}/{key}"
