from django.urls import path

from apps.accounts.scope import owners
from apps.leaderboards import views

app_name = "leaderboards"
urlpatterns = [
    path("", views.index, name="index"),
    path("runs/<int:run_id>/export/", views.run_export, name="run-export"),
    path("runs/<int:run_id>/reviews/", views.reviews_export, name="run-reviews"),
    path("judges/<int:pk>/alignment/", views.judge_alignment, name="judge-alignment"),
    path("judges/<int:pk>/bias/", views.judge_bias, name="judge-bias"),
    path(
        "judges/<int:pk>/alignment/threshold/",
        views.alignment_threshold,
        name="alignment-threshold",
    ),
    # Two segments, so no task slug can shadow it.
    path("about/numbers/", views.methods, name="methods"),
    path("<slug:slug>/", views.board, name="task"),
    path("<slug:slug>/export/", views.board_export, name="task-export"),
    path("<slug:slug>/compare/", views.compare, name="compare"),
    path("<slug:slug>/compare/stop/", views.stop_rule, name="stop-rule"),
    path("<slug:slug>/regressions/", views.regressions, name="regressions"),
    path("<slug:slug>/grid/", views.grid, name="grid"),
    path("<slug:slug>/robustness/", views.robustness, name="robustness"),
    path("<slug:slug>/agreement/", views.agreement, name="agreement"),
    path("<slug:slug>/metrics/", views.metrics, name="metrics"),
    path("<slug:slug>/pairwise/", views.pairwise, name="pairwise"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners(
    "leaderboards",
    {
        "run_id": ("runs.Run", "task__project_id"),
        "pk": ("judges.Judge", "task__project_id"),
        "slug": ("datasets.Task", "project_id"),
    },
)
