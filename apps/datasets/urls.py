from django.urls import path

from apps.datasets import views

app_name = "datasets"
urlpatterns = [
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/new/", views.task_create, name="task-create"),
    path("tasks/<slug:slug>/", views.task_detail, name="task-detail"),
    path("datasets/", views.dataset_list, name="dataset-list"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset-detail"),
]
