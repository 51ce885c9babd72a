"""API tokens: made on the account page and shown once, stored as a hash, revoked there; a
token carries its user's role as it is now; the browser's session works too, with CSRF."""

import hashlib
import json
import logging

import pytest
from django.core import serializers
from django.test import Client
from django.urls import reverse

from apps.accounts.models import ApiToken, Project
from apps.api.auth import BAD_TOKEN, NO_CREDENTIALS
from tests.base import make_user
from tests.factories import make_task

pytestmark = pytest.mark.django_db


def api_get(raw: str, path: str = "/api/v1/tasks/"):
    return Client().get(path, headers={"Authorization": f"Bearer {raw}"})


def create_on_page(client: Client, name: str) -> str:
    response = client.post(reverse("accounts:api-tokens"), {"name": name})
    assert response.status_code == 201
    return response.context["new_token"]


def test_a_token_is_shown_once_and_only_its_hash_is_stored(client):
    user = make_user("reviewer")
    client.force_login(user)
    response = client.post(reverse("accounts:api-tokens"), {"name": "nightly eval"})
    raw = response.context["new_token"]
    assert raw.startswith("evs_") and len(raw) > 40
    assert raw in response.content.decode()
    assert response["Cache-Control"].startswith("max-age=0")  # never_cache: not kept by a proxy
    token = ApiToken.objects.get()
    assert (token.user, token.name, token.prefix) == (user, "nightly eval", raw[:10])
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    # Not anywhere in the row, and never again on the page (only its prefix).
    stored = serializers.serialize("json", ApiToken.objects.all())
    assert raw not in stored and raw[10:20] not in stored
    page = client.get(reverse("accounts:api-tokens")).content.decode()
    assert raw not in page
    assert f"{token.prefix}…" in page and "nightly eval" in page and "never" in page


def test_the_token_opens_the_api_and_records_its_last_use(client):
    user = make_user("viewer")
    client.force_login(user)
    raw = create_on_page(client, "reader")  # viewers make (read-only) tokens too
    token = ApiToken.objects.get()
    assert token.last_used_at is None
    response = api_get(raw)
    assert response.status_code == 200 and response.json() == []
    token.refresh_from_db()
    assert token.last_used_at is not None
    assert (
        str(token.last_used_at.year) in client.get(reverse("accounts:api-tokens")).content.decode()
    )


