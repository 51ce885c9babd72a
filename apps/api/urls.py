"""/api/v1/: calls answer 401 in JSON without a token or session, never a login redirect, so
LoginRequiredMiddleware lets them through (ninja's authentication checks every call). The
docs page is a browser page: without a session it goes to the login page like any other."""

from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, URLResolver, path, re_path
from django.views.generic.base import RedirectView

from apps.accounts.access import viewer_may_post
from apps.accounts.scope import owners
from apps.api.api import api, no_such_call

BROWSER_PAGES = {"openapi-view", "api-root"}
SCHEMA = "openapi-json"


def _for_scripts(patterns: list[URLPattern | URLResolver]) -> list[URLPattern | URLResolver]:
    for pattern in patterns:
        if not isinstance(pattern, URLPattern) or pattern.name in BROWSER_PAGES:
            continue
        pattern.callback = login_not_required(pattern.callback)
        if pattern.name != SCHEMA:
            # The API's calls refuse a viewer's change themselves, in JSON (apps/api/auth.py).
            pattern.callback = viewer_may_post(pattern.callback)
    return patterns


app_name = "api"
urlpatterns = [
    # /api/v1/ itself, in a browser: the docs (ninja's own root view only answers 404).
    path("", RedirectView.as_view(pattern_name="api:openapi-view"), name="index"),
    *_for_scripts(api.urls[0]),
    # Says nothing about what exists: the same answer with or without a token.
    re_path(
        r"^(?P<path>.+)$",
        viewer_may_post(login_not_required(no_such_call)),
        name="no-such-call",
    ),
]

TASK = ("datasets.Task", "project_id")
DATASET = ("datasets.Dataset", "task__project_id")
RUN = ("runs.Run", "task__project_id")
# Where each call's path parameters find their project (apps/accounts/scope.py); the check is
# made once the caller is known (apps/api/auth.py), for a token as for a session.
owners(
    "api",
    {"slug": TASK, "pk": RUN, "name": None, "path": None},
    {
        "dataset_detail": {"pk": DATASET},
        "template_version": {"pk": ("runs.PromptTemplate", "task__project_id")},
        "judge_version": {"pk": ("judges.Judge", "task__project_id")},
        "generator_version": {"pk": ("drafting.Generator", "task__project_id")},
        "draft_detail": {"pk": DATASET},
        "draft_publish": {"pk": DATASET},
        "draft_discard": {"pk": DATASET},
        "draft_decide": {"pk": ("drafting.DraftItem", "dataset__task__project_id")},
    },
)
