from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import PasswordChangeForm
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST

from apps.accounts import sso
from apps.accounts.access import AppRequest, viewer_may_post
from apps.accounts.forms import ApiTokenForm
from apps.accounts.models import ApiToken


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso"] = sso.enabled()
        context["sso_label"] = settings.OIDC_LOGIN_LABEL
        context["local_login"] = settings.LOCAL_LOGIN
        return context


_login = LoginView.as_view()


@login_not_required
def login_view(request: HttpRequest) -> HttpResponseBase:
    """Username and password (django-axes counts the failures), and single sign-on when it is
    set up; with LOCAL_LOGIN off, single sign-on only."""
    if request.method == "POST" and not settings.LOCAL_LOGIN:
        raise PermissionDenied("Passwords are turned off here: sign in with single sign-on.")
    return _login(request)


sso_start = login_not_required(require_GET(sso.start))
sso_callback = login_not_required(never_cache(require_GET(sso.callback)))
logout_view = viewer_may_post(auth_views.LogoutView.as_view())


# A user's own tokens change nothing shared: viewers make read-only tokens here too.
@viewer_may_post
@never_cache
def api_tokens(request: AppRequest) -> HttpResponse:
    """The user's API tokens; a new one is shown on the page that made it, and never again
    (it is not stored, so it cannot go through a redirect or a message)."""
    form = ApiTokenForm(request.POST or None)
    raw = ""
    if request.method == "POST" and form.is_valid():
        _, raw = ApiToken.issue(request.user, form.cleaned_data["name"])
        form = ApiTokenForm()
    context = {
        "form": form,
        "new_token": raw,
        "tokens": request.user.api_tokens.active(),
        "revoked": request.user.api_tokens.exclude(revoked_at=None)[:20],
    }
    return render(request, "accounts/api_tokens.html", context, status=201 if raw else 200)


@viewer_may_post
@require_POST
def api_token_revoke(request: AppRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.revoke()
    messages.success(request, f"Revoked {token}: it no longer opens the API.")
    return redirect("accounts:api-tokens")


# Everyone's own password, viewers' too: it changes nothing shared.
@viewer_may_post
@sensitive_post_parameters()
@never_cache
def password_change(request: AppRequest) -> HttpResponse:
    """Change one's own password; the session stays signed in (its hash follows the password)."""
    form = PasswordChangeForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        update_session_auth_hash(request, user)
        messages.success(request, "Your password is changed.")
        return redirect("accounts:password-change")
    return render(request, "accounts/password_change.html", {"form": form})


# How one reads model output is the reader's own business: viewers choose it too.
@viewer_may_post
@require_POST
def text_view(request: AppRequest) -> HttpResponse:
    """Rendered or raw model output, remembered for this user on every page and machine."""
    choice = request.POST.get("text_view", "")
    if choice in request.user.TextView.values:
        request.user.text_view = choice
        request.user.save(update_fields=["text_view"])
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
        back = "/"
    return redirect(back)