def test_a_revoked_token_is_refused(client):
    user = make_user("reviewer")
    client.force_login(user)
    raw = create_on_page(client, "old script")
    token = ApiToken.objects.get()
    assert api_get(raw).status_code == 200
    response = client.post(reverse("accounts:api-token-revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    refused = api_get(raw)
    assert (refused.status_code, refused.json()) == (401, {"detail": BAD_TOKEN})
    assert refused["WWW-Authenticate"].startswith("Bearer")
    page = client.get(reverse("accounts:api-tokens")).content.decode()
    assert 'id="revoked-table"' in page and "No tokens yet." in page


def test_nobody_revokes_another_users_token(client):
    owner, other = make_user("viewer"), make_user("admin")
    token, raw = ApiToken.issue(owner, "mine")
    client.force_login(other)
    assert client.post(reverse("accounts:api-token-revoke", args=[token.pk])).status_code == 404
    assert api_get(raw).status_code == 200


def test_a_deactivated_users_token_is_refused():
    user = make_user("admin")
    _, raw = ApiToken.issue(user, "x")
    user.is_active = False
    user.save()
    response = api_get(raw)
    assert (response.status_code, response.json()) == (401, {"detail": BAD_TOKEN})


def test_the_token_follows_its_users_role():
    make_task("demo")
    user = make_user("viewer")
    _, raw = ApiToken.issue(user, "x")
    headers = {"Authorization": f"Bearer {raw}"}
    start = {"task": "demo", "dataset": 999, "endpoint": 1, "template": 1}

    def post():
        return Client().post(
            "/api/v1/runs/generation/", start, content_type="application/json", headers=headers
        )

    assert post().json() == {"detail": "Viewers cannot change anything."}
    user.role = "reviewer"
    user.save()
    # A role in a project is the membership's, up to the user's own.
    assert post().json() == {"detail": "This needs the reviewer role in demo's project."}
    Project.default().add_member(user, "reviewer")
    response = post()  # now past the role check, into the start form's own checks
    assert response.status_code == 400
    assert "dataset" in response.json()["errors"]


@pytest.mark.parametrize(
    ("header", "detail"),
    [
        (None, NO_CREDENTIALS),
        ("Bearer evs_not-a-real-token", BAD_TOKEN),
        ("Bearer ", BAD_TOKEN),
        ("Token evs_abc", NO_CREDENTIALS),
        ("Basic YWRtaW46ZGVtbw==", NO_CREDENTIALS),
    ],
)
def test_calls_without_a_valid_token_get_401_in_json(header, detail, caplog):
    make_user("admin")
    headers = {"Authorization": header} if header else {}
    with caplog.at_level(logging.DEBUG):
        response = Client().get("/api/v1/tasks/", headers=headers)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": detail}
    # A token sent with the wrong scheme is not written to the log.
    assert "evs_abc" not in caplog.text


def test_a_signed_in_browser_may_call_the_api_with_its_csrf_token():
    make_task("demo")
    user = make_user("reviewer")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    assert [t["slug"] for t in browser.get("/api/v1/tasks/").json()] == ["demo"]
    start = json.dumps({"task": "demo", "dataset": 999, "endpoint": 1, "template": 1})
    refused = browser.post("/api/v1/runs/generation/", start, content_type="application/json")
    assert (refused.status_code, refused.json()) == (403, {"detail": "CSRF check Failed"})
    browser.get(reverse("accounts:api-tokens"))  # a page sets the CSRF cookie
    csrf = browser.cookies["csrftoken"].value
    response = browser.post(
        "/api/v1/runs/generation/",
        start,
        content_type="application/json",
        headers={"X-CSRFToken": csrf},
    )
    assert response.status_code == 400 and "dataset" in response.json()["errors"]


def test_the_schema_and_docs_need_a_token_or_a_login():
    user = make_user("viewer")
    _, raw = ApiToken.issue(user, "x")
    anonymous = Client().get("/api/v1/openapi.json")
    assert (anonymous.status_code, anonymous.json()) == (401, {"detail": NO_CREDENTIALS})
    assert api_get("evs_wrong", "/api/v1/openapi.json").status_code == 401
    schema = api_get(raw, "/api/v1/openapi.json").json()
    assert "/api/v1/tasks/{slug}/datasets/" in schema["paths"]
    assert schema["components"]["securitySchemes"]["TokenAuth"]["scheme"] == "bearer"
    docs = Client().get("/api/v1/docs")
    assert docs.status_code == 302 and docs["Location"].startswith(reverse("accounts:login"))
    browser = Client()
    browser.force_login(user)
    assert browser.get("/api/v1/")["Location"] == "/api/v1/docs"
    page = browser.get("/api/v1/docs").content.decode()
    # Swagger UI from our own static files: the CSP allows no other origin, and there is no CDN.
    assert "/static/ninja/swagger-ui-bundle.js" in page and "cdn" not in page.lower()


def test_admins_see_and_revoke_anyones_tokens_in_the_admin_never_the_hash(client):
    owner = make_user("reviewer")
    token, raw = ApiToken.issue(owner, "ci")
    client.force_login(make_user("admin"))
    listing = client.get("/admin/accounts/apitoken/").content.decode()
    assert "ci" in listing and token.prefix in listing
    detail = client.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    assert token.digest not in detail and token.digest not in listing
    assert client.get("/admin/accounts/apitoken/add/").status_code == 403
    client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert api_get(raw).status_code == 401


def test_a_path_without_a_call_answers_404_in_json():
    user = make_user("viewer")
    _, raw = ApiToken.issue(user, "x")
    assert api_get(raw, "/api/v1/nothing/").json() == {
        "detail": "There is no API call at /api/v1/nothing/; see /api/v1/docs."
    }
    assert api_get(raw, "/api/v1/tasks").json() == {
        "detail": "There is no API call at /api/v1/tasks: the address ends with a slash, "
        "/api/v1/tasks/."
    }
