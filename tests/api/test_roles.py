"""Every API call for every role, with a token: viewers read everything the pages show them and
change nothing; reviewers and admins may upload and start runs (as on the pages)."""

import re

import pytest

from apps.api.api import api
from tests.factories import make_task

pytestmark = pytest.mark.django_db

OPERATIONS = sorted(
    (method.upper(), re.sub(r"\{[^}]+\}", lambda m: "demo" if m[0] == "{slug}" else "1", path))
    for path, operations in api.get_openapi_schema(path_prefix="/api/v1")["paths"].items()
    for method in operations
)
ROLES = ("admin", "reviewer", "viewer")
# Changes only admins make, as on the pages: endpoints and dataset generators.
ADMIN_ONLY = {
    "/api/v1/endpoints/",
    "/api/v1/endpoints/1/",
    "/api/v1/tasks/demo/generators/",
    "/api/v1/generators/1/versions/",
}


def test_the_matrix_covers_reads_and_writes():
    methods = [method for method, _ in OPERATIONS]
    assert methods.count("GET") >= 8 and methods.count("POST") >= 4


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_role_matrix(token_client, role, method, path):
    make_task("demo")
    caller = token_client(role)
    response = (
        caller.get(path[len("/api/v1") :])
        if method == "GET"
        else caller.post(path[len("/api/v1") :])
    )
    assert response["Content-Type"].startswith("application/json"), response.content
    if method == "GET":
        # Viewers read what the pages show them: found or not, never refused.
        assert response.status_code in (200, 404), (role, path, response.content)
    elif role == "viewer":
        assert (response.status_code, response.json()) == (
            403,
            {"detail": "Viewers cannot change anything."},
        )
    elif role == "reviewer" and path in ADMIN_ONLY:
        assert (response.status_code, response.json()) == (
            403,
            {"detail": "This needs the admin role."},
        )
    else:
        # Past the role checks, into the call's own: what is missing is named.
        assert response.status_code in (400, 404, 422), (role, path, response.content)
        assert response.json()["detail"]
