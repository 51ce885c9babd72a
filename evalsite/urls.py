from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView
from django_rq.urls import get_admin_urlpatterns, get_api_urlpatterns

from apps.accounts.access import admin_required
from apps.accounts.scope import owners
from evalsite import health
from evalsite.help import help_page

# django-rq's pages let in any is_staff user and send others to the Django admin's login; here
# they are for the admin role, with the app's login and 403 page like every other page.
rq_urls = (get_api_urlpatterns() + get_admin_urlpatterns(view_wrapper=admin_required), "django_rq")

# Calls under /api/v1/ answer a bad request in JSON (a body too big, a broken multipart body).
handler400 = "apps.api.api.bad_request"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="datasets:task-list"), name="home"),
    # Pages name their icon; browsers and tools that ask for /favicon.ico anyway get it too.
    path(
        "favicon.ico",
        login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
        name="favicon",
    ),
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("help/", help_page, name="help"),
    path("help/<slug:page>/", help_page, name="help-page"),
    path("accounts/", include("apps.accounts.urls")),
    path("", include("apps.datasets.urls")),
    path("runs/", include("apps.runs.urls")),
    path("runs/", include("apps.drafting.urls")),  # generators and drafts kept their URLs
    path("judges/", include("apps.judges.urls")),
    path("review/", include("apps.review.urls")),
    path("leaderboards/", include("apps.leaderboards.urls")),
    path("", include("apps.interop.urls")),
    path("notifications/", include("apps.notifications.urls")),
    path("api/v1/", include("apps.api.urls")),
    path("admin/", admin.site.urls),
    path("django-rq/", include(rq_urls)),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners("", {"page": None})
