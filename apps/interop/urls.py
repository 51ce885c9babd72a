from django.urls import path

from apps.accounts.scope import owners
from apps.interop import views

app_name = "interop"
urlpatterns = [
    path("tasks/<slug:slug>/import-results/", views.import_results, name="import"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners("interop", {"slug": ("datasets.Task", "project_id")})
