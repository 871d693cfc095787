"""GET /: a page for people who open the server in a browser (the admin's
"View site" link goes there), pointing at what they may be looking for.
Every other unknown path stays a JSON 404."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.views.generic.base import RedirectView

from platform_site.api import errors
from platform_site.api.exception_handler import error_response


def home(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return error_response(errors.MethodNotFound())
    context = {"platform_name": settings.PLATFORM_NAME, "chat_url": settings.CHAT_URL}
    return render(request, "platform/home.html", context)


# /favicon.ico, which browsers ask for on their own.
favicon = RedirectView.as_view(url=static("platform/favicon.svg"), permanent=True)
