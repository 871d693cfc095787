"""Another process for the credential cache's Redis tests: Django on the
database and Redis its environment names, answering one JSON line on stdout
for each JSON line read on stdin.

    {"op": "listening"}                          -> {"listening": true}
    {"op": "bot", "raw": ..., "scope": bot id}   -> {"role": "developer" | null, "queries": 0}
    {"op": "bot", ...}                           -> {"error": "The token has been revoked", ...}
    {"op": "chat", "webhook": ..., "chat_user": ...} -> {"user": id | null, "queries": n}

Run as `python -m tests.credential_child` from the project's folder."""

import json
import os
import sys
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from bots.token_checks import InvalidToken  # noqa: E402
from chat.credentials import chat_connection_for_webhook, chat_user_for_key  # noqa: E402
from platform_site.api.credentials import credentials_for_bot, credentials_for_workspace  # noqa: E402
from platform_site.foundation.credential_invalidation import listening_since  # noqa: E402


def lookup(request: dict[str, Any]) -> dict[str, Any]:
    if request["op"] == "chat":
        chat = chat_connection_for_webhook(request["webhook"])
        if chat is None:
            return {"user": None, "connection": None}
        user = chat_user_for_key(connection=chat, chat_user_id=request["chat_user"])
        return {"user": None if user is None else user.pk, "connection": chat.pk}
    find = credentials_for_bot if request["op"] == "bot" else credentials_for_workspace
    scope = {"bot_id" if request["op"] == "bot" else "workspace_id": request["scope"]}
    try:
        principal = find(raw=request["raw"], **scope)
    except InvalidToken as exc:
        return {"error": str(exc)}
    return {"role": None if principal is None else principal.role}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    if request["op"] == "listening":
        return {"listening": listening_since() is not None}
    with CaptureQueriesContext(connection) as queries:
        result = lookup(request)
    return {**result, "queries": len(queries)}


def main() -> None:
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        print(json.dumps(answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
