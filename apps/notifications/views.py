"""A project's notifications page: its webhooks and email alerts, and the delivery log. For the
project's admins (and instance admins) only: a webhook's URL may itself be a credential."""

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from apps.accounts.access import AppRequest
from apps.accounts.models import Project, User
from apps.notifications import jobs, notices
from apps.notifications.forms import EmailAlertForm, WebhookForm
from apps.notifications.models import Delivery, EmailAlert, Webhook

LOG_ROWS = 100


def _project(request: AppRequest, slug: str) -> Project:
    """The project, if the user administers it (404 otherwise: its name stays private)."""
    projects = Project.objects.for_user(request.user, User.Role.ADMIN)
    return get_object_or_404(projects, slug=slug)


def index(request: AppRequest) -> HttpResponse:
    """The projects whose notifications the user may set."""
    projects = Project.objects.for_user(request.user, User.Role.ADMIN)
    return render(request, "notifications/index.html", {"projects": projects})


@never_cache
def project_page(request: AppRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    return _page(request, project, WebhookForm(), EmailAlertForm())


def _page(
    request: AppRequest,
    project: Project,
    webhook_form: WebhookForm,
    email_form: EmailAlertForm,
    made_secret: str = "",
    status: int = 200,
) -> HttpResponse:
    log = Delivery.objects.of_project(project).select_related("notice", "webhook", "email")
    context = {
        "project": project,
        "webhooks": Webhook.objects.filter(project=project),
        "emails": EmailAlert.objects.filter(project=project),
        "webhook_form": webhook_form,
        "email_form": email_form,
        "made_secret": made_secret,
        "log": log[:LOG_ROWS],
    }
    return render(request, "notifications/project.html", context, status=status)


@require_POST
@never_cache
def webhook_new(request: AppRequest, slug: str) -> HttpResponse:
    project = _project(request, slug)
    form = WebhookForm(request.POST, instance=Webhook(project=project, created_by=request.user))
    if not form.is_valid():
        return _page(request, project, form, EmailAlertForm(), status=400)
    form.save()
    messages.success(request, f"Saved the webhook {form.instance.name}.")
    # The secret is shown on this response only (never stored in a message or a redirect).
    return _page(request, project, WebhookForm(), EmailAlertForm(), form.made_secret, 201)


@never_cache
def webhook_edit(request: AppRequest, slug: str, pk: int) -> HttpResponse:
    project = _project(request, slug)
    webhook = get_object_or_404(Webhook, project=project, pk=pk)
    form = WebhookForm(request.POST or None, instance=webhook)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved the webhook {webhook.name}.")
        if form.made_secret:
            return _page(request, project, WebhookForm(), EmailAlertForm(), form.made_secret)
        return redirect("notifications:project", slug=project.slug)
    context = {"project": project, "form": form, "destination": webhook}
    return render(request, "notifications/edit.html", context)


@never_cache
def email_edit(request: AppRequest, slug: str, pk: int | None = None) -> HttpResponse:
    project = _project(request, slug)
    alert = (
        get_object_or_404(EmailAlert, project=project, pk=pk)
        if pk is not None
        else EmailAlert(project=project, created_by=request.user)
    )
    form = EmailAlertForm(request.POST or None, instance=alert)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved the email alert {alert.name}.")
        return redirect("notifications:project", slug=project.slug)
    if pk is None and request.method == "POST":
        return _page(request, project, WebhookForm(), form, status=400)
    context = {"project": project, "form": form, "destination": alert}
    return render(request, "notifications/edit.html", context)


def _destination(project: Project, kind: str, pk: int) -> Webhook | EmailAlert:
    if kind not in ("webhook", "email"):
        raise Http404("No such kind of destination.")
    if kind == "webhook":
        return get_object_or_404(Webhook, project=project, pk=pk)
    return get_object_or_404(EmailAlert, project=project, pk=pk)


@require_POST
def destination_test(request: AppRequest, slug: str, kind: str, pk: int) -> HttpResponse:
    project = _project(request, slug)
    destination = _destination(project, kind, pk)
    with transaction.atomic():
        jobs.start([notices.test_message(destination, request.user)])
    messages.success(request, f"Sending a test message to {destination.name}: see the log.")
    return redirect("notifications:project", slug=project.slug)


@require_POST
def destination_delete(request: AppRequest, slug: str, kind: str, pk: int) -> HttpResponse:
    project = _project(request, slug)
    destination = _destination(project, kind, pk)
    destination.delete()
    messages.success(request, f"Deleted {destination.name} and its delivery log.")
    return redirect("notifications:project", slug=project.slug)


@require_POST
def delivery_send(request: AppRequest, slug: str, pk: int) -> HttpResponse:
    """Send a delivery again now: after it gave up, or instead of waiting for its backoff."""
    project = _project(request, slug)
    delivery = get_object_or_404(Delivery.objects.of_project(project), pk=pk)
    if delivery.state == Delivery.State.DELIVERED:
        messages.info(request, "That one was delivered already.")
    else:
        with transaction.atomic():
            delivery.send_again(timezone.now())
            jobs.start([delivery])
        messages.success(request, "Sending it again: the log says how it went.")
    return redirect("notifications:project", slug=project.slug)
