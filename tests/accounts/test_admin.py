"""The Django admin covers the domain model, for admins only, and never shows a stored API key."""

import pytest
from django.contrib import admin
from django.urls import reverse

from apps.runs.models import Endpoint

MODELS = sorted(
    (m._meta.app_label, m._meta.model_name)
    for m in admin.site._registry
    if m._meta.app_label != "auth"
)


def test_the_whole_flow_is_in_the_admin():
    registered = {label for label, _ in MODELS}
    assert {"accounts", "datasets", "runs", "judges", "review"} <= registered
    names = {name for _, name in MODELS}
    assert {"task", "dataset", "item", "endpoint", "prompttemplate", "run", "response"} <= names
    assert {"attemptlog", "judge", "judgeround", "score", "reviewlock"} <= names


@pytest.mark.django_db
@pytest.mark.parametrize(("app_label", "model_name"), MODELS)
def test_admin_can_open_every_changelist(admin_client, app_label, model_name):
    url = reverse(f"admin:{app_label}_{model_name}_changelist")
    assert admin_client.get(url).status_code == 200


@pytest.mark.django_db
def test_reviewer_cannot_use_the_admin(reviewer_client):
    response = reviewer_client.get(reverse("admin:runs_endpoint_changelist"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.django_db
def test_endpoint_secret_never_appears_in_the_admin(admin_client):
    endpoint = Endpoint.objects.create(
        name="prod", model="gpt-4o", api_key_secret="sk-live-SECRET-0123456789"
    )
    for url in (
        reverse("admin:runs_endpoint_changelist"),
        reverse("admin:runs_endpoint_change", args=[endpoint.pk]),
    ):
        page = admin_client.get(url).content.decode()
        assert "sk-live-SECRET" not in page
        assert "0123456789" not in page
    # Saving the form from the admin keeps the stored key (it is not a field there).
    form_page = admin_client.get(reverse("admin:runs_endpoint_change", args=[endpoint.pk]))
    assert "api_key_secret" not in form_page.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.api_key_secret == "sk-live-SECRET-0123456789"
