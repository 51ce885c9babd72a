"""Each API call's answer and its errors: JSON, with the messages the pages show for the same
input (the same forms and importer give them)."""

import csv
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from apps.datasets.models import Dataset, Item
from apps.judges.models import Judge, JudgeRound, judge_of
from apps.runs.models import AttemptLog, Endpoint, ErrorKind, PromptTemplate, Run
from tests.base import make_user
from tests.datasets.samples import xlsx_bytes
from tests.datasets.test_pages import ERROR_FILES
from tests.factories import (
    add_scores,
    make_answers_dataset,
    make_dataset,
    make_generation_run,
    make_judge,
    make_judge_run,
    make_qa_dataset,
    make_task,
)
from tests.review.test_ab import pairwise_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def reviewer(token_client):
    return token_client("reviewer")


@pytest.fixture
def page_client(db):
    client = Client()
    client.force_login(make_user("reviewer", "page-user"))
    return client


def csv_file(text: str, name: str = "rows.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def body(response) -> str:
    return (
        b"".join(response.streaming_content) if response.streaming else response.content
    ).decode()


# ---- tasks ----------------------------------------------------------------------------------
def test_tasks_are_listed_with_their_counts(token_client):
    task = make_task("support-qa")
    make_qa_dataset(task, 3)
    make_task("another")
    tasks = token_client("viewer").get("/tasks/").json()
    assert sorted((t["slug"], t["datasets"], t["runs"]) for t in tasks) == [
        ("another", 0, 0),
        ("support-qa", 1, 0),
    ]
    assert next(t for t in tasks if t["datasets"])["url"] == "http://testserver/tasks/support-qa/"


def test_a_task_lists_the_ids_runs_are_started_with(token_client):
    task = make_task("qa")
    dataset = make_qa_dataset(task, 2)
    old = PromptTemplate.objects.create(task=task, name="qa", user_message="{{ question }}")
    new = PromptTemplate.objects.create(
        task=task, name="qa", version=2, user_message="Q: {{ question }}"
    )
    judge = make_judge(task)
    per_turn = make_judge(task, name="mt-bench", per_turn=True, reply_format="brackets")
    found = token_client("viewer").get("/tasks/qa/").json()
    assert [d["id"] for d in found["datasets_list"]] == [dataset.pk]
    assert found["templates"] == [{"id": new.pk, "name": "qa", "version": 2, "kind": ""}]
    assert old.pk != new.pk
    common = {"version": 1, "kind": "rubric"}
    assert found["judges"] == [
        {
            "id": per_turn.pk,
            "name": "mt-bench",
            **common,
            "reply_format": "brackets",
            "per_turn": True,
        },
        {"id": judge.pk, "name": judge.name, **common, "reply_format": "json", "per_turn": False},
    ]
    missing = token_client("viewer", "v2").get("/tasks/nope/")
    assert (missing.status_code, missing.json()) == (404, {"detail": "There is no task 'nope'."})


# ---- uploads --------------------------------------------------------------------------------
def test_an_upload_without_a_mapping_takes_the_one_the_page_suggests(reviewer):
    make_task("qa")
    text = "id,question,answer,response_gpt\nq1,2+2?,4,four\nq2,3+3?,6,six\n"
    response = reviewer.upload("/tasks/qa/datasets/", {"file": csv_file(text, "arith.csv")})
    assert response.status_code == 201, response.content
    found = response.json()
    assert (found["name"], found["version"], found["row_count"], found["status"]) == (
        "arith",
        1,
        2,
        "ready",
    )
    assert found["mapping"] == {
        "id_column": "id",
        "input_columns": ["question"],
        "reference_column": "answer",
        "tags_column": None,
        "response_columns": ["response_gpt"],
    }
    assert reviewer.get(f"/datasets/{found['id']}/").json() == found
    # The same name again is the next version, as on the page.
    again = reviewer.upload(
        "/tasks/qa/datasets/",
        {"file": csv_file(text), "name": "arith", "input_columns": ["question"]},
    )
    assert again.json()["version"] == 2
    assert again.json()["mapping"]["reference_column"] is None  # a mapping given is taken as is


def test_an_upload_carries_conversations_and_refuses_a_bad_one_by_row_and_message(reviewer):
    make_task("qa")
    questions = Path(__file__).resolve().parent.parent / "fixtures" / "mt_bench" / "question.jsonl"
    upload = SimpleUploadedFile("question.jsonl", questions.read_bytes())
    response = reviewer.upload("/tasks/qa/datasets/", {"file": upload})
    assert response.status_code == 201, response.content
    assert response.json()["mapping"]["conversation_column"] == "turns"  # as the page suggests
    item = Item.objects.get(key="101")
    assert item.turn_references == ["You are in second place.", "Uncertain."]
    bad = (
        b'{"id": 1, "chat": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]}\n'
    )
    refused = reviewer.upload(
        "/tasks/qa/datasets/",
        {"file": SimpleUploadedFile("bad.jsonl", bad), "conversation_column": "chat"},
    )
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith(
        "Line 1, message 2: role 'bot' is not one of system, user, assistant, tool"
    )
    assert Dataset.objects.count() == 1


def test_a_mapping_naming_a_missing_column_is_refused_as_the_page_refuses_it(reviewer, page_client):
    task = make_task("qa")
    text = "id,question\nq1,2+2?\n"
    response = reviewer.upload(
        "/tasks/qa/datasets/", {"file": csv_file(text), "reference_column": "answer"}
    )
    expected = "Select a valid choice. answer is not one of the available choices."
    assert (response.status_code, response.json()) == (
        400,
        {
            "detail": f"reference_column: {expected}",
            "errors": {"reference_column": [expected]},
            "columns": ["id", "question"],
        },
    )
    # The page's mapping step says the same of the same file.
    staged = page_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]), {"file": csv_file(text)}
    )
    page = page_client.post(
        staged["Location"], {"name": "rows", "format": "csv", "reference_column": "answer"}
    )
    assert page.context["form"].errors == {"reference_column": [expected]}
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        (
            "id,q\nx1,a\nx2,b\nx1,c\n",
            {"id_column": "id"},
            "The id 'x1' in column 'id' appears 2 times: row 2, row 4. "
            "Ids must be unique within a dataset.",
        ),
        (
            "q,answer\n1,2\n",
            {"reference_column": "answer", "response_columns": ["answer"]},
            "Column 'answer' cannot be both the reference column and a response column.",
        ),
    ],
)
def test_a_mapping_the_importer_refuses(reviewer, _media_root, text, fields, expected):
    make_task("qa")
    response = reviewer.upload("/tasks/qa/datasets/", {"file": csv_file(text), **fields})
    assert response.status_code == 400
    assert response.json()["detail"] == expected
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0
    assert list((_media_root / "uploads").iterdir()) == []


