from django.urls import path

from apps.accounts.scope import owners
from apps.judges import views

app_name = "judges"
urlpatterns = [
    path("", views.judge_list, name="list"),
    path("new/", views.judge_create, name="create"),
    path("<int:pk>/", views.judge_detail, name="detail"),
    path("<int:pk>/edit/", views.judge_edit, name="edit"),
    path("<int:pk>/start/", views.judge_run_start, name="start"),
    path("<int:pk>/improve/", views.improve, name="improve"),
    path("<int:pk>/check/", views.check, name="check"),
    path("task/<slug:slug>/default/", views.set_default, name="set-default"),
    path("runs/<int:pk>/results/", views.run_results, name="results"),
    path("runs/<int:pk>/comparisons/", views.comparisons, name="comparisons"),
    path("runs/<int:pk>/failed/", views.failed_items, name="failed"),
    path("runs/<int:pk>/failed/<int:item_id>/retry/", views.retry_item, name="retry-item"),
    path("runs/<int:pk>/retry-failed/", views.retry_failed, name="retry-failed"),
    path("runs/<int:pk>/retry-failed/kind/", views.retry_failed_kind, name="retry-kind"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners(
    "judges",
    {
        "pk": ("judges.Judge", "task__project_id"),
        "slug": ("datasets.Task", "project_id"),
        "item_id": ("datasets.Item", "dataset__task__project_id"),
    },
    {
        "results": {"pk": ("runs.Run", "task__project_id")},
        "comparisons": {"pk": ("runs.Run", "task__project_id")},
        "failed": {"pk": ("runs.Run", "task__project_id")},
        "retry-item": {"pk": ("runs.Run", "task__project_id")},
        "retry-failed": {"pk": ("runs.Run", "task__project_id")},
        "retry-kind": {"pk": ("runs.Run", "task__project_id")},
    },
)
