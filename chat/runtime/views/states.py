from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chat.models import STATE_PAYLOAD_MAX_BYTES
from chat.presenters import state_json
from chat.runtime.state_schema import (
    STATE_PATH_PARAMETERS,
    StateAnswerSerializer,
    StateReadAnswerSerializer,
)
from chat.runtime.state_serializers import (
    StateExpirySerializer,
    StateGetOrSetSerializer,
    StatePatchSerializer,
    StateSetSerializer,
)
from chat.runtime.views.base import RuntimeViewSet
from chat.selectors.states import StateKey, state_get, state_key
from chat.services.states import (
    KEEP,
    state_delete,
    state_expiry_set,
    state_get_or_set,
    state_patch,
    state_set,
)
from platform_site.api.idempotency import idempotent_create
from platform_site.api.permissions import CanReadChat, CanWriteMessages
from platform_site.api.principals import bot_principal
from platform_site.api.serializers import ClosedSerializer

ViewMethod = TypeVar("ViewMethod", bound=Callable[..., Any])


def _key(request: Request, type: str, id: str, name: str) -> StateKey:
    return state_key(bot=bot_principal(request).bot, type=type, target_id=id, name=name)


def _key_and_body(
    request: Request, path: tuple[str, str, str], serializer_class: type[ClosedSerializer]
) -> tuple[StateKey, dict[str, Any]]:
    """The key the path names (refused first), then the valid body."""
    key = _key(request, *path)
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return key, serializer.validated_data


def _change_schema(
    operation_id: str, summary: str, request: type[ClosedSerializer], **more: Any
) -> Callable[[ViewMethod], ViewMethod]:
    """The document of a route that changes a state and answers it."""
    return extend_schema(
        operation_id=operation_id,
        summary=summary,
        request=request,
        responses={200: StateAnswerSerializer},
        **more,
    )


class RuntimeStateViewSet(RuntimeViewSet):
    """The bot's states: named JSON payloads on its conversations, users,
    workflows and on itself, as the hosted runtime API keeps them."""

    path_parameters = STATE_PATH_PARAMETERS
    permissions_by_action = {
        "retrieve": [CanReadChat],
        "upsert": [CanWriteMessages],
        "partial_update": [CanWriteMessages],
        "get_or_set": [CanWriteMessages],
        "expiry": [CanWriteMessages],
    }

    @extend_schema(
        summary="Get a state",
        operation_id="getState",
        responses={200: StateReadAnswerSerializer},
    )
    def retrieve(self, request: Request, type: str, id: str, name: str) -> Response:
        """An expired state is absent (404), whether or not its `state_expired`
        event has gone yet. Reading a state does not move its expiry."""
        state = state_get(key=_key(request, type, id, name))
        return Response({"state": state_json(state), "meta": {"cached": False}})

    @_change_schema(
        "setState",
        "Set a state, made if absent; a null payload deletes it",
        StateSetSerializer,
        description=(
            "The payload replaces the state's. An `expiry` left out keeps the state's own,"
            " null removes it, a number sets it; every write starts the expiry again from"
            " now. A null payload deletes the state and answers it as it was (404 when there"
            f" was none). A payload over {STATE_PAYLOAD_MAX_BYTES} bytes of compact JSON is 413."
        ),
    )
    def upsert(self, request: Request, type: str, id: str, name: str) -> Response:
        key, data = _key_and_body(request, (type, id, name), StateSetSerializer)
        if data["payload"] is None:
            state = state_delete(key=key)
        else:
            state = state_set(key=key, payload=data["payload"], expiry=data.get("expiry", KEEP))
        return Response({"state": state_json(state)})

    @_change_schema(
        "patchState", "Change some top-level keys of a state's payload", StatePatchSerializer
    )
    def partial_update(self, request: Request, type: str, id: str, name: str) -> Response:
        """Each top-level key of the payload replaces the state's (a shallow
        merge); 404 when the state is absent or expired. The expiry is as for
        setState, and starts again from now."""
        key, data = _key_and_body(request, (type, id, name), StatePatchSerializer)
        state = state_patch(key=key, payload=data["payload"], expiry=data.get("expiry", KEEP))
        return Response({"state": state_json(state)})

    @extend_schema(
        summary="Get a state, or set it if absent",
        operation_id="getOrSetState",
        request=StateGetOrSetSerializer,
        responses={200: StateReadAnswerSerializer, 201: StateReadAnswerSerializer},
    )
    @idempotent_create
    def get_or_set(self, request: Request, type: str, id: str, name: str) -> Response:
        """The state as it is (200, its expiry not moved), or, when absent or
        expired, one made with this payload and expiry (201)."""
        key, data = _key_and_body(request, (type, id, name), StateGetOrSetSerializer)
        state, created = state_get_or_set(
            key=key, payload=data["payload"], expiry=data.get("expiry")
        )
        return Response(
            {"state": state_json(state), "meta": {"cached": False}},
            status=201 if created else 200,
        )

    @_change_schema("setStateExpiry", "Set a state's expiry", StateExpirySerializer)
    def expiry(self, request: Request, type: str, id: str, name: str) -> Response:
        """The state expires after this many milliseconds of idleness from now
        (null: never); 404 when it is absent or expired."""
        key, data = _key_and_body(request, (type, id, name), StateExpirySerializer)
        return Response({"state": state_json(state_expiry_set(key=key, expiry=data["expiry"]))})