@pytest.mark.parametrize(("data", "name", "expected"), ERROR_FILES, ids=[e[1] for e in ERROR_FILES])
def test_each_file_error_is_the_upload_pages(
    reviewer, page_client, _media_root, data, name, expected
):
    task = make_task("qa")
    upload = SimpleUploadedFile(name, data)
    response = reviewer.upload("/tasks/qa/datasets/", {"file": upload})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith(f"{name}: ") and expected in detail
    page = page_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile(name, data)},
    )
    assert page.context["form"].errors["file"] == [detail]
    assert Dataset.objects.count() == 0
    assert list((_media_root / "uploads").iterdir()) == []  # nothing staged stays behind


def test_an_upload_without_a_file_names_the_field(reviewer):
    make_task("qa")
    response = reviewer.upload("/tasks/qa/datasets/", {"name": "x"})
    # A required multipart field in the schema, so ninja refuses it before the form does.
    assert response.status_code == 422
    assert response.json()["detail"] == "file: Field required."


def test_a_big_upload_imports_in_a_worker(reviewer, settings):
    settings.DATASET_SYNC_MAX_ROWS = 2
    make_task("qa")
    text = "q\n" + "".join(f"row {i}\n" for i in range(5))
    response = reviewer.upload("/tasks/qa/datasets/", {"file": csv_file(text)})
    assert response.status_code == 202
    assert response.json()["status"] == "importing"


# ---- starting runs --------------------------------------------------------------------------
@pytest.fixture
def qa(db, endpoint):
    task = make_task("qa")
    dataset = make_qa_dataset(task, 3)
    template = PromptTemplate.objects.create(task=task, name="qa", user_message="Q: {{ question }}")
    return task, dataset, template


