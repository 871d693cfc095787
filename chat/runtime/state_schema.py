"""The state routes in the OpenAPI document: their path parameters, and the
shapes they answer (chat.presenters.state_json builds the JSON; these
describe it as the hosted API's clients type it)."""

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from chat.models import STATE_EXPIRY_MAX_MS, StateType
from chat.selectors.states import STATE_NAME_RE
from platform_site.api.fields import JSONObjectField
from platform_site.api.schema import id_pattern

STATE_PATH_PARAMETERS = [
    OpenApiParameter(
        "type",
        {"type": "string", "enum": StateType.values},
        OpenApiParameter.PATH,
        description=(
            "What the state belongs to. `integration` (a type of the hosted API) is 400 here:"
            " this service runs no integrations"
        ),
    ),
    OpenApiParameter(
        "id",
        {"type": "string", "pattern": id_pattern("conv", "user", "bot", "wf")},
        OpenApiParameter.PATH,
        description=(
            "The id of the bot's conversation (`conv_…`), user (`user_…`) or workflow"
            " (`wf_…`), or the bot's own id for type `bot`; one that names nothing of"
            " the bot under this type is 404"
        ),
    ),
    OpenApiParameter(
        "name",
        {"type": "string", "pattern": f"^{STATE_NAME_RE}$"},
        OpenApiParameter.PATH,
        description="The state's name (a plugin's start with its alias and `#`)",
    ),
]


class StateSerializer(serializers.Serializer):
    """A state of the bot, of one of its conversations, users or workflows
    (also the `state` of a `state_expired` event's payload)."""

    id = serializers.RegexField(id_pattern("state"))
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField(help_text="Its last write")
    botId = serializers.RegexField(id_pattern("bot"))
    conversationId = serializers.RegexField(
        id_pattern("conv"), required=False, help_text="Of a conversation's state"
    )
    userId = serializers.RegexField(
        id_pattern("user"), required=False, help_text="Of a user's state"
    )
    name = serializers.RegexField(f"^{STATE_NAME_RE}$")
    type = serializers.ChoiceField(choices=StateType.values)
    payload = JSONObjectField()
    expiry = serializers.IntegerField(
        min_value=1,
        max_value=STATE_EXPIRY_MAX_MS,
        required=False,
        help_text="Milliseconds of idleness after which it expires; left out when none",
    )
    expiresAt = serializers.DateTimeField(
        required=False, help_text="Its last write plus its expiry; left out when none"
    )


class StateAnswerSerializer(serializers.Serializer):
    state = StateSerializer()


class StateReadMetaSerializer(serializers.Serializer):
    cached = serializers.BooleanField(help_text="Always false: this service keeps no cache")


class StateReadAnswerSerializer(StateAnswerSerializer):
    meta = StateReadMetaSerializer()
