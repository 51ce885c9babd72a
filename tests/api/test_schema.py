"""#30.6: the API's schema says what its calls take and give (a generated client can use it),
and each defect found by trying it with generated clients is fixed: the upload's file, typed
boards, the exports' media types, fixed choices as enums, the resume body, a complete run's
resume, a pairwise run's failed items, judges by name, JSON for bodies Django refuses."""

import json
from typing import Any

import pytest
from django.utils import timezone

from apps.api.api import api
from apps.datasets import readers
from apps.judges.models import Comparison, Judge
from apps.leaderboards import boards, exports, pairs, pairwise_board, tables
from apps.runs.models import ErrorKind, LoggingMode, Run
from tests.factories import (
    add_scores,
    make_answers_dataset,
    make_generation_run,
    make_judge,
    make_judge_run,
    make_qa_dataset,
    make_task,
)
from tests.review.test_ab import pairwise_run

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return api.get_openapi_schema()


def operation(schema: dict[str, Any], path: str, method: str = "get") -> dict[str, Any]:
    return schema["paths"][f"/api/v1{path}"][method]


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def enum_of(schema: dict[str, Any], path: str, name: str, method: str = "get") -> list[str]:
    """The enum of a query parameter, or of a JSON body's field."""
    op = operation(schema, path, method)
    for param in op.get("parameters", []):
        if param["name"] == name:
            return resolve(schema, param["schema"])["enum"]
    body = next(iter(op["requestBody"]["content"].values()))["schema"]
    field = resolve(schema, body)["properties"][name]
    field = resolve(schema, field)
    return field["enum"] if "enum" in field else resolve(schema, field["allOf"][0])["enum"]


def test_the_upload_is_a_multipart_file_not_a_query_parameter(schema):
    upload = operation(schema, "/tasks/{slug}/datasets/", "post")
    assert [p["name"] for p in upload["parameters"]] == ["slug"]
    content = upload["requestBody"]["content"]
    assert list(content) == ["multipart/form-data"]
    body = resolve(schema, content["multipart/form-data"]["schema"])
    assert body["properties"]["file"] == {"format": "binary", "title": "File", "type": "string"}
    assert "file" in body["required"]
    assert body["properties"]["input_columns"]["type"] == "array"


def test_every_answer_is_typed(schema):
    """Each success has a schema with its fields (no bare object), the exports their media."""
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            for status, answer in op["responses"].items():
                content = answer.get("content")
                assert content, f"{method} {path} {status} declares no content"
                if path.endswith("/export/") and status == 200:
                    assert set(content) == {
                        "text/csv",
                        "application/x-ndjson",
                        *tables.FORMATS.values(),
                    }
                    continue
                found = resolve(schema, content["application/json"]["schema"])
                if found.get("type") == "array":
                    found = resolve(schema, found["items"])
                assert found.get("properties"), f"{method} {path} {status}: {found}"
    board = resolve(schema, operation(schema, "/leaderboards/{slug}/")["responses"][200])
    board = resolve(schema, board["content"]["application/json"]["schema"])
    row = resolve(schema, board["properties"]["rows"]["items"])
    assert {"rank", "model", "run_id", "overall", "subjects"} <= set(row["properties"])
    stats = resolve(schema, schema["components"]["schemas"]["BoardStats"])
    assert stats["properties"]["n"]["type"] == "integer"


def test_fixed_choices_are_enums_of_what_the_code_accepts(schema):
    def no_blank(values: list[str]) -> list[str]:
        return [v for v in values if v]

    formats = [*exports.FORMATS, *tables.FORMATS]
    assert enum_of(schema, "/runs/{pk}/export/", "format") == formats
    assert enum_of(schema, "/leaderboards/{slug}/export/", "format") == formats
    assert enum_of(schema, "/leaderboards/{slug}/", "values") == list(boards.VALUE_VIEWS)
    assert enum_of(schema, "/leaderboards/{slug}/", "scoring") == list(boards.SCORINGS)
    assert enum_of(schema, "/leaderboards/{slug}/", "correction") == list(pairs.CORRECTIONS)
    assert enum_of(schema, "/leaderboards/{slug}/pairwise/", "source") == list(
        pairwise_board.SOURCES
    )
    assert no_blank(enum_of(schema, "/runs/{pk}/failed/", "kind")) == ErrorKind.values
    assert sorted(enum_of(schema, "/runs/generation/", "logging_mode", "post")) == sorted(
        LoggingMode.values
    )
    assert no_blank(enum_of(schema, "/tasks/{slug}/datasets/", "format", "post")) == list(
        readers.FORMATS
    )
    resume = operation(schema, "/runs/{pk}/resume/", "post")["requestBody"]
    mode = resume["content"]["application/json"]["schema"]["properties"]["mode"]
    assert mode["enum"] == Run.Mode.values


