"""What every runtime chat resource shares: the bot token scheme, and who may
do what to a conversation, user, message or participation."""

from rest_framework.permissions import BasePermission

from platform_site.api.permissions import CanReadChat, CanWriteMessages
from platform_site.api.token_authentication import BotTokenAuthentication
from platform_site.api.views import ApiViewSet

# Reading needs the chat read permission, any change the message write one
# (an action its routes do not map is never reached).
CHAT_RESOURCE_PERMISSIONS: dict[str, list[type[BasePermission]]] = {
    "list": [CanReadChat],
    "retrieve": [CanReadChat],
    "create": [CanWriteMessages],
    "get_or_create": [CanWriteMessages],
    "update": [CanWriteMessages],
    "destroy": [CanWriteMessages],
}


class RuntimeViewSet(ApiViewSet):
    authentication_classes = [BotTokenAuthentication]
