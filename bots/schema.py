"""How the token schemes appear in the OpenAPI document (loaded by BotsConfig.ready)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

_BEARER = {"type": "http", "scheme": "bearer", "description": "A personal access token, bp_pat_…"}


class BotTokenScheme(OpenApiAuthenticationExtension):
    target_class = "bots.authentication.BotTokenAuthentication"
    name = ["runtimeToken", "botId"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [_BEARER, {"type": "apiKey", "in": "header", "name": "x-bot-id"}]


class WorkspaceTokenScheme(OpenApiAuthenticationExtension):
    target_class = "bots.authentication.WorkspaceTokenAuthentication"
    name = ["adminToken", "workspaceId"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [_BEARER, {"type": "apiKey", "in": "header", "name": "x-workspace-id"}]
