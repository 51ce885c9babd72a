from django.contrib import admin
from django.urls import include, path
from django.views.generic.base import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="datasets:task-list"), name="home"),
    path("accounts/", include("apps.accounts.urls")),
    path("", include("apps.datasets.urls")),
    path("runs/", include("apps.runs.urls")),
    path("judges/", include("apps.judges.urls")),
    path("review/", include("apps.review.urls")),
    path("leaderboards/", include("apps.leaderboards.urls")),
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
]
