from django.urls import path

from apps.accounts.scope import owners
from apps.datasets import views

app_name = "datasets"
urlpatterns = [
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/new/", views.task_create, name="task-create"),
    path("tasks/<slug:slug>/", views.task_detail, name="task-detail"),
    path("tasks/<slug:slug>/new-data/", views.task_new_data, name="task-new-data"),
    path("tasks/<slug:slug>/upload/", views.dataset_upload, name="dataset-upload"),
    path("tasks/<slug:slug>/upload/<str:token>/", views.dataset_map, name="dataset-map"),
    path("datasets/", views.dataset_list, name="dataset-list"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset-detail"),
    path("datasets/<int:pk>/items/<int:position>/", views.item_detail, name="item-detail"),
    path("datasets/<int:pk>/download/<str:fmt>/", views.dataset_download, name="dataset-download"),
    path("datasets/<int:pk>/perturb/", views.dataset_perturb, name="dataset-perturb"),
    path("datasets/<int:pk>/delete/", views.dataset_delete, name="dataset-delete"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py).
owners(
    "datasets",
    {
        "slug": ("datasets.Task", "project_id"),
        "pk": ("datasets.Dataset", "task__project_id"),
        "token": None,
        "position": None,
        "fmt": None,
    },
)
