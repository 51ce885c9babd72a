from django.urls import path

from apps.runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("endpoints/", views.endpoint_list, name="endpoint-list"),
    path("system/", views.system, name="system"),
    path("system/check-worker/", views.check_worker, name="check-worker"),
]
