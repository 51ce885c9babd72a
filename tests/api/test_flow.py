"""Done when: with a token per role, upload → generation → judge → leaderboard JSON → CSV
export through the API, against the loopback LLM server and a real worker process; the
board's numbers are the page's, and the viewer reads them but changes nothing."""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.datasets.models import Dataset
from apps.judges.models import Judge
from apps.runs.models import PromptTemplate, Run
from tests.base import make_user, work
from tests.factories import make_judge, make_qa_dataset, make_task, rubric_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CSV = "id,question,answer\n" + "".join(f"q{i},What is {i} + {i}?,{2 * i}\n" for i in range(4))
VIEWER_REFUSED = {"detail": "Viewers cannot change anything."}


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.mark.parametrize("role", ["admin", "reviewer"])
def test_upload_generate_judge_board_export(role, token_client, endpoint, llm_server):
    task = make_task("qa")
    PromptTemplate.objects.create(
        task=task, name="qa", system_message="Answer briefly.", user_message="Q: {{ question }}"
    )
    judge = make_judge(task)
    writer, viewer = token_client(role), token_client("viewer", "watcher")

    # Upload: the same importer as the page, the mapping in the same call.
    upload = {
        "file": SimpleUploadedFile("arith.csv", CSV.encode(), content_type="text/csv"),
        "id_column": "id",
        "input_columns": ["question"],
        "reference_column": "answer",
    }
    refused = viewer.upload("/tasks/qa/datasets/", dict(upload))
    assert (refused.status_code, refused.json()) == (403, VIEWER_REFUSED)
    upload["file"].seek(0)
    response = writer.upload("/tasks/qa/datasets/", upload)
    assert response.status_code == 201, response.content
    dataset = Dataset.objects.get(pk=response.json()["id"])
    assert (dataset.name, dataset.row_count, dataset.status) == ("arith", 4, "ready")
    assert list(dataset.items.order_by("position").values_list("key", "reference")) == [
        ("q0", "0"),
        ("q1", "2"),
        ("q2", "4"),
        ("q3", "6"),
    ]
    assert dataset.created_by == writer.user

    # Generation, by endpoint and template names.
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": "qa"}
    assert viewer.post("/runs/generation/", start).status_code == 403
    response = writer.post("/runs/generation/", {**start, "label": "model-x"})
    assert response.status_code == 201, response.content
    generation = response.json()
    assert (generation["kind"], generation["status"], generation["total"]) == (
        "generation",
        "queued",
        4,
    )
    work()
    status = viewer.get(f"/runs/{generation['id']}/").json()
    assert (status["status"], status["done"], status["failed"], status["percent"]) == (
        "completed",
        4,
        0,
        100,
    )

    # Judge: q1 gets 5/4, q2 a reply that is no JSON (a failed item), the others 3/3.
    llm_server.configure(
        default_reply=rubric_reply(3, 3),
        script=[
            {"match": "What is 1 + 1?", "reply": rubric_reply(5, 4)},
            {"match": "What is 2 + 2?", "reply": "I cannot score this."},
        ],
    )
    judge_start = {"judge": judge.pk, "responses": generation["id"], "endpoint": endpoint.pk}
    assert viewer.post("/runs/judge/", judge_start).status_code == 403
    response = writer.post("/runs/judge/", judge_start)
    assert response.status_code == 201, response.content
    judged = response.json()
    work()
    status = viewer.get(f"/runs/{judged['id']}/").json()
    assert (status["status"], status["done"], status["failed"]) == (
        "completed_with_failures",
        3,
        1,
    )
    failed = viewer.get(f"/runs/{judged['id']}/failed/").json()
    assert [item["key"] for item in failed["items"]] == ["q2"]
    assert failed["items"][0]["rounds"][0]["raw_reply"] == "I cannot score this."
    assert failed["groups"][0]["count"] == 1

    # The leaderboard: strict means count the failed item at the worst value (1).
    board = viewer.get("/leaderboards/qa/").json()
    assert writer.get("/leaderboards/qa/").json() == board
    (row,) = board["rows"]
    assert (row["model"], row["run_id"], row["judged_run_id"]) == (
        "model-x",
        judged["id"],
        generation["id"],
    )
    accuracy, clarity = row["subjects"]["accuracy"]["human"], row["subjects"]["clarity"]["human"]
    assert accuracy["mean"] == pytest.approx((3 + 5 + 1 + 3) / 4)
    assert clarity["mean"] == pytest.approx((3 + 4 + 1 + 3) / 4)
    assert accuracy["answered_mean"] == pytest.approx(11 / 3)
    assert (accuracy["n"], accuracy["failed"], accuracy["coverage"]) == (4, 1, 0.75)
    # …the same numbers as the page, built from the same query.
    page_client = Client()
    page_client.force_login(make_user("viewer", "page-reader"))
    page = page_client.get("/leaderboards/qa/").context["board"]
    (page_row,) = page.rows
    for subject in ("accuracy", "clarity"):
        for mode in ("human", "judge"):
            cell = page_row.cells[mode][subject]
            api_cell = row["subjects"][subject][mode]
            assert (api_cell["mean"], api_cell["ci_low"], api_cell["ci_high"]) == (
                cell.mean,
                cell.ci.low,
                cell.ci.high,
            )
    assert row["overall"]["human"] == page_row.overall["human"]

    # The CSV export streams the page's export, byte for byte.
    export = viewer.get("/leaderboards/qa/export/", {"format": "csv"})
    assert export.status_code == 200 and export.streaming
    assert export["Content-Type"] == "text/csv; charset=utf-8"
    text = body(export).decode()
    page_text = page_client.get("/leaderboards/qa/export/", {"format": "csv"}).content.decode()
    assert text == page_text
    (line,) = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    assert (line["model"], float(line["accuracy.human.mean"])) == ("model-x", 3.0)

    # The run's results too; and nothing the viewer sent changed anything.
    results = viewer.get(f"/runs/{judged['id']}/export/", {"format": "csv"})
    assert results.streaming and body(results) == body(
        page_client.get(f"/leaderboards/runs/{judged['id']}/export/", {"format": "csv"})
    )
    assert Run.objects.count() == 2 and Dataset.objects.count() == 1
    assert Judge.objects.count() == 1


def test_a_provider_that_quotes_the_key_back_leaks_nothing_through_the_api(
    token_client, endpoint, llm_server
):
    """The endpoint's key never reaches an answer: not a run's errors, failed items or export,
    even from a provider whose 500 and 401 bodies quote the key they were sent."""
    task = make_task("qa")
    dataset = make_qa_dataset(task, 3)
    PromptTemplate.objects.create(task=task, name="qa", user_message="Q: {{ question }}")
    llm_server.configure(echo_auth=True, error_rate={"500": 1.0})
    reviewer = token_client("reviewer")
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": "qa"}
    started = reviewer.post("/runs/generation/", start).json()
    work()
    answers = [
        reviewer.get(f"/runs/{started['id']}/"),
        reviewer.get(f"/runs/{started['id']}/failed/"),
        reviewer.get(f"/runs/{started['id']}/export/", {"format": "jsonl"}),
        reviewer.get(f"/runs/{started['id']}/export/", {"format": "csv"}),
    ]
    assert answers[0].json()["failed"] == 3
    assert len(answers[1].json()["items"]) == 3
    key = endpoint.api_key_secret
    for answer in answers:
        text = body(answer).decode()
        assert key not in text and key[-6:] not in text