def test_generation_errors_are_the_start_forms(reviewer, qa, page_client, endpoint):
    task, dataset, _ = qa
    PromptTemplate.objects.create(task=task, name="bad", user_message="{{ nothing_like_it }}")
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": "bad"}
    response = reviewer.post("/runs/generation/", start)
    assert response.status_code == 400
    errors = response.json()["errors"]["__all__"]
    assert errors[0].startswith("The template uses nothing_like_it, which item q0")
    bad = PromptTemplate.objects.get(name="bad")
    page = page_client.post(
        reverse("runs:generation-start"),
        {
            "task": "qa",
            "dataset": dataset.pk,
            "endpoint": endpoint.pk,
            "template": bad.pk,
            "logging_mode": "failed",
            "chunk_size": 200,
        },
    )
    assert page.context["form"].errors["__all__"] == errors
    unknown = reviewer.post("/runs/generation/", {**start, "endpoint": "nowhere", "template": "qa"})
    assert unknown.json()["errors"] == {
        "endpoint": ["Select a valid choice. That choice is not one of the available choices."]
    }
    assert Run.objects.count() == 0
    missing = reviewer.post("/runs/generation/", {**start, "task": "nope"})
    assert (missing.status_code, missing.json()) == (404, {"detail": "There is no task 'nope'."})
    typed = reviewer.post("/runs/generation/", {**start, "dataset": "first"})
    assert typed.status_code == 422 and typed.json()["detail"].startswith("body.dataset:")


def test_a_generation_run_starts_with_the_forms_defaults(reviewer, qa, endpoint):
    _, dataset, template = qa
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": endpoint.pk, "template": template.pk}
    response = reviewer.post("/runs/generation/", {**start, "epochs": 2})
    assert response.status_code == 201
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.kind, run.total, run.epochs, run.chunk_size, run.logging_mode) == (
        "generation",
        6,
        2,
        200,
        "failed",
    )
    assert run.created_by == reviewer.user and run.template == template
    assert response.json()["url"] == f"http://testserver/runs/{run.pk}/"


def test_judge_run_errors(reviewer, qa):
    task, _, _ = qa
    rubric = make_judge(task)
    answers = make_answers_dataset(task, 2)
    # With one endpoint the page (and so the API) picks it; with two, the caller must.
    Endpoint.objects.create(name="other", model="m")
    column = f"column:{answers.pk}:response"
    no_endpoint = reviewer.post("/runs/judge/", {"judge": rubric.pk, "responses": column})
    assert no_endpoint.json()["errors"] == {"endpoint": ["This field is required."]}
    wrong = reviewer.post(
        "/runs/judge/", {"judge": rubric.pk, "responses": 999, "endpoint": "local"}
    )
    assert wrong.json()["errors"]["responses"][0].startswith("Select a valid choice.")
    pairwise = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    refused = reviewer.post("/runs/judge/", {"judge": pairwise.pk, "responses": column})
    assert refused.json() == {"detail": f"{pairwise} is a pairwise judge: start a pairwise run."}
    assert reviewer.post("/runs/judge/", {"judge": 999, "responses": 1}).status_code == 404
    started = reviewer.post(
        "/runs/judge/",
        {"judge": rubric.pk, "responses": column, "endpoint": "local", "label": "gold"},
    )
    assert started.status_code == 201
    run = Run.objects.get(pk=started.json()["id"])
    assert (run.kind, run.source_column, run.dataset, run.label, run.total) == (
        "judge",
        "response",
        answers,
        "gold",
        2,
    )


def test_a_pairwise_run_compares_response_sets(reviewer, qa):
    task, _, _ = qa
    rows = [
        {"key": f"q{i}", "fields": {"question": f"q{i}", "gpt": f"a{i}", "llama": f"b{i}"}}
        for i in range(3)
    ]
    mapping = {"input_columns": ["question"], "response_columns": ["gpt", "llama"]}
    dataset = make_dataset(task, rows, name="answers", mapping=mapping)
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    sets = [f"column:{dataset.pk}:gpt", f"column:{dataset.pk}:llama"]
    one = reviewer.post(
        "/runs/pairwise/", {"judge": judge.pk, "responses": sets[:1], "endpoint": "local"}
    )
    assert one.status_code == 400 and one.json()["detail"]
    started = reviewer.post(
        "/runs/pairwise/", {"judge": judge.pk, "responses": sets, "endpoint": "local"}
    )
    assert started.status_code == 201, started.content
    run = Run.objects.get(pk=started.json()["id"])
    assert (run.kind, run.total, judge_of(run)) == ("pairwise", 3, judge)
    rubric = make_judge(task)
    wrong = reviewer.post(
        "/runs/pairwise/", {"judge": rubric.pk, "responses": sets, "endpoint": "local"}
    )
    assert wrong.json() == {"detail": f"{rubric} is not a pairwise judge: start a judge run."}


