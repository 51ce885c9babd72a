"""Projects (#32.2) done-when: a member of project A reads and changes nothing of project B,
for every page and every /api/v1/ call, as a viewer and as a reviewer there. Every URL pattern
is filled with the ids of B's objects (guessed, not found through links: the same walk as
tests/accounts/test_access.py), the list pages and start forms are asked for B's task by
name, and B's rows are compared before and after."""

import json
import re
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import resolve

from apps.accounts import scope
from apps.accounts.models import ApiToken, Project
from apps.review.models import Adjudication
from apps.runs.models import PromptTemplate
from tests.accounts.test_access import ALL_URLS, API_BROWSER_PAGES, API_METHODS, _shape
from tests.base import make_user
from tests.factories import (
    add_scores,
    make_draft,
    make_generation_run,
    make_generator,
    make_judge,
    make_judge_run,
    make_qa_dataset,
    make_task,
)

SECRET = "zebra-secret"  # in B's names and texts: never on a page an A member gets
# Pages of the instance admin (their own checks), the user's own account, public pages.
SKIPPED = ("admin:", "django_rq:", "accounts:", "health-", "favicon", "help", "home")
SKIPPED_NAMES = {"api:no-such-call", *API_BROWSER_PAGES, "api:openapi-json"}
# Apps whose rows are B's (or anyone's) data: compared before and after the walk.
DATA_APPS = (
    "accounts",
    "datasets",
    "runs",
    "judges",
    "review",
    "leaderboards",
    "drafting",
    "configs",
    "notifications",
)
# The system page's worker round trip (the instance's), and the walkers' own sign-ins and tokens.
NOT_A_PROJECTS = {"runs.WorkerCheck", "accounts.User", "accounts.ApiToken"}


def _project_b() -> tuple[Project, dict[str, Any]]:
    project = Project.objects.create(slug="b", name="B")
    # The slug is what a guess would name (and a 404 may repeat); the name is B's own.
    task = make_task("task-b")
    task.project, task.name = project, f"{SECRET} task"
    task.save()
    dataset = make_qa_dataset(task, 3, name=f"{SECRET}-set")
    generation = make_generation_run(dataset, {0: f"{SECRET} answer"}, label=f"{SECRET}-model")
    other = make_generation_run(dataset, {0: "4"}, label=f"{SECRET}-other")
    judge = make_judge(task, name=f"{SECRET}-judge", user_prompt="Rate {answer}")
    judged = make_judge_run(dataset, judge, source_run=generation, label=f"{SECRET}-judged")
    scores = add_scores(judged, {"q0": {"accuracy": 4}})
    template = PromptTemplate.objects.create(
        task=task, name=f"{SECRET}-prompt", user_message="Q: {{ question }}"
    )
    generator = make_generator(task, name=f"{SECRET}-gen")
    draft = make_draft(generator, [[(f"{SECRET} question?", "yes")]])
    objects = {
        "accounts.Project": project.slug,
        "datasets.Task": task.slug,
        "datasets.Dataset": dataset.pk,
        "datasets.Item": dataset.items.first().pk,  # type: ignore[union-attr]
        "runs.Run": judged.pk,
        "runs.PromptTemplate": template.pk,
        "judges.Judge": judge.pk,
        "judges.Score": scores[0].pk,
        "review.Adjudication": Adjudication.objects.create(score=scores[0], spread=2).pk,
        "drafting.Generator": generator.pk,
        "drafting.DraftItem": draft.draft_items.first().pk,  # type: ignore[union-attr]
    }
    # Routes naming a draft take the draft dataset; pairs of runs take the generation runs.
    extra = {"draft": draft.pk, "a": generation.pk, "b": other.pk}
    return project, {**objects, **extra}


def _snapshot() -> dict[str, list[tuple]]:
    rows = {}
    for model in apps.get_models():
        if model._meta.app_label in DATA_APPS and model._meta.label not in NOT_A_PROJECTS:
            rows[model._meta.label] = sorted(map(tuple, model.objects.values_list()), key=str)
    return rows


