"""The Django admin, for the admin role only, behind the app's own login and 403 page.

Django's admin has its own login form and lets in anyone with is_staff; here a signed-in
non-admin gets the app's "Not allowed" page, and a visitor the app's login page."""

from typing import Any

from django.contrib import admin
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse


class EvalsiteAdminSite(admin.AdminSite):
    site_header = "evalsite administration"
    site_title = "evalsite admin"

    def has_permission(self, request: HttpRequest) -> bool:
        return bool(getattr(request.user, "is_admin", False))

    @login_not_required  # it is where anonymous visitors are sent: send them on to ours
    def login(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if request.user.is_authenticated:
            raise PermissionDenied("The admin site is for the admin role.")
        return redirect_to_login(request.GET.get(REDIRECT_FIELD_NAME) or reverse("admin:index"))
