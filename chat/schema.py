"""How the user key scheme appears in the OpenAPI document (loaded by ChatConfig.ready)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class UserKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chat.authentication.UserKeyAuthentication"
    name = "userKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "x-user-key",
            "description": "HS256 JWT {id: <userId>} signed with the chat connection's key",
        }


class SignedUserKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chat.authentication.SignedUserKeyAuthentication"
    name = "signedUserKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "x-user-key",
            "description": (
                "The same key as userKey, whose user may not exist yet: it is made on first use"
            ),
        }