# ---- a run's status, failed items and export ---------------------------------------------------
def test_run_status_and_failed_responses_of_a_generation_run(token_client):
    task = make_task("qa")
    dataset = make_qa_dataset(task, 4)
    run = make_generation_run(
        dataset, {0: "=HYPERLINK(1)", 1: None, 2: "fine", 3: None}, status="completed_with_failures"
    )
    run.responses.filter(status="failed").update(error_kind=ErrorKind.TIMEOUT, error="timed out")
    viewer = token_client("viewer")
    status = viewer.get(f"/runs/{run.pk}/").json()
    assert (status["kind"], status["status"], status["status_label"]) == (
        "generation",
        "completed_with_failures",
        "Completed with failures",
    )
    failed = viewer.get(f"/runs/{run.pk}/failed/").json()
    assert [(i["key"], i["error_kind"], i["error"]) for i in failed["items"]] == [
        ("q1", "timeout", "timed out"),
        ("q3", "timeout", "timed out"),
    ]
    assert failed["groups"] == [{"kind": "timeout", "label": "Timeout", "count": 2}]
    # The export neutralises a formula, as the page's does (it is the same generator).
    export = viewer.get(f"/runs/{run.pk}/export/", {"format": "csv"})
    assert export.streaming
    rows = list(csv.DictReader(io.StringIO(body(export).lstrip("\ufeff"))))
    assert rows[0]["response"] == "'=HYPERLINK(1)"
    jsonl = [
        json.loads(line)
        for line in body(viewer.get(f"/runs/{run.pk}/export/", {"format": "jsonl"})).splitlines()
    ]
    assert jsonl[0]["response"] == "=HYPERLINK(1)"
    bad = viewer.get(f"/runs/{run.pk}/export/", {"format": "xml"})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("format: Input should be")
    assert viewer.get("/runs/999/").json() == {"detail": "There is no run #999."}


def test_a_judge_runs_failed_items_show_tracebacks_to_admins_only(token_client):
    task = make_task("qa")
    dataset = make_answers_dataset(task, 2, response=lambda i: f"answer {i}")
    run = make_judge_run(dataset, source_column="response")
    add_scores(
        run, {"q0": {"accuracy": 4, "clarity": 4}, "q1": {"accuracy": None, "clarity": None}}
    )
    item = dataset.items.get(position=1)
    JudgeRound.objects.create(
        run=run,
        item=item,
        round=0,
        status="failed",
        error_kind=ErrorKind.UNPARSEABLE,
        error="no JSON",
        raw_reply="meh",
    )
    AttemptLog.objects.create(
        run=run,
        item=item,
        round=0,
        ok=False,
        traceback="File /srv/x.py",
        request_messages=[{"role": "user", "content": "judge this"}],
    )
    for role, sees in (("viewer", False), ("admin", True)):
        found = token_client(role).get(f"/runs/{run.pk}/failed/").json()
        (entry,) = found["items"]
        assert (entry["key"], entry["error_kind"], entry["error"]) == (
            "q1",
            "unparseable",
            "no JSON in the reply",
        )
        rounds_seen = entry["rounds"]
        assert rounds_seen[0]["raw_reply"] == "meh"
        assert rounds_seen[0]["messages"] == [{"role": "user", "content": "judge this"}]
        assert ("traceback" in rounds_seen[0]) is sees


# ---- the leaderboard ------------------------------------------------------------------------
def test_a_task_without_judged_runs_has_no_board(token_client):
    make_task("qa")
    viewer = token_client("viewer")
    for path in ("/leaderboards/qa/", "/leaderboards/qa/export/"):
        response = viewer.get(path)
        assert (response.status_code, response.json()) == (
            404,
            {"detail": "This task has no judged runs yet."},
        )


