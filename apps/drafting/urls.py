# Mounted under runs/ (evalsite/urls.py), where these pages were before drafting had its own app.
from django.urls import path

from apps.accounts.scope import owners
from apps.drafting import views

app_name = "drafting"
urlpatterns = [
    path("generators/", views.generator_list, name="generator-list"),
    path("generators/new/", views.generator_create, name="generator-create"),
    path("generators/<int:pk>/", views.generator_detail, name="generator-detail"),
    path("generators/<int:pk>/edit/", views.generator_edit, name="generator-edit"),
    path("generators/<int:pk>/generate/", views.generator_generate, name="generator-generate"),
    path("drafts/<int:pk>/", views.draft_review, name="draft-review"),
    path("drafts/<int:pk>/publish/", views.draft_publish, name="draft-publish"),
    path("drafts/<int:pk>/discard/", views.draft_discard, name="draft-discard"),
    path("drafts/items/<int:pk>/", views.draft_decide, name="draft-decide"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners(
    "drafting",
    {"pk": ("drafting.Generator", "task__project_id")},
    {
        "draft-review": {"pk": ("datasets.Dataset", "task__project_id")},
        "draft-publish": {"pk": ("datasets.Dataset", "task__project_id")},
        "draft-discard": {"pk": ("datasets.Dataset", "task__project_id")},
        "draft-decide": {"pk": ("drafting.DraftItem", "dataset__task__project_id")},
    },
)
