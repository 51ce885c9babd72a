"""Who calls the API: a bearer token, else the browser's session (with its CSRF token).

Each answers with the user and holds the net the pages have in ReadOnlyViewerMiddleware: a
user below the reviewer role changes nothing, whatever an operation forgets to check. A call
that matches neither is refused with 401 by the API (see apps/api/api.py).
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import AuthenticationError, HttpError
from ninja.security import APIKeyCookie, HttpBearer

from apps.accounts import scope
from apps.accounts.middleware import SAFE_METHODS
from apps.accounts.models import ApiToken, User

NO_CREDENTIALS = (
    "Send an API token as “Authorization: Bearer <token>”; make one on your account page "
    "(/accounts/tokens/)."
)
BAD_TOKEN = "This API token is not valid: it is mistyped, revoked, or its user is deactivated."


# What a call says of an object that does not exist, said too of one in a project the caller is
# not a member of: a guessed id tells nothing.
MISSING = {
    "datasets.Task": "There is no task {!r}.",
    "datasets.Dataset": "There is no dataset #{}.",
    "runs.Run": "There is no run #{}.",
    "runs.PromptTemplate": "There is no template #{}.",
    "judges.Judge": "There is no judge #{}.",
    "drafting.Generator": "There is no generator #{}.",
    "drafting.DraftItem": "There is no draft item #{}.",
}


def signed_in(request: HttpRequest, user: User) -> User:
    """`user` makes this call: the views see them as request.user, as pages do."""
    request.user = user
    if request.method not in SAFE_METHODS and not user.can_edit:
        raise HttpError(403, "Viewers cannot change anything.")
    try:
        scope.check(request.resolver_match, user, request.method)
    except scope.Hidden as hidden:
        message = MISSING.get(hidden.label, "Not found.").format(hidden.value)
        if request.resolver_match and (request.resolver_match.url_name or "").startswith("draft_"):
            message = message.replace("dataset", "draft dataset")
        raise HttpError(404, message) from None
    except scope.ReadOnly as error:
        raise HttpError(403, str(error)) from None
    return user


def bearer_token(request: HttpRequest) -> str | None:
    """The token of an `Authorization: Bearer …` header, if the request has one."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class TokenAuth(HttpBearer):
    def __call__(self, request: HttpRequest) -> Any:
        # Not HttpBearer's own: it logs a header it does not understand, and that may be a
        # token sent with the wrong scheme.
        token = bearer_token(request)
        return None if token is None else self.authenticate(request, token)

    def authenticate(self, request: HttpRequest, token: str) -> User:
        user = ApiToken.user_for(token)
        if user is None:
            # A wrong token is an error even beside a session: the script must hear of it.
            raise AuthenticationError(message=BAD_TOKEN)
        return signed_in(request, user)


class SessionAuth(APIKeyCookie):
    """The signed-in browser (the docs page, scripts in the page). Ninja's cookie auth checks
    the CSRF token on unsafe methods; it is asked only when a user is signed in, so that a
    call with no credentials at all hears 401, not a CSRF failure."""

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> User | None:
        user = request.user
        return signed_in(request, user) if isinstance(user, User) and user.is_active else None
