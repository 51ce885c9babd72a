from django.urls import path

from apps.interop import views

app_name = "interop"
urlpatterns = [
    path("tasks/<slug:slug>/import-results/", views.import_results, name="import"),
]