def test_the_board_takes_the_pages_query(token_client):
    task = make_task("qa")
    dataset = make_answers_dataset(task, 4)
    make_judge_run(dataset, source_column="response", label="gold")
    viewer = token_client("viewer")
    both = viewer.get("/leaderboards/qa/").json()
    judge_only = viewer.get("/leaderboards/qa/", {"values": "judge", "scoring": "answered"}).json()
    assert (both["values"], judge_only["values"], judge_only["scoring"]) == (
        "both",
        "judge",
        "answered",
    )
    assert set(both["rows"][0]["subjects"]["accuracy"]) == {"human", "judge", "overridden"}
    assert set(judge_only["rows"][0]["subjects"]["accuracy"]) == {"judge", "overridden"}
    pairs_csv = body(viewer.get("/leaderboards/qa/export/", {"format": "csv", "pairs": "1"}))
    assert pairs_csv.lstrip("\ufeff").startswith("model_a") or "model" in pairs_csv.splitlines()[0]
    jsonl = body(viewer.get("/leaderboards/qa/export/", {"format": "jsonl"})).splitlines()
    assert json.loads(jsonl[0])["model"] == "gold"


def test_no_endpoint_key_in_any_answer(token_client, endpoint, qa):
    _, dataset, template = qa
    reviewer = token_client("admin")
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": template.pk}
    answers = [reviewer.post("/runs/generation/", start), reviewer.get("/tasks/qa/")]
    answers.append(reviewer.get(f"/runs/{answers[0].json()['id']}/"))
    answers.append(reviewer.get("/openapi.json"))
    for answer in answers:
        assert endpoint.api_key_secret not in answer.content.decode()