def _fill(name: str, route: str, b: dict[str, Any]) -> tuple[str, bool]:
    """The route's URL with B's objects for its parameters; whether any parameter names one."""
    namespace, _, url_name = name.rpartition(":")
    scoped = False

    def value(match: re.Match) -> str:
        nonlocal scoped
        converter, param = match.group(1), match.group(2) or match.group(3)
        owner = scope.owner_of(namespace, url_name, param)
        if owner is None:
            return {"fmt": "csv", "position": "0"}.get(param, "1" if converter == "int" else "x")
        scoped = True
        if owner[0] == "datasets.Dataset" and "draft" in url_name:
            return str(b["draft"])
        if param in ("a", "b"):
            return str(b[param])
        return str(b[owner[0]])

    url = "/" + re.sub(r"<(?:(\w+):)?(\w+)>|\{(\w+)\}", value, route)
    return url, scoped


def _query(b: dict[str, Any]) -> dict[str, str]:
    """What start forms and list pages take to name a task, dataset or run (a guessed one)."""
    run, task, dataset = b["runs.Run"], b["datasets.Task"], b["datasets.Dataset"]
    return {"task": task, "dataset": str(dataset), "responses": f"run:{run}", "run": str(run)}


@pytest.mark.django_db
def test_a_member_of_project_a_reads_and_changes_nothing_of_project_b(client: Client):
    project_a = Project.objects.create(slug="a", name="A")
    task_a = make_task("task-a")
    task_a.project = project_a
    task_a.save()
    make_qa_dataset(task_a, 2, name="a-set")
    project_b, b = _project_b()
    members = [make_user(role, f"a-{role}", project=project_a) for role in ("viewer", "reviewer")]
    # One signed-in browser and one API token per member, for the whole walk.
    clients = {user.pk: Client() for user in members}
    tokens = {user.pk: ApiToken.issue(user, "walk")[1] for user in members}
    for user in members:
        clients[user.pk].force_login(user)
    admin = make_user("admin", "root")
    before = _snapshot()
    query = _query(b)
    body = {**query, "project": str(project_b.pk), "judge": str(b["judges.Judge"])}
    walked = scoped_routes = 0

    for name, route in ALL_URLS:
        if name.startswith(SKIPPED) or name in SKIPPED_NAMES:
            continue
        url, scoped = _fill(name, route, b)
        match = resolve(url)
        if scoped:
            scoped_routes += 1
            # The ids are real: every object the URL names is B's.
            assert set(scope.project_ids(match)) == {project_b.pk}, url
        api = name.startswith("api:")
        methods = API_METHODS[_shape(route)] if api else ["GET", "POST"]
        for user in members:
            browser = clients[user.pk]
            headers = {"Authorization": f"Bearer {tokens[user.pk]}"} if api else {}
            for method in methods:
                if method in ("GET", "DELETE"):
                    response = browser.generic(
                        method,
                        url,
                        headers=headers,
                        QUERY_STRING="&".join(f"{k}={v}" for k, v in query.items()),
                    )
                elif api:
                    response = browser.generic(
                        method,
                        url,
                        data=json.dumps(body),
                        content_type="application/json",
                        headers=headers,
                    )
                else:
                    response = browser.post(url, body)
                walked += 1
                seen = response.content.decode(errors="replace") + response.get("Location", "")
                assert SECRET not in seen, (user.username, method, url, response.status_code)
                if scoped:
                    assert response.status_code in (403, 404, 405), (
                        user.username,
                        method,
                        url,
                        response.status_code,
                    )
                if scoped and method == "GET" and response.status_code != 405:
                    # Hidden as a missing object is: never "you may not", which tells it exists.
                    assert response.status_code == 404, (user.username, url)
    assert _snapshot() == before
    assert scoped_routes > 80 and walked > 400

    # The instance admin reaches B's things (what the walk refused exists and is served).
    client.force_login(admin)
    assert client.get(f"/tasks/{b['datasets.Task']}/").status_code == 200
    assert client.get(f"/runs/{b['runs.Run']}/").status_code == 200


def test_every_route_parameter_says_where_its_project_is():
    """A route added later with a new parameter is refused to everyone but admins until its
    app declares where that parameter finds its project: this names it."""
    undeclared = []
    for name, route in ALL_URLS:
        namespace, _, url_name = name.rpartition(":")
        if namespace in scope.ADMIN_ONLY or name == "api:no-such-call":
            continue
        for param in re.findall(r"<(?:\w+:)?(\w+)>|\{(\w+)\}", route):
            try:
                scope.owner_of(namespace, url_name, param[0] or param[1])
            except KeyError as error:
                undeclared.append(str(error))
    assert not undeclared, (
        "Declare these with owners(...) in the app's urls.py (apps/accounts/scope.py): "
        + "; ".join(undeclared)
    )
