from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

from apps.accounts import scope
from apps.accounts.models import ApiToken
from evalsite.sizes import sizes_apart

SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}


class ReadOnlyViewerMiddleware:
    """Refuse every unsafe request from a user below the reviewer role.

    Views check roles themselves; this is the net under them, so that a view added
    later without a check still cannot let a viewer change anything.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.method in SAFE_METHODS or getattr(view_func, "viewer_may_post", False):
            return None
        user = request.user
        if user.is_authenticated and not user.can_edit:
            raise PermissionDenied("Viewers cannot change anything.")
        return None


class ProjectScopeMiddleware:
    """Refuse a request for anything of a project the user is not a member of (404, as if it
    did not exist), or a change there without the reviewer role in it (403): the net under
    the views' own scoped querysets (apps/accounts/scope.py). The API makes the same check
    once it knows the caller (apps/api/auth.py), a token's user included."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        match = request.resolver_match
        if match is None or match.namespace == "api":
            return None
        try:
            scope.check(match, request.user, request.method)
        except scope.Hidden:
            raise Http404("There is nothing at this address.") from None
        except scope.ReadOnly as error:
            raise PermissionDenied(str(error)) from None
        return None


JSON = "application/json; charset=utf-8"  # as the API's own answers
# A page open to anyone (the login form) takes no file: a multipart body sent to one by someone
# not signed in (curl -F, a test client) is a form's fields, and no larger than this.
ANONYMOUS_MULTIPART_BYTES = 64 * 1024
# A multipart body carries its file and, besides it, form fields (counted by Django against
# DATA_UPLOAD_MAX_MEMORY_SIZE) and the boundaries and part headers between them.
MULTIPART_FRAMING_BYTES = 64 * 1024


class RequestBodyLimitMiddleware:
    """Refuse a request body by its Content-Length, before any of it is read.

    Without this, Django spooled a 1 GiB upload to a temporary file before the upload view
    said "the limit is 200 MB", and CSRF checking (which parses a multipart body to find its
    token) made the server spool any multipart body an anonymous client sent, before the login
    check. So: a body over the limit for its kind answers 413, and a multipart body from
    someone who is not signed in (no session, no valid API token) is refused unread, unless it
    is a small form sent to a page open to anyone (the login page).

    Its work is in `__call__`, which runs before any middleware's `process_view` (where CSRF
    reads the body) and before the view.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = _content_length(request)
        if length:
            multipart = request.content_type == "multipart/form-data"
            limit = _body_limit(multipart)
            if limit is not None and length > limit:
                return _too_large(request, length, limit, _advice(multipart))
            if multipart and not _signed_in(request):
                if not _open_to_anyone(request):
                    return _not_signed_in(request)
                if length > ANONYMOUS_MULTIPART_BYTES:
                    advice = "Sign in first to send a file."
                    return _too_large(request, length, ANONYMOUS_MULTIPART_BYTES, advice)
        return self.get_response(request)


def _content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0  # Django reads such a body as empty too


def _body_limit(multipart: bool) -> int | None:
    fields = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if not multipart:
        return fields
    return settings.DATASET_MAX_UPLOAD_BYTES + (fields or 0) + MULTIPART_FRAMING_BYTES


def _signed_in(request: HttpRequest) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return ApiToken.user_for(token.strip()) is not None
    return request.user.is_authenticated


def _open_to_anyone(request: HttpRequest) -> bool:
    """The view needs no login (LoginRequiredMiddleware's mark), found before it is called.
    The API's views all carry that mark (its own auth answers 401), and none is open."""
    if request.path.startswith("/api/"):
        return False
    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return False
    return not getattr(match.func, "login_required", True)


def _advice(multipart: bool) -> str:
    if multipart:
        return "Split the file, or ask an admin to raise DATASET_MAX_UPLOAD_BYTES."
    return "Send a dataset as a multipart file field (files count against a larger limit)."


def _too_large(request: HttpRequest, length: int, limit: int, advice: str) -> HttpResponse:
    shown, most = sizes_apart(length, limit)
    detail = f"The request body is {shown}; the limit is {most}. {advice}"
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=413, content_type=JSON)
    return render(request, "413.html", {"detail": detail}, status=413)


def _not_signed_in(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        detail = "Sign in first: send an API token as “Authorization: Bearer <token>”."
        response = JsonResponse({"detail": detail}, status=401, content_type=JSON)
        response["WWW-Authenticate"] = 'Bearer realm="evalsite"'
        return response
    return redirect_to_login(request.get_full_path())