def test_a_file_too_wide_to_tick_maps_the_columns_given(reviewer, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 30  # the page ticks at most 10 columns a list
    make_task("qa")
    columns = [f"c{i}" for i in range(12)]
    text = ",".join(columns) + "\n" + ",".join(str(i) for i in range(12)) + "\n"
    fields = {
        "input_columns": ["c1", "c2", "c3"],
        "response_columns": ["c10", "c11"],
        "id_column": "c0",
    }
    response = reviewer.upload("/tasks/qa/datasets/", {"file": csv_file(text), **fields})
    assert response.status_code == 201, response.content
    mapping = response.json()["mapping"]
    assert (mapping["input_columns"], mapping["response_columns"], mapping["id_column"]) == (
        ["c1", "c2", "c3"],
        ["c10", "c11"],
        "c0",
    )


def test_the_pairwise_board_is_the_pages(token_client):
    run, _, _, _ = pairwise_run({0: ("A", "B"), 1: ("A", "B"), 2: ("B", "A"), 3: ("A", "A")})
    viewer = token_client("viewer")
    found = viewer.get("/leaderboards/duel/pairwise/").json()
    page_client = Client()
    page_client.force_login(make_user("viewer", "page-reader"))
    page = page_client.get("/leaderboards/duel/pairwise/", {"format": "jsonl"})
    expected = [json.loads(line) for line in page.content.decode().splitlines()]
    assert found["rows"] == expected
    assert [row["model"] for row in found["rows"]] == ["x", "y"]
    assert (found["judge"], found["source"]) == (judge_of(run).pk, "judge")
    export = viewer.get("/leaderboards/duel/pairwise/export/", {"format": "csv"})
    assert export.streaming
    assert (
        body(export)
        == page_client.get("/leaderboards/duel/pairwise/", {"format": "csv"}).content.decode()
    )
    make_task("quiet")
    missing = viewer.get("/leaderboards/quiet/pairwise/")
    assert missing.json() == {"detail": "No pairwise run of quiet has finished a comparison."}


def test_a_workbook_uploads_from_the_sheet_named(reviewer):
    make_task("qa")
    data = xlsx_bytes(
        {
            "Readme": [["about"], ["this workbook"]],
            "Items": [
                ["id", "question", "answer"],
                [101, "2+2?", 4],
                [102, "Capital of Peru?", "Lima"],
            ],
        }
    )

    def send(**fields):
        upload = SimpleUploadedFile("book.xlsx", data)
        return reviewer.upload("/tasks/qa/datasets/", {"file": upload, **fields})

    first = send()
    assert first.status_code == 201 and first.json()["columns"] == ["about"]
    chosen = send(sheet="Items", name="items")
    assert chosen.status_code == 201, chosen.content
    dataset = Dataset.objects.get(pk=chosen.json()["id"])
    assert (dataset.sheet, dataset.row_count, dataset.id_column) == ("Items", 2, "id")
    assert list(dataset.items.values_list("key", flat=True)) == ["101", "102"]
    missing = send(sheet="Nope")
    assert missing.status_code == 400
    assert missing.json()["detail"] == (
        "book.xlsx: The workbook has no sheet 'Nope'; its sheets are 'Readme', 'Items'."
    )


def test_a_sheet_named_is_read_even_when_the_first_sheet_is_unreadable(reviewer):
    """Seen in the install: a cover sheet with a value under an unnamed column refused the
    upload before the sheet asked for was read."""
    make_task("qa")
    data = xlsx_bytes(
        {
            "Cover": [["Science QA"], ["Made", "2026-11-23"]],
            "Questions": [["question", "answer"], ["What is H2O?", "water"]],
        }
    )
    upload = SimpleUploadedFile("science.xlsx", data)
    sent = reviewer.upload("/tasks/qa/datasets/", {"file": upload, "sheet": "Questions"})
    assert sent.status_code == 201, sent.content
    dataset = Dataset.objects.get(pk=sent.json()["id"])
    assert (dataset.sheet, dataset.row_count) == ("Questions", 1)


def test_the_start_calls_take_the_forms_cache_and_budget(reviewer, qa, settings):
    """#16.4/#16.5 on the API: the start forms' response cache and budget cap, refused as
    the forms refuse them, and reported with the run."""
    task, dataset, template = qa
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": template.pk}
    unpriced = reviewer.post("/runs/generation/", {**start, "budget_usd": 0.5})
    assert unpriced.status_code == 400 and "budget_usd" in unpriced.json()["errors"]
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}
    Endpoint.objects.filter(name="local").update(supports_batch=True)
    both = reviewer.post("/runs/generation/", {**start, "budget_usd": 0.5, "batch": True})
    assert both.json()["errors"]["budget_usd"] == [
        "A budget cannot stop a batch: leave one of them out."
    ]
    started = reviewer.post("/runs/generation/", {**start, "use_cache": "off", "budget_usd": 0.5})
    assert started.status_code == 201, started.content
    body = started.json()
    assert (body["use_cache"], body["budget_usd"], body["cached"], body["sent"]) == (
        False,
        0.5,
        0,
        0,
    )
    run = Run.objects.get(pk=body["id"])
    assert (run.use_cache, float(run.budget_usd)) == (False, 0.5)

    answers = make_answers_dataset(task, 2)
    column = f"column:{answers.pk}:response"
    rubric = make_judge(task)
    judged = reviewer.post(
        "/runs/judge/",
        {"judge": rubric.pk, "responses": column, "endpoint": "local", "use_cache": False},
    )
    # JSON's false is "off", as runs report it (seen from a script: it was refused as no string).
    assert judged.status_code == 201, judged.content
    assert judged.json()["use_cache"] is False
    again = reviewer.post("/runs/generation/", {**start, "label": "cached", "use_cache": True})
    assert again.status_code == 201 and again.json()["use_cache"] is True
    wrong = reviewer.post("/runs/generation/", {**start, "label": "x", "use_cache": "maybe"})
    assert wrong.status_code == 400 and "use_cache" in wrong.json()["errors"]
    default = reviewer.post(
        "/runs/judge/",
        {"judge": rubric.pk, "responses": column, "endpoint": "local", "budget_usd": 0.25},
    )
    assert (default.json()["use_cache"], default.json()["budget_usd"]) == (True, 0.25)

    rows = [{"key": f"q{i}", "fields": {"q": f"q{i}", "a": "x", "b": "y"}} for i in range(2)]
    pair_data = make_dataset(
        task, rows, name="pairs", mapping={"input_columns": ["q"], "response_columns": ["a", "b"]}
    )
    which = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    sets = [f"column:{pair_data.pk}:a", f"column:{pair_data.pk}:b"]
    pairwise = reviewer.post(
        "/runs/pairwise/",
        {"judge": which.pk, "responses": sets, "endpoint": "local", "use_cache": "off"},
    )
    assert pairwise.status_code == 201, pairwise.content
    assert Run.objects.get(pk=pairwise.json()["id"]).use_cache is False
