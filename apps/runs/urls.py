from django.urls import path

from apps.accounts.scope import owners
from apps.runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("<int:pk>/resume/", views.run_resume, name="resume"),
    path("<int:pk>/retry-failed/", views.run_retry_failed, name="retry-failed"),
    path("<int:pk>/overwrite/", views.run_overwrite, name="overwrite"),
    path("<int:pk>/items/<int:item_id>/", views.response_detail, name="response-detail"),
    path("new/generation/", views.generation_new, name="generation-new"),
    path("new/generation/start/", views.generation_start, name="generation-start"),
    path("new/choice/", views.choice_new, name="choice-new"),
    path("new/choice/start/", views.choice_start, name="choice-start"),
    path("new/script/", views.dialogue_new, {"kind": "script"}, name="script-new"),
    path("new/script/start/", views.dialogue_start, {"kind": "script"}, name="script-start"),
    path("new/simulation/", views.dialogue_new, {"kind": "simulation"}, name="simulation-new"),
    path(
        "new/simulation/start/",
        views.dialogue_start,
        {"kind": "simulation"},
        name="simulation-start",
    ),
    path("endpoints/", views.endpoint_list, name="endpoint-list"),
    path("endpoints/new/", views.endpoint_create, name="endpoint-create"),
    path("endpoints/<int:pk>/edit/", views.endpoint_edit, name="endpoint-edit"),
    path("endpoints/<int:pk>/test/", views.endpoint_test, name="endpoint-test"),
    path("prompts/", views.template_list, name="template-list"),
    path("prompts/new/", views.template_create, name="template-create"),
    path("prompts/<int:pk>/", views.template_detail, name="template-detail"),
    path("prompts/<int:pk>/edit/", views.template_edit, name="template-edit"),
    path("system/", views.system, name="system"),
    path("system/check-worker/", views.check_worker, name="check-worker"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners(
    "runs",
    {
        "pk": ("runs.Run", "task__project_id"),
        "item_id": ("datasets.Item", "dataset__task__project_id"),
    },
    {
        "endpoint-edit": {"pk": None},
        "endpoint-test": {"pk": None},
        "template-detail": {"pk": ("runs.PromptTemplate", "task__project_id")},
        "template-edit": {"pk": ("runs.PromptTemplate", "task__project_id")},
    },
)
