"""Which project the objects a URL names belong to, so that a member of one project reaches
nothing of another's (#32.2), whatever a view forgets to check.

Each app's URL module says, for each of its routes' parameters, where the project of the object
it names is found (`owners`): a model and the lookup from it to the project's id. A request of
a user who is not an instance admin then passes only if every object its URL names is in a
project where they are a member (with the reviewer role for a change): else it is answered as
if the object did not exist (404), so that guessed ids tell nothing. A parameter no app has
declared is refused the same way (fail closed); tests/accounts/test_projects_walk.py checks that
every route's parameters are declared.
"""

from typing import Any

from django.apps import apps
from django.urls import ResolverMatch

from apps.accounts.models import User

SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}
# (model label, lookup of the project's id from it), or None: the parameter names nothing of
# a project (a page of the help, a file format, an instance-wide endpoint).
Owner = tuple[str, str] | None

# "namespace:*" → {param: owner} for every route of a namespace; "namespace:name" → its own.
_OWNERS: dict[str, dict[str, Owner]] = {}
# Namespaces whose pages are an instance admin's only (checked by their own views).
ADMIN_ONLY = {"admin", "django_rq"}


class Hidden(Exception):
    """The URL names something of a project the user is not a member of: `param` (its
    `value`, an object of model `label`), to be answered as a missing object would be."""

    def __init__(self, message: str, param: str = "", value: Any = None, label: str = "") -> None:
        super().__init__(message)
        self.param, self.value, self.label = param, value, label


class ReadOnly(Exception):
    """The user is a member, but not with the role a change needs."""


def owners(
    namespace: str, params: dict[str, Owner], per_route: dict[str, dict[str, Owner]] | None = None
) -> None:
    """Declare where a namespace's URL parameters find their project: `params` for all its
    routes, `per_route` (route name → params) where a route's differ."""
    _OWNERS.setdefault(f"{namespace}:*", {}).update(params)
    for name, route_params in (per_route or {}).items():
        _OWNERS.setdefault(f"{namespace}:{name}", {}).update(route_params)


def owner_of(namespace: str, url_name: str | None, param: str) -> Owner:
    """Where `param` of a route finds its project; KeyError if nobody declared it."""
    for key in (f"{namespace}:{url_name}", f"{namespace}:*"):
        if param in _OWNERS.get(key, {}):
            return _OWNERS[key][param]
    raise KeyError(f"{namespace}:{url_name}: URL parameter {param!r} has no declared owner.")


def project_ids(match: ResolverMatch) -> dict[int | None, tuple[str, Any, str]]:
    """{project id: (param, value, model label)} of the objects the URL names (None for one
    that does not exist: its view answers 404 itself)."""
    found: dict[int | None, tuple[str, Any, str]] = {}
    # Only what the URL carries: a route's own fixed arguments (path(..., {"kind": "script"}))
    # name nothing of a project.
    for param, value in match.captured_kwargs.items():  # type: ignore[attr-defined]  # not in django-stubs
        try:
            owner = owner_of(match.namespace, match.url_name, param)
        except KeyError as error:
            raise Hidden(str(error)) from None
        if owner is None:
            continue
        label, lookup = owner
        model = apps.get_model(label)
        field = "slug" if param.endswith("slug") else "pk"
        try:
            rows = model._default_manager.filter(**{field: value}).values_list(lookup, flat=True)
            found[rows.first()] = (param, value, label)
        except (ValueError, TypeError):
            continue  # not an id at all: the view answers 404
    return found


def check(match: ResolverMatch | None, user: Any, method: str | None) -> None:
    """Raise Hidden or ReadOnly unless `user` may reach what the URL names with `method`."""
    if match is None or not getattr(user, "is_authenticated", False):
        return
    if user.is_admin or match.namespace in ADMIN_ONLY:
        return
    role = User.Role.VIEWER if method in SAFE_METHODS else User.Role.REVIEWER
    for project_id, named in project_ids(match).items():
        if project_id is None:
            continue
        held = user.role_in(project_id)
        if held is None:
            raise Hidden("Not a member of this project.", *named)
        if User.RANK[held] < User.RANK[role]:
            raise ReadOnly(f"This needs the {role} role in this project.")
