"""Login throttling with django-axes (configured in settings): which address a request counts
under, and the page a refused login gets."""

import ipaddress

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str:
    """The address a login attempt counts under: REMOTE_ADDR, or, when settings.CLIENT_IP_HEADER
    names the header a reverse proxy sets, the right-most address in it. A proxy appends the
    address it saw, so the entries to its left are whatever the client sent and are ignored.
    A value that is not an address falls back to REMOTE_ADDR (every client then shares the
    proxy's count: stricter, never looser)."""
    remote = request.META.get("REMOTE_ADDR", "")
    if not settings.CLIENT_IP_HEADER:
        return remote
    entries = [part.strip() for part in request.META.get(settings.CLIENT_IP_HEADER, "").split(",")]
    try:
        return str(ipaddress.ip_address(entries[-1]))
    except ValueError:
        return remote


def lockout_message() -> str:
    minutes = round(settings.AXES_COOLOFF_TIME.total_seconds() / 60)
    # Same words whether the username exists or not, and whether the username or the address
    # reached the limit: the page must not tell an attacker which accounts are real.
    return (
        "Too many failed logins for this username or from this address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials=None
) -> HttpResponse:
    """The login page with the lockout message, as 429 Too Many Requests."""
    form = AuthenticationForm(request)
    return render(
        request,
        "accounts/login.html",
        {"form": form, "lockout_message": lockout_message(), "next": request.POST.get("next", "")},
        status=429,
    )
