"""What every runtime chat resource shares: the bot token scheme."""

from platform_site.api.token_authentication import BotTokenAuthentication
from platform_site.api.views import ApiViewSet


class RuntimeViewSet(ApiViewSet):
    authentication_classes = [BotTokenAuthentication]