@pytest.fixture
def cancelled_run() -> Run:
    task = make_task("qa")
    dataset = make_qa_dataset(task, 3)
    return make_generation_run(dataset, {0: "two"}, status=Run.Status.CANCELLED)


@pytest.mark.parametrize("sent", ['"overwrite"', "null", "0", "[]", '{"mdoe": "overwrite"}'])
def test_a_resume_body_that_is_no_relaunch_is_refused(token_client, cancelled_run, sent):
    reviewer = token_client("reviewer")
    answer = reviewer.client.post(
        f"/api/v1/runs/{cancelled_run.pk}/resume/",
        sent,
        content_type="application/json",
        headers=reviewer.headers,
    )
    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(("body:", "mdoe:"))
    run = Run.objects.get(pk=cancelled_run.pk)
    assert (run.status, run.launch) == (Run.Status.CANCELLED, 0)  # not relaunched


def test_a_complete_runs_resume_is_refused_and_keeps_its_times(token_client):
    task = make_task("qa")
    dataset = make_qa_dataset(task, 2)
    started = timezone.now() - timezone.timedelta(minutes=5)
    run = make_generation_run(dataset, {0: "a", 1: "b"})
    Run.objects.filter(pk=run.pk).update(
        started_at=started, finished_at=timezone.now(), done=2, total=2
    )
    reviewer = token_client("reviewer")
    before = reviewer.get(f"/runs/{run.pk}/").json()
    assert before["items_per_second"] is not None
    answer = reviewer.post(f"/runs/{run.pk}/resume/")
    assert answer.status_code == 409
    assert answer.json()["detail"] == (
        f"Run #{run.pk} is complete: nothing to resume (mode overwrite runs every item again)."
    )
    retry = reviewer.post(f"/runs/{run.pk}/resume/", {"mode": "retry_failed"})
    assert (retry.status_code, retry.json()["detail"]) == (
        409,
        f"Run #{run.pk} has no failed items to retry.",
    )
    after = reviewer.get(f"/runs/{run.pk}/").json()
    assert after == before  # started_at, speed and status untouched


def test_a_pairwise_runs_failed_items_are_its_failed_comparisons(token_client):
    run, dataset, _, _ = pairwise_run({})
    items = {i.position: i for i in dataset.items.all()}
    # Item 1 failed in its second order only, item 3 in both: 2 failed units.
    failures = {(1, 1): "timeout", (3, 0): "unparseable", (3, 1): "unparseable"}
    for (position, order), kind in failures.items():
        Comparison.objects.filter(run=run, item=items[position], order=order).update(
            status="failed", verdict="", shown="", error_kind=kind, error=f"{kind} here"
        )
    Run.objects.filter(pk=run.pk).update(done=2, failed=2, total=4)
    viewer = token_client("viewer")
    assert viewer.get(f"/runs/{run.pk}/").json()["failed"] == 2
    found = viewer.get(f"/runs/{run.pk}/failed/").json()
    assert (found["count"], found["pages"]) == (2, 1)
    assert [(i["key"], i["error_kind"], i["model_a"], i["model_b"]) for i in found["items"]] == [
        (items[1].key, "timeout", "x", "y"),
        (items[3].key, "unparseable", "x", "y"),
    ]
    assert [r["round"] for r in found["items"][1]["rounds"]] == [0, 1]
    assert found["groups"] == [
        {"kind": "timeout", "label": "Timeout", "count": 1},
        {"kind": "unparseable", "label": "Unparseable reply", "count": 1},
    ]
    only = viewer.get(f"/runs/{run.pk}/failed/", {"kind": "timeout"}).json()
    assert [i["key"] for i in only["items"]] == [items[1].key]


