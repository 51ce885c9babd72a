from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="datasets:task-list"), name="home"),
    # Pages name their icon; browsers and tools that ask for /favicon.ico anyway get it too.
    path(
        "favicon.ico",
        login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
        name="favicon",
    ),
    path("accounts/", include("apps.accounts.urls")),
    path("", include("apps.datasets.urls")),
    path("runs/", include("apps.runs.urls")),
    path("judges/", include("apps.judges.urls")),
    path("review/", include("apps.review.urls")),
    path("leaderboards/", include("apps.leaderboards.urls")),
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
]
