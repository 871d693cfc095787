"""The webchat page, {base}/chat/{webhookId}/webchat: the official Botpress
webchat (webchat/, bundled into chat/static/webchat/) full page, for
the end users of the bot that a chat connection belongs to. The page only
loads the bundle; the bundle talks to the chat interface like any client."""

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from bots.models import Bot
from chat.credentials import chat_connection_for_webhook
from platform_site.api import errors
from platform_site.api.exception_handler import error_response


# It reads no body and writes nothing: exempt, so that a POST gets the 405
# below in the one error body rather than Django's HTML CSRF page.
@csrf_exempt
def webchat_page(request: HttpRequest, webhook_id: str) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        refusal = f"{request.method} is not allowed on the webchat page"
        return error_response(errors.MethodNotFound(refusal, headers={"Allow": "GET, HEAD"}))
    connection = chat_connection_for_webhook(webhook_id)
    if connection is None:
        # The chat interface's own answer for an unknown webhook id (ChatInterfaceViewSet).
        return error_response(errors.ResourceNotFound(f"Chat {webhook_id!r} not found"))
    bot_name = Bot.objects.filter(pk=connection.bot_id).values_list("name", flat=True).first()
    config = {
        # The chat URL as clients are told it (seed_demo's chatUrl): the
        # webchat calls {apiUrl}/{clientId}/…, the chat interface's routes.
        "apiUrl": settings.CHAT_URL,
        "clientId": connection.webhook_id,
        "botName": bot_name or "",
        # The chat interface serves both (feedback, files).
        "feedbackEnabled": True,
        "allowFileUpload": True,
    }
    response = render(request, "chat/webchat.html", {"config": config, "title": bot_name or "Chat"})
    response["Content-Security-Policy"] = content_security_policy()
    return response


def content_security_policy() -> str:
    """Nothing from another site: the bundle and its stylesheet come from
    here, and it talks only to this service. The chat interface and the
    files' URLs (CHAT_URL, PUBLIC_BASE_URL) are named besides 'self' since
    either may be configured on another origin than the page's."""
    service = " ".join(sorted({_origin(settings.CHAT_URL), _origin(settings.PUBLIC_BASE_URL)}))
    directives = {
        "default-src": "'none'",
        "script-src": "'self'",
        # The component renders its theme as a <style> element, and its
        # dialogs' scroll lock (react-remove-scroll) inserts one when they
        # open, sized to the window's scrollbar: neither can carry a nonce,
        # and the second's text varies, so no hash either. (Refused, the first
        # costs only the theme's corner radii; the second, the scroll lock.)
        "style-src": "'self' 'unsafe-inline'",
        # The chat interface: the API client's calls and the event stream's.
        "connect-src": f"'self' {service}",
        # data: for the stylesheet's SVG icons, blob: for the preview of a
        # file the user is about to upload; the service for files' images.
        "img-src": f"'self' data: blob: {service}",
        # data: for the notification sound, which is bundled as a data: URL.
        "media-src": f"'self' data: {service}",
        "base-uri": "'none'",
        "form-action": "'none'",
    }
    return "; ".join(f"{name} {sources}" for name, sources in directives.items())


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