def test_boards_and_judge_runs_take_a_judge_by_name(token_client):
    task = make_task("qa")
    dataset = make_answers_dataset(task, 2)
    strict = make_judge(task, name="strict", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    lenient = make_judge(task, name="lenient", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    generation = make_generation_run(dataset, {0: "a", 1: "b"}, label="m")
    for judge, value in ((strict, 2), (lenient, 5)):
        judged = make_judge_run(dataset, judge, source_run=generation)
        add_scores(judged, {"q0": {"accuracy": value}, "q1": {"accuracy": value}})
    viewer = token_client("viewer")
    for name, mean in (("strict", 2.0), ("lenient", 5.0)):
        board = viewer.get("/leaderboards/qa/", {"judge": name, "values": "judge"}).json()
        assert (board["judge"], board["rows"][0]["subjects"]["accuracy"]["judge"]["mean"]) == (
            name,
            mean,
        )
    by_id = viewer.get("/leaderboards/qa/", {"judge": lenient.pk}).json()
    assert by_id["judge"] == "lenient"
    missing = viewer.get("/leaderboards/qa/", {"judge": "nobody"})
    assert (missing.status_code, missing.json()["detail"]) == (
        404,
        "No judge 'nobody' has judged anything in qa.",
    )
    csv_rows = b"".join(
        viewer.get("/leaderboards/qa/export/", {"judge": "strict"}).streaming_content
    )
    assert b"strict v1" in csv_rows

    exact = make_judge(task, Judge.Kind.METRIC, name="exact")
    reviewer = token_client("reviewer")
    started = reviewer.post("/runs/judge/", {"judge": "exact", "responses": generation.pk})
    assert started.status_code == 201, started.content
    assert started.json()["judge"] == exact.pk
    make_judge(make_task("other"), Judge.Kind.METRIC, name="exact")
    ambiguous = reviewer.post("/runs/judge/", {"judge": "exact", "responses": generation.pk})
    assert (ambiguous.status_code, ambiguous.json()["detail"]) == (
        400,
        "Judges named 'exact' are in tasks other, qa: give its id.",
    )
    # A NUL character, which PostgreSQL cannot hold in text (Schemathesis sent one): no 500.
    nul = reviewer.post("/runs/judge/", {"judge": "ex\x00act", "responses": generation.pk})
    assert (nul.status_code, nul.json()["detail"]) == (404, "There is no judge 'ex\\x00act'.")
    board = viewer.get("/leaderboards/qa/", {"judge": "st\x00rict"})
    assert (board.status_code, board.json()["detail"]) == (
        404,
        "No judge 'st\\x00rict' has judged anything in qa.",
    )


def test_the_pairwise_board_takes_a_judge_by_name(token_client):
    pairwise_run({0: ("A", "B")})
    viewer = token_client("viewer")
    found = viewer.get("/leaderboards/duel/pairwise/", {"judge": "which"}).json()
    assert found["judge"] == Judge.objects.get(name="which").pk
    missing = viewer.get("/leaderboards/duel/pairwise/", {"judge": "nobody"})
    assert (missing.status_code, missing.json()) == (
        404,
        {"detail": "There is no judge 'nobody' in duel."},
    )


def test_bodies_django_refuses_are_answered_in_json(token_client, settings, cancelled_run):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024  # the rule, not 10 MiB of test data
    reviewer = token_client("reviewer")
    big = reviewer.client.post(
        f"/api/v1/runs/{cancelled_run.pk}/resume/",
        json.dumps({"mode": "overwrite", "pad": "x" * 2048}),
        content_type="application/json",
        headers=reviewer.headers,
    )
    assert (big.status_code, big["Content-Type"]) == (413, "application/json; charset=utf-8")
    # Refused by its Content-Length before it is read (apps.accounts.middleware, #32.6).
    assert big.json()["detail"].startswith("The request body is 2.0 KB; the limit is 1.0 KB.")
    no_boundary = reviewer.client.post(
        "/api/v1/tasks/qa/datasets/",
        b"--x\r\nContent-Disposition: form-data; name=name\r\n\r\nx\r\n--x--\r\n",
        content_type="multipart/form-data",
        headers=reviewer.headers,
    )
    assert (no_boundary.status_code, no_boundary["Content-Type"]) == (
        400,
        "application/json; charset=utf-8",
    )
    assert no_boundary.json()["detail"].startswith(
        "The multipart body could not be read (Invalid boundary in multipart: None)"
    )
    # Pages keep Django's own 400 page.
    page = reviewer.client.post(
        "/accounts/login/", b"x", content_type="multipart/form-data; boundary="
    )
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
