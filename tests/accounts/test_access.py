"""Every URL pattern, now and later: anonymous users go to login (API calls: 401), viewers never
change anything."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from apps.accounts.models import User
from apps.api.api import api
from apps.api.auth import NO_CREDENTIALS
from tests.base import make_user

# Pages an anonymous user must be able to reach: the login pages themselves.
ANONYMOUS_OK = {"accounts:login"}
# Single sign-on's start and callback (tests/accounts/test_sso.py): reached before login, and
# not there (404) while no identity provider is set up, as here.
SSO_PAGES = {"accounts:sso-start", "accounts:sso-callback"}
# A load balancer's health checks: a word per check, nothing else (tests/harness/test_health.py).
HEALTH_CHECKS = {"health-live", "health-ready"}
# Public redirects to a static file, and where they go (nothing behind them is private).
PUBLIC_REDIRECTS = {"favicon": "/static/favicon.svg"}
# POSTs that change nothing shared, so viewers may send them (how one reads model output too).
VIEWER_MAY_POST = {
    "accounts:logout",
    "accounts:api-tokens",
    "accounts:api-token-revoke",
    "accounts:password-change",
    "accounts:text-view",
}

SAMPLE = {
    "int": "1",
    "slug": "demo",
    "str": "x",
    "path": "x/y",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def _walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern):
            yield f"{namespace}{entry.name or ''}", prefix + str(entry.pattern)


def _concrete(route: str) -> str:
    """Turn a route into a URL by filling every parameter with a sample value."""
    # Regex routes (admin, django-rq): fill named groups, drop anchors and optional marks.
    route = route.replace("^", "").replace("$", "").replace("\\Z", "")
    route = re.sub(r"\(\?P<\w+>(?:\[[^\]]*\]|[^()])*\)\??", "1", route)
    route = re.sub(r"\(((?:\w+\|?)+)\)", lambda m: m.group(1).split("|")[0], route)
    route = re.sub(r"[()?+*\\]", "", route)
    route = re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: SAMPLE.get(m.group(1) or "str", "x"), route)
    return "/" + route


ALL_URLS = sorted(set(_walk(get_resolver().url_patterns)))


def _shape(route: str) -> str:
    return re.sub(r"<[^>]+>|\{[^}]+\}", "X", "/" + route.lstrip("/"))


# The API's calls (/api/v1/) answer 401 in JSON, never a login redirect, to each method they
# take; its docs page and root are browser pages like the others.
API_METHODS = {
    _shape(path): sorted(method.upper() for method in operations)
    for path, operations in api.get_openapi_schema(path_prefix="/api/v1/")["paths"].items()
}
API_METHODS[_shape("api/v1/openapi.json")] = ["GET"]
API_BROWSER_PAGES = {"api:openapi-view", "api:api-root", "api:index"}
# Any other path under /api/v1/: 404 in JSON to everyone, whatever the method.
API_NO_SUCH_CALL = "api:no-such-call"


def _api_methods(name: str, route: str) -> list[str] | None:
    if not name.startswith("api:") or name in API_BROWSER_PAGES | {API_NO_SUCH_CALL}:
        return None
    return API_METHODS[_shape(route)]


def test_the_walk_sees_the_apps_urls():
    names = {name for name, _ in ALL_URLS}
    assert {"datasets:task-list", "runs:list", "review:index", "leaderboards:index"} <= names
    assert len(ALL_URLS) > 20
    # Every call of the API is walked: each path of its schema is a URL here.
    api_routes = {_shape(route) for name, route in ALL_URLS if _api_methods(name, route)}
    assert api_routes == set(API_METHODS)
    assert {"POST", "GET"} <= {m for methods in API_METHODS.values() for m in methods}


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "route"), ALL_URLS, ids=[f"{n}|{r}" for n, r in ALL_URLS])
def test_anonymous_is_sent_to_login(client, name, route):
    url = _concrete(route)
    if name == API_NO_SUCH_CALL:
        response = client.get("/api/v1/nothing/here/")
        assert (response.status_code, response.json()) == (
            404,
            {"detail": "There is no API call at /api/v1/nothing/here/; see /api/v1/docs."},
        )
        return
    if (methods := _api_methods(name, route)) is not None:
        for method in methods:
            response = client.generic(method, url)
            assert (response.status_code, response.json()) == (401, {"detail": NO_CREDENTIALS})
        return
    response = client.get(url)
    if name in ANONYMOUS_OK:
        assert response.status_code == 200, url
        return
    if name in PUBLIC_REDIRECTS:
        assert (response.status_code, response["Location"]) == (301, PUBLIC_REDIRECTS[name])
        return
    if name in SSO_PAGES:
        assert response.status_code == 404, url
        return
    if name in HEALTH_CHECKS:
        assert response.status_code in (200, 503), url
        assert set(response.json()) <= {"status", "database", "redis", "worker"}
        return
    assert response.status_code == 302, (
        f"{url} answered {response.status_code} to an anonymous user"
    )
    # The Django admin's pages go by its login URL, which sends them on to the app's login
    # (tests/accounts/test_admin.py).
    logins = (reverse("accounts:login"), reverse("admin:login"))
    assert response["Location"].startswith(logins), (url, response["Location"])


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "route"), ALL_URLS, ids=[f"{n}|{r}" for n, r in ALL_URLS])
def test_viewer_gets_403_on_every_post(viewer_client, name, route):
    if name in VIEWER_MAY_POST:
        return
    url = _concrete(route)
    response = viewer_client.post(url, {"anything": "1"})
    if name == API_NO_SUCH_CALL:
        assert response.status_code == 404
        return
    # The schema is no call: a viewer's POST to it meets the pages' net (ReadOnlyViewerMiddleware).
    methods = None if name == "api:openapi-json" else _api_methods(name, route)
    if methods is not None and "POST" not in methods:
        # An API path that takes no POST says so (405) to everyone, before any role check.
        assert response.status_code == 405, f"viewer POST {url} answered {response.status_code}"
        return
    assert response.status_code == 403, f"viewer POST {url} answered {response.status_code}"
    if methods is not None:
        assert response.json() == {"detail": "Viewers cannot change anything."}


@pytest.mark.django_db
def test_viewer_may_log_out(viewer_client):
    response = viewer_client.post(reverse("accounts:logout"))
    assert response.status_code == 302
    assert viewer_client.get(reverse("datasets:task-list")).status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize(("role", "status"), [("viewer", 403), ("reviewer", 403), ("admin", 200)])
def test_endpoints_page_is_for_admins_only(client, role, status):
    client.force_login(User.objects.create_user(username=role, password="x", role=role))
    assert client.get(reverse("runs:endpoint-list")).status_code == status


@pytest.mark.django_db
def test_reviewer_may_create_a_task_and_viewer_may_not(client):
    reviewer = make_user("reviewer", "r")
    client.force_login(reviewer)
    response = client.post(
        reverse("datasets:task-create"), {"slug": "support-qa", "name": "Support QA"}
    )
    assert response.status_code == 302
    assert client.get(reverse("datasets:task-detail", args=["support-qa"])).status_code == 200


@pytest.mark.django_db
def test_task_slug_is_validated(reviewer_client):
    response = reviewer_client.post(
        reverse("datasets:task-create"), {"slug": "Bad Slug!", "name": "x"}
    )
    assert response.status_code == 200
    assert "lowercase letters" in response.content.decode()


@pytest.mark.django_db
def test_superuser_counts_as_admin():
    user = User.objects.create_superuser(username="root", password="x", role="viewer")
    assert user.is_admin and user.can_edit
    assert not User(role="viewer").can_edit
