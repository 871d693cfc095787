"""What every runtime chat resource shares: the bot token scheme."""

from bots.authentication import BotTokenAuthentication
from platform_site.api.views import ApiViewSet


class RuntimeChatViewSet(ApiViewSet):
    authentication_classes = [BotTokenAuthentication]
