"""The API sets a task up (#30.3): endpoints (keys write-only), prompt templates, judges and
generators (create, list, new version; role-checked), the review of generated drafts, and the
release gate (#30.4)."""

import pytest

from apps.datasets.models import Dataset
from apps.drafting.models import DraftItem
from apps.judges.models import Judge
from apps.runs.models import Endpoint, PromptTemplate
from tests import factories as f

pytestmark = pytest.mark.django_db

KEY = "sk-live-5e1f-secret"


def test_endpoints_are_admins_and_their_key_is_never_answered(token_client) -> None:
    admin, reviewer = token_client("admin"), token_client("reviewer")
    body = {"name": "local", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": KEY}
    refused = reviewer.post("/endpoints/", body)
    assert (refused.status_code, refused.json()["detail"]) == (403, "This needs the admin role.")
    created = admin.post("/endpoints/", body)
    assert created.status_code == 201, created.content
    assert created.json()["action"] == "create"
    assert created.json()["endpoint"] == {
        "name": "local",
        "config": {"name": "local", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "has_key": True,
    }
    assert Endpoint.objects.get(name="local").api_key_secret == KEY
    listed = admin.get("/endpoints/")
    assert [e["name"] for e in listed.json()] == ["local"]
    changed = admin.post("/endpoints/local/", {"temperature": 0.5})
    assert (changed.status_code, changed.json()["changed"]) == (200, "temperature")
    endpoint = Endpoint.objects.get(name="local")
    assert (endpoint.temperature, endpoint.model, endpoint.api_key_secret) == (0.5, "m", KEY)
    for response in (created, listed, changed):
        assert KEY not in response.content.decode()
    again = admin.post("/endpoints/", body)
    assert again.status_code == 409
    bad = admin.post("/endpoints/local/", {"concurrency_limit": 0, "colour": "blue"})
    assert bad.status_code == 400
    assert "colour: unknown field" in bad.json()["detail"]


def test_templates_are_created_listed_and_versioned_by_reviewers(token_client) -> None:
    task = f.make_task("qa")
    reviewer, viewer = token_client("reviewer"), token_client("viewer")
    body = {"name": "ask", "system_message": "Be brief.", "user_message": "Q: {{ question }}"}
    assert viewer.post("/tasks/qa/templates/", body).status_code == 403
    created = reviewer.post("/tasks/qa/templates/", body)
    assert created.status_code == 201, created.content
    v1 = created.json()["version"]
    assert (v1["name"], v1["version"], v1["config"]) == ("ask", 1, body)
    assert reviewer.post("/tasks/qa/templates/", body).status_code == 409
    # A new version takes the fields given over the newest version's.
    newer = reviewer.post(
        f"/templates/{v1['id']}/versions/", {"user_message": "Question: {{ question }}"}
    )
    assert newer.status_code == 201
    assert (newer.json()["action"], newer.json()["changed"]) == ("new version", "user_message")
    assert newer.json()["version"]["config"]["system_message"] == "Be brief."
    same = reviewer.post(f"/templates/{v1['id']}/versions/", {})
    assert (same.status_code, same.json()["action"]) == (200, "unchanged")
    assert PromptTemplate.objects.get(task=task, version=1).user_message == "Q: {{ question }}"
    latest = viewer.get("/tasks/qa/templates/").json()
    assert [(t["name"], t["version"]) for t in latest] == [("ask", 2)]
    every = viewer.get("/tasks/qa/templates/", {"all_versions": "true"}).json()
    assert [t["version"] for t in every] == [2, 1]
    broken = reviewer.post("/tasks/qa/templates/", {"name": "bad", "user_message": "{% if %}"})
    assert broken.status_code == 400 and broken.json()["detail"].startswith("bad: ")


def test_judges_and_generators_through_the_same_checks(token_client) -> None:
    task = f.make_task("qa")
    reviewer, admin = token_client("reviewer"), token_client("admin")
    judge = {"name": "rubric", "kind": "rubric", "subjects": ["accuracy 1 5"]}
    created = reviewer.post("/tasks/qa/judges/", judge)
    assert created.status_code == 201, created.content
    pk = created.json()["version"]["id"]
    newer = reviewer.post(f"/judges/{pk}/versions/", {"subjects": ["accuracy 1 10"]})
    assert newer.json()["version"]["config"]["subjects"] == ["accuracy 1 10"]
    assert Judge.objects.get(task=task, version=1).subjects[0]["max"] == 5
    no_range = reviewer.post(
        "/tasks/qa/judges/", {"name": "r2", "kind": "rubric", "subjects": ["tone"]}
    )
    assert no_range.status_code == 400 and "needs a range" in no_range.json()["detail"]
    generator = {
        "name": "facts",
        "content_prompt": "Ten facts.",
        "questions_prompt": "Questions about {{ content }}",
        "answers_prompt": "Answers to {{ questions }}",
    }
    assert reviewer.post("/tasks/qa/generators/", generator).status_code == 403
    assert admin.post("/tasks/qa/generators/", generator).status_code == 201
    assert [g["name"] for g in reviewer.get("/tasks/qa/generators/").json()] == ["facts"]


def test_a_draft_is_reviewed_and_published_through_the_api(token_client) -> None:
    task = f.make_task("qa")
    generator = f.make_generator(task)
    dataset = f.make_draft(generator, [[("Q1?", "A1"), ("Q2?", "A2")], [("Q3?", "A3")]])
    reviewer, viewer = token_client("reviewer"), token_client("viewer")
    draft = viewer.get(f"/drafts/{dataset.pk}/").json()
    assert draft["counts"]["pending"] == 3
    first, second, third = (item["id"] for item in draft["items"])
    assert viewer.post(f"/drafts/items/{first}/", {"decision": "approved"}).status_code == 403
    assert (
        reviewer.post(f"/drafts/items/{first}/", {"decision": "approved"}).json()["decision"]
        == "approved"
    )
    edited = reviewer.post(f"/drafts/items/{second}/", {"decision": "approved", "reference": "A2!"})
    assert (edited.json()["decision"], edited.json()["reference"]) == ("edited", "A2!")
    assert reviewer.post(f"/drafts/items/{third}/", {"decision": "maybe"}).status_code == 400
    early = reviewer.post(f"/drafts/{dataset.pk}/publish/")
    assert early.status_code == 409
    reviewer.post(f"/drafts/items/{third}/", {"decision": "rejected"})
    published = reviewer.post(f"/drafts/{dataset.pk}/publish/")
    assert published.status_code == 200, published.content
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY and dataset.row_count == 2
    assert DraftItem.objects.get(pk=third).decision == "rejected"


def test_the_gate_answers_the_verdict_or_that_it_waits(token_client, llm_server) -> None:
    task = f.make_task("gate")
    dataset = f.make_items(task, 30)
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    endpoint = Endpoint.objects.create(name="loop", base_url=llm_server.base_url, model="m")
    f.set_judging(task, default_judge=judge, default_judge_endpoint=endpoint)
    for label, value in (("model-a", 4), ("model-b", 2)):
        run = f.make_judge_run(dataset, judge, label=label)
        f.add_scores(run, {f"k{i}": {"accuracy": value if i % 2 else 4} for i in range(30)})
    reviewer = token_client("reviewer")
    body = {"task": "gate", "baseline": "model-a", "candidate": "model-b", "margin": 0.25}
    done = reviewer.post("/gate/", body)
    assert done.status_code == 200, done.content
    answer = done.json()
    assert (answer["status"], answer["exit_code"], answer["verdict"]) == ("done", 1, "regressed")
    (accuracy,) = answer["subjects"]
    assert accuracy["regressed_items"] == [f"k{i}" for i in range(1, 30, 2)]
    assert answer["markdown"].startswith("## evalsite gate: regressed (exit 1)")
    assert answer["junit"].startswith('<?xml version="1.0" encoding="utf-8"?>\n<testsuites>')
    # A run of answers not judged yet: its judge run is started and the call says it waits.
    answers = f.make_generation_run(f.make_qa_dataset(task, 2), {0: "0", 1: "2"}, label="model-c")
    waiting = reviewer.post("/gate/", {**body, "candidate": str(answers.pk)})
    assert waiting.status_code == 202, waiting.content
    assert waiting.json()["status"] == "waiting"
    assert waiting.json()["waiting_for"][0].startswith("judge run #")
    assert token_client("viewer").post("/gate/", body).status_code == 403
