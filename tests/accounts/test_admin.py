"""The Django admin covers the domain model, for admins only, and never shows a stored API key."""

import pytest
from django.contrib import admin
from django.urls import reverse

from apps.runs.models import Endpoint
from tests.base import make_user

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


ADMIN_PAGES = [
    "/admin/",
    "/admin/runs/endpoint/",
    "/admin/login/",
    "/django-rq/",
    "/django-rq/queues/0/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["reviewer", "viewer"])
@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_non_admins_get_the_apps_403_page_not_the_admins_login(client, role, path):
    """#11.13: a reviewer on /admin/ got the Django admin's own login form."""
    client.force_login(make_user(role))
    response = client.get(path, follow=True)
    assert response.status_code == 403, (path, response.redirect_chain)
    page = response.content.decode()
    assert "Not allowed" in page and 'id="id_password"' not in page
    assert 'href="/tasks/"' in page  # the app's page, with its navigation


@pytest.mark.django_db
@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_anonymous_visitors_land_on_the_apps_login(client, path):
    response = client.get(path, follow=True)
    final, _status = response.redirect_chain[-1]
    assert final.startswith(reverse("accounts:login") + "?next="), response.redirect_chain
    assert "/admin/login/" not in final


@pytest.mark.django_db
def test_a_staff_flag_alone_does_not_open_the_admin(client):
    """The admin role opens the admin, whatever is_staff says."""
    reviewer = make_user("reviewer")
    reviewer.is_staff = True
    reviewer.save()
    client.force_login(reviewer)
    assert client.get("/admin/runs/endpoint/", follow=True).status_code == 403
    assert client.get("/django-rq/", follow=True).status_code == 403


@pytest.mark.django_db
def test_admins_use_both(admin_client):
    assert admin_client.get("/admin/runs/endpoint/").status_code == 200
    assert admin_client.get("/django-rq/").status_code == 200


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
