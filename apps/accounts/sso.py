"""Single sign-on with OpenID Connect, through mozilla-django-oidc.

The library does the protocol: the authorization request with state, nonce and a PKCE
challenge (S256), the code exchange, the ID token's signature against the provider's JWKS, the
userinfo call. Here: the provider's endpoints come from its discovery document (only the
issuer is configured), the ID token's issuer, audience and expiry are checked too (the library
checks the signature and the nonce only), and who the user is and which role they get is
SsoIdentity.sign_in's business, by the `sub` and the groups claim.

The callback logs the user in without django-axes' backend: axes counts failed password
guesses, and a sign-in the provider vouched for is none.
"""

import logging
from functools import cache
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, resolve_url

from apps.accounts.models import GroupPolicy, SignInRefused, SsoIdentity, User

logger = logging.getLogger(__name__)

# The library's settings that name the provider's endpoints, and the discovery document's keys.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_RP_CLIENT_ID)


@cache
def _discover(issuer: str) -> dict[str, Any]:
    """The provider's discovery document, fetched once per process (a failure is not kept)."""
    import requests

    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
    response.raise_for_status()
    document = response.json()
    # OpenID Connect Discovery 1.0, 4.3: the document must name the issuer it was asked for.
    if document.get("issuer") != issuer:
        raise ImproperlyConfigured(
            f"OIDC_ISSUER is {issuer!r} but the provider's discovery document says "
            f"{document.get('issuer')!r}: set OIDC_ISSUER to exactly that."
        )
    return document


def policy() -> GroupPolicy:
    return GroupPolicy(
        claim=settings.OIDC_GROUPS_CLAIM,
        roles={
            User.Role.ADMIN: settings.OIDC_ADMIN_GROUPS,
            User.Role.REVIEWER: settings.OIDC_REVIEWER_GROUPS,
            User.Role.VIEWER: settings.OIDC_VIEWER_GROUPS,
        },
        default=settings.OIDC_DEFAULT_ROLE,
        project_prefix=settings.OIDC_PROJECT_GROUP_PREFIX,
    )


def get_settings(attr: str, *args: Any) -> Any:
    """mozilla-django-oidc's settings, the provider's endpoints from its discovery document."""
    if attr in DISCOVERED:
        return _discover(settings.OIDC_ISSUER)[DISCOVERED[attr]]
    if args:
        return getattr(settings, attr, args[0])
    if not hasattr(settings, attr):
        raise ImproperlyConfigured(f"Setting {attr} not found")
    return getattr(settings, attr)


@cache
def _library() -> tuple[Any, Any]:
    """The library's request view and backend as used here. Imported on the first sign-in, not
    by every process that loads the URLs: requests, PyJWT and cryptography add ~0.3 s to a
    process's start at a busy machine's load."""
    import jwt
    from mozilla_django_oidc.auth import OIDCAuthenticationBackend
    from mozilla_django_oidc.views import OIDCAuthenticationRequestView

    class SsoStart(OIDCAuthenticationRequestView):
        get_settings = staticmethod(get_settings)

    class SsoBackend(OIDCAuthenticationBackend):
        get_settings = staticmethod(get_settings)

        def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
            alg = jwt.get_unverified_header(payload).get("alg")
            if alg != self.OIDC_RP_SIGN_ALGO:
                raise SuspiciousOperation(
                    f"The ID token is signed with {alg!r}, not {self.OIDC_RP_SIGN_ALGO}."
                )
            try:
                return jwt.decode(
                    payload,
                    key,
                    algorithms=[alg],
                    audience=self.OIDC_RP_CLIENT_ID,
                    issuer=settings.OIDC_ISSUER,
                    leeway=settings.OIDC_CLOCK_LEEWAY,
                )
            except jwt.ExpiredSignatureError as exc:
                raise SignInRefused(
                    "The identity provider's token had expired when it got here: is the clock "
                    "of this server or of the provider wrong? Sign in again, or ask an admin."
                ) from exc
            except jwt.InvalidTokenError as exc:
                raise SuspiciousOperation(f"The ID token was refused: {exc}") from exc

        def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> User:
            userinfo = self.get_userinfo(access_token, id_token, payload)
            # OpenID Connect Core 5.3.2: userinfo's sub must be the ID token's.
            if userinfo.get("sub") != payload.get("sub"):
                raise SuspiciousOperation("The userinfo answer is about someone else (sub).")
            return SsoIdentity.sign_in(settings.OIDC_ISSUER, {**payload, **userinfo}, policy())

    return SsoStart, SsoBackend


def _refused(request: HttpRequest, message: str) -> HttpResponse:
    messages.error(request, f"Single sign-on failed. {message}")
    return redirect("accounts:login")


def start(request: HttpRequest) -> HttpResponse:
    """Send the browser to the provider, with state, nonce and a PKCE challenge kept in the
    session for the callback."""
    if not enabled():
        raise Http404("Single sign-on is not set up.")
    import requests

    try:
        return _library()[0].as_view()(request)
    except (requests.RequestException, ValueError, ImproperlyConfigured) as exc:
        logger.warning("OIDC discovery at %s failed: %s", settings.OIDC_ISSUER, exc)
        return _refused(request, "The identity provider does not answer: try again later.")


def callback(request: HttpRequest) -> HttpResponse:
    """Where the provider sends the browser back: the state must be one this session started,
    used once; then the code is exchanged (with the PKCE verifier) and the user signed in."""
    if not enabled():
        raise Http404("Single sign-on is not set up.")
    states = request.session.get("oidc_states") or {}
    entry = states.pop(request.GET.get("state", ""), None)
    request.session["oidc_states"] = states  # a state is used once, whatever happens next
    if error := request.GET.get("error"):
        return _refused(
            request, f"The identity provider said: {request.GET.get('error_description') or error}."
        )
    if entry is None or "code" not in request.GET:
        return _refused(
            request, "This sign-in was not started here or was already used: sign in again."
        )
    import requests

    try:
        user = _library()[1]().authenticate(
            request, nonce=entry["nonce"], code_verifier=entry["code_verifier"]
        )
    except SignInRefused as exc:
        return _refused(request, str(exc))
    except (
        SuspiciousOperation,
        ImproperlyConfigured,
        requests.RequestException,
        ValueError,
    ) as exc:
        logger.warning("OIDC sign-in refused: %s", exc)
        return _refused(request, "The identity provider's answer could not be verified.")
    if user is None:
        return _refused(request, "The identity provider's answer could not be verified.")
    next_url = request.session.pop("oidc_login_next", None)
    # ModelBackend keeps the session: it reads the user by id and refuses a deactivated one.
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))
