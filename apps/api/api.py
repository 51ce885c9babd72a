"""The REST API under /api/v1/: one NinjaAPI, its authentication, and errors as JSON.

django-ninja builds the OpenAPI schema from typed function views, as the pages are written;
Django REST framework would bring class-based viewsets and serializers beside our forms.
Every error is `{"detail": "<the message the page shows>", "errors": {field: [messages]}}`
(`errors` only for a form's fields).
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import Resolver404, resolve
from django.views import defaults
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from apps.accounts.models import ApiToken
from apps.api import setup_calls, views
from apps.api.auth import BAD_TOKEN, NO_CREDENTIALS, SessionAuth, TokenAuth, bearer_token
from apps.api.errors import ApiError


def docs_guard(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The schema and its docs page need a token or a signed-in user, like every call."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            token = bearer_token(request)
            user = ApiToken.user_for(token) if token else None
            if user is None and request.path.endswith("/docs"):
                return redirect_to_login(request.get_full_path())
            if user is None:
                return unauthorized(request, BAD_TOKEN if token else NO_CREDENTIALS)
            request.user = user
        return view(request, *args, **kwargs)

    return guarded


class EvalsiteAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation: Any) -> str:
        """The view's name (`upload_dataset`), not ninja's module path: the method names of a
        client generated from the schema (clients/python)."""
        return str(operation.view_func.__name__)


api = EvalsiteAPI(
    title="evalsite API",
    version="1",
    description="Tasks, dataset uploads, runs, failed items, leaderboards and exports. "
    "Send `Authorization: Bearer <token>` (make a token on your account page).",
    urls_namespace="api",
    auth=[TokenAuth(), SessionAuth()],
    docs_decorator=docs_guard,
)
api.add_router("/", views.router)
# Setting a task up (endpoints, templates, judges, generators, drafts) and the release gate.
api.add_router("/", setup_calls.router)


def _json(request: HttpRequest, status: int, detail: str, **extra: Any) -> HttpResponse:
    return api.create_response(request, {"detail": detail, **extra}, status=status)


def no_such_call(request: HttpRequest, path: str = "") -> HttpResponse:
    """Any other path under /api/v1/: JSON, like every answer of the API, not the 404 page.
    (It also takes the paths APPEND_SLASH would redirect, so it names the one meant.)"""
    detail = f"There is no API call at {request.path}; see /api/v1/docs."
    try:
        meant = resolve(request.path + "/")
    except Resolver404:
        meant = None
    if meant is not None and meant.url_name != "no-such-call":
        detail = f"There is no API call at {request.path}: the address ends with a slash, {request.path}/."
    return _json(request, 404, detail)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's handler400: the API's calls answer JSON where Django would render its HTML
    400 page (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, a multipart body without its boundary,
    too many fields), whether a middleware or the call read the body; pages keep theirs."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception or Exception())
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
        size = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"
        return _json(
            request,
            413,
            f"The request body is over the limit of {size}; send a dataset as a multipart "
            "file field (files do not count).",
        )
    if isinstance(exception, MultiPartParserError):
        return _json(
            request,
            400,
            f"The multipart body could not be read ({exception}): send it with the boundary in "
            "its Content-Type, as curl -F and HTTP libraries do.",
        )
    return _json(request, 400, str(exception or "") or "Bad request.")


def unauthorized(request: HttpRequest, detail: str) -> HttpResponse:
    response = _json(request, 401, detail)
    response["WWW-Authenticate"] = 'Bearer realm="evalsite"'
    return response


@api.exception_handler(AuthenticationError)
def _authentication(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return unauthorized(request, exc.message if exc.message != "Unauthorized" else NO_CREDENTIALS)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _json(request, exc.status_code, exc.message)


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    extra = {"errors": exc.errors} if exc.errors else {}
    return _json(request, exc.status, exc.detail, **extra, **exc.extra)


@api.exception_handler(PermissionDenied)
def _permission_denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return _json(request, 403, str(exc) or "You may not do this.")


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _json(request, 404, str(exc) or "Not found.")


@api.exception_handler(DataError)
def _unstorable(request: HttpRequest, exc: DataError) -> HttpResponse:
    """PostgreSQL refuses a NUL character in text (SQLite stores it): a 400 naming it, not a
    500, for any text a call looks up or stores."""
    if "NUL" not in str(exc):
        raise exc
    return _json(request, 400, "A text holds a NUL character (\\x00), which cannot be stored.")


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    """A parameter of the wrong type: one sentence naming each, and the list ninja gives."""
    parts = []
    for error in exc.errors:
        where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "request"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return _json(request, 422, "; ".join(parts) + ".", errors=exc.errors)
