from bots.message_payloads import MessagePayloadField
from platform_site.api.fields import JSONObjectField, StrictCharField
from platform_site.api.serializers import ClosedSerializer


class ChatMessageCreateSerializer(ClosedSerializer):
    payload = MessagePayloadField()
    conversationId = StrictCharField(min_length=1, max_length=70)
    metadata = JSONObjectField(required=False)
