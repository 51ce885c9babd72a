"""Role checks for views: small decorators that answer 403, never a redirect loop."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django_htmx.middleware import HtmxDetails

from apps.accounts.models import User

View = Callable[..., HttpResponse]


class AppRequest(HttpRequest):
    """What every view of the app receives (for the type checker; as django-htmx documents):
    LoginRequiredMiddleware has let only signed-in users through, and HtmxMiddleware has added
    `htmx`."""

    user: User
    htmx: HtmxDetails


def role_required(role: str) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated or not request.user.has_role(role):
                raise PermissionDenied(f"This needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


reviewer_required = role_required(User.Role.REVIEWER)
admin_required = role_required(User.Role.ADMIN)


def viewer_may_post(view: View) -> View:
    """Mark a view whose POST changes nothing shared (logout), so viewers may use it."""
    view.viewer_may_post = True  # type: ignore[attr-defined]
    return view
