"""What `make run` prints once the demo is seeded: where everything is, the
demo's credentials, and a working curl line for each kind of endpoint."""

import json
import shlex
from pathlib import Path
from typing import Any


def curl(method: str, url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> str:
    parts = ["curl", "-sS", "-X", method, url]
    for name, value in headers.items():
        parts += ["-H", f"{name}: {value}"]
    if body is not None:
        parts += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    return shlex.join(parts)


def delivery_hint(demo: dict[str, Any], demo_json: Path) -> list[str]:
    url = demo.get("webhookUrl")
    if not url:
        return [
            "# create an event (the demo bot has no webhook URL, so it ends `ignored`:",
            "# set one on the bot in the Django admin to receive deliveries)",
        ]
    return [
        f"# the demo bot's events are delivered to {url}, where `make run` starts the",
        f"# example bot (examples/echo_bot.py --demo {demo_json}): it answers every",
        "# text message a user sends. Create an event:",
    ]


def demo_banner(demo: dict[str, Any], demo_json: Path) -> str:
    """The banner of a demo (demo_seed's answer, kept in `demo_json`)."""
    base, chat = demo["baseUrl"], demo["chatUrl"]
    token = demo["tokens"]["developer"]
    runtime = {"Authorization": f"Bearer {token}", "x-bot-id": demo["botId"]}
    admin = {"Authorization": f"Bearer {token}", "x-workspace-id": demo["workspaceId"]}
    lines = [
        "",
        "Bot platform is starting (web, worker, beat and the demo bot). Ctrl-C stops them all.",
        "",
        f"  API:          {base}",
        f"  API docs:     {base}/docs   (OpenAPI document: {base}/v1/openapi.json)",
        f"  Chat:         {chat}",
        f"  Webchat:      {chat}/{demo['webhookId']}/webchat   (the demo bot's page for end users)",
        f"  Metrics:      {base}/metrics   (Prometheus; from this machine only)",
        f"  Django admin: {demo['adminUrl']}   (its home page: the dashboard)",
        f"                user {demo['admin']['username']}",
        f"                password {demo['admin']['password']}  (superuser)",
        f"                or {demo['staff']['username']}, same password",
        "                (staff, administrator of the demo workspace: sees only it)",
        f"  Workspace:    {demo['workspaceId']}",
        f"  Bot:          {demo['botId']}",
        "  Tokens:       "
        + "\n                ".join(
            f"{role:<14} {value}" for role, value in demo["tokens"].items()
        ),
        f"  Chat webhook: {demo['webhookId']}   user key: {demo['userKey']}",
        "",
        "Try it:",
        "",
        *delivery_hint(demo, demo_json),
        curl("POST", f"{base}/v1/chat/events", runtime, {"type": "greeting", "payload": {}}),
        "# schedule one for a minute from now, then list the bot's events",
        curl(
            "POST",
            f"{base}/v1/chat/events",
            runtime,
            {"type": "reminder", "payload": {}, "schedule": {"delay": 60000}},
        ),
        curl("GET", f"{base}/v1/chat/events?pageSize=5", runtime),
        "# cancel a scheduled event: DELETE /v1/chat/events/scheduled/<event id>",
        "# read a file's passages",
        curl("GET", f"{base}/v1/files/{demo['fileId']}/passages?limit=3", runtime),
        '# send a chat message as an end user: the demo bot answers "You said: Hello bot"',
        curl(
            "POST",
            f"{chat}/{demo['webhookId']}/messages",
            {"x-user-key": demo["userKey"]},
            {
                "conversationId": demo["conversationId"],
                "payload": {"type": "text", "text": "Hello bot"},
            },
        ),
        "# read the conversation (the echo bot's reply shows up here) and listen to it live",
        curl(
            "GET",
            f"{chat}/{demo['webhookId']}/conversations/{demo['conversationId']}/messages",
            {"x-user-key": demo["userKey"]},
        ),
        curl(
            "GET",
            f"{chat}/{demo['webhookId']}/conversations/{demo['conversationId']}/listen",
            {"x-user-key": demo["userKey"]},
        ).replace("curl -sS", "curl -sSN", 1),
        "# list the workspace's bots, and its members",
        curl("GET", f"{base}/v1/admin/bots", admin),
        curl("GET", f"{base}/v1/admin/workspace-members", admin),
        "# what changed in the workspace, newest first (owner, administrator, manager)",
        curl(
            "GET",
            f"{base}/v1/admin/workspaces/{demo['workspaceId']}/audit-records",
            {**admin, "Authorization": f"Bearer {demo['tokens']['owner']}"},
        ),
        "",
        f"(All of it is in {demo_json}.)",
        "",
    ]
    return "\n".join(lines)
