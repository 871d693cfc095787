"""GET {chat_url}/{webhookId}/conversations/{id}/listen: the live stream of a
conversation, for its participants.

An async view, so that a listener waiting for news costs the server a
coroutine, not a worker: it runs under the ASGI application
(platform_site.asgi) only."""

import logging

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from chat.live.access import listener_admit, stream_response
from chat.live.bus import conversation_channel, live_bus
from platform_site.api.errors import APIError, Internal
from platform_site.api.exception_handler import domain_error, error_response
from platform_site.foundation.domain_errors import DomainError

logger = logging.getLogger("chat.live")


@csrf_exempt  # authenticated by a header, like the rest of the API
async def conversation_listen(
    request: HttpRequest, webhook_id: str, conversation_id: str
) -> HttpResponseBase:
    try:
        listener = await listener_admit(
            webhook_id=webhook_id,
            method=request.method or "",
            key=request.headers.get("x-user-key"),
            conversation_chat_id=conversation_id,
            remote_addr=request.META.get("REMOTE_ADDR", ""),
        )
        if not isinstance(request, ASGIRequest):
            # A WSGI server would read the endless stream to its end before
            # sending a byte, and hold a worker for good.
            logger.error("live stream requested from a WSGI server: serve platform_site.asgi")
            raise Internal("The live stream is served by the ASGI application only")
    except APIError as error:
        return error_response(error)
    except DomainError as refusal:
        return error_response(domain_error(refusal))
    # Subscribed before answering: nothing published once the client has the
    # first bytes is missed.
    subscription = await live_bus().subscribe(conversation_channel(listener.conversation_id)).open()
    return stream_response(listener=listener, subscription=subscription)
