from django.urls import path

from apps.accounts.scope import owners
from apps.review import ab, several, views

app_name = "review"
urlpatterns = [
    path("", views.index, name="index"),
    path("run/<int:run_id>/", views.run_review, name="run"),
    path("run/<int:run_id>/bulk/", views.bulk, name="bulk"),
    path("run/<int:run_id>/next/", views.next_item, name="next"),
    path("run/<int:run_id>/claim/", views.claim_item, name="claim"),
    path("run/<int:run_id>/item/<int:item_id>/", views.item_page, name="item"),
    path("run/<int:run_id>/item/<int:item_id>/lock/", views.renew_lock, name="lock"),
    path("score/<int:score_id>/override/", views.override, name="override"),
    path("score/<int:score_id>/confirm/", views.confirm, name="confirm"),
    path("score/<int:score_id>/revert/", views.revert, name="revert"),
    path("score/<int:score_id>/blind/", views.blind_entry, name="blind"),
    path("score/<int:score_id>/review/", several.submit_review, name="submit"),
    path("adjudication/<int:pk>/", several.adjudicate, name="adjudicate"),
    path("task/<slug:slug>/adjudication/", several.adjudication_list, name="adjudication"),
    path("task/<slug:slug>/search/", views.task_search, name="search"),
    path("task/<slug:slug>/policy/", several.policy, name="policy"),
    path("ab/<int:run_id>/", ab.ab_start, name="ab"),
    path("ab/<int:run_id>/<int:item_id>/<int:a>/<int:b>/", ab.ab_item, name="ab-item"),
    path("ab/<int:run_id>/<int:item_id>/<int:a>/<int:b>/vote/", ab.ab_vote, name="ab-vote"),
    path("ab/<int:run_id>/<int:item_id>/<int:a>/<int:b>/next/", ab.ab_next, name="ab-next"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners(
    "review",
    {
        "run_id": ("runs.Run", "task__project_id"),
        "item_id": ("datasets.Item", "dataset__task__project_id"),
        "score_id": ("judges.Score", "run__task__project_id"),
        "pk": ("review.Adjudication", "score__run__task__project_id"),
        "slug": ("datasets.Task", "project_id"),
        "a": ("runs.Run", "task__project_id"),
        "b": ("runs.Run", "task__project_id"),
    },
)
