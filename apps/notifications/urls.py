from django.urls import path

from apps.accounts.scope import owners
from apps.notifications import views

app_name = "notifications"

urlpatterns = [
    path("", views.index, name="index"),
    path("<slug:slug>/", views.project_page, name="project"),
    path("<slug:slug>/webhooks/new/", views.webhook_new, name="webhook-new"),
    path("<slug:slug>/webhooks/<int:pk>/", views.webhook_edit, name="webhook-edit"),
    path("<slug:slug>/emails/new/", views.email_edit, name="email-new"),
    path("<slug:slug>/emails/<int:pk>/", views.email_edit, name="email-edit"),
    path(
        "<slug:slug>/<str:kind>/<int:pk>/delete/",
        views.destination_delete,
        name="destination-delete",
    ),
    path("<slug:slug>/<str:kind>/<int:pk>/test/", views.destination_test, name="destination-test"),
    path("<slug:slug>/deliveries/<int:pk>/send/", views.delivery_send, name="delivery-send"),
]

# Where each URL parameter finds its project (apps/accounts/scope.py): the slug is the
# project's own; the views look each destination and delivery up within that project.
owners("notifications", {"slug": ("accounts.Project", "pk"), "pk": None, "kind": None})
