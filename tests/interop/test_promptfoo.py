"""promptfoo's results file imported, reviewed and written back.

tests/interop/fixtures/promptfoo/results.json was made by promptfoo 0.121.20 itself (npm,
with node 20: 0.122 and later need node 22) from promptfooconfig.yaml beside it, against the
loopback server (`OPENAI_BASE_URL=<server>/v1 promptfoo eval -c promptfooconfig.yaml -o
results.json`, the server scripted as tests/interop/tools.py's SCRIPT): two providers, three
tests, four assertions. bin/test's tools stage runs promptfoo itself from that config
(tests/interop/real/test_promptfoo_run.py); this copy keeps the database stages free of it.
"""

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from apps.datasets.models import Dataset, Item, Task
from apps.interop.models import Import
from apps.interop.results import ImportError_
from apps.interop.tools import import_files
from apps.judges.models import Judge, JudgeRound, Score
from apps.leaderboards.boards import Params, build
from apps.runs.models import Response

RESULTS = Path(__file__).resolve().parent / "fixtures" / "promptfoo" / "results.json"


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="capitals", name="Capitals")


def imported(task: Task) -> Import:
    return import_files(task, Import.Tool.PROMPTFOO, [(RESULTS.name, RESULTS.read_bytes())])


def score(label: str, key: str, subject: str) -> Score:
    return Score.objects.get(run__source_run__label=label, item__key=key, subject=subject)


@pytest.mark.django_db
def test_tests_providers_and_assertions_come_in(task):
    source = imported(task)
    assert (source.tool, source.tool_version) == ("promptfoo", "0.121.20")
    dataset = source.dataset
    assert (dataset.name, dataset.row_count) == ("capitals", 3)
    japan = Item.objects.get(dataset=dataset, key="Japan")
    assert japan.fields["country"] == "Japan" and japan.reference == "Tokyo"
    labels = sorted(log.run.label for log in source.logs.all())
    assert labels == ["openai:chat:model-a", "openai:chat:model-b"]
    assert Response.objects.get(run__label="openai:chat:model-b", item=japan).text == "Kyoto"
    judge = Judge.objects.get(task=task)
    assert (judge.name, judge.kind) == ("promptfoo-assertions", "imported")
    assert [s["name"] for s in judge.subjects] == [
        "pass", "score", "icontains", "javascript", "equals",
    ]  # fmt: skip
    assert score("openai:chat:model-b", "Japan", "pass").judge_value == 0.0
    assert score("openai:chat:model-b", "Japan", "score").judge_value == 0.5
    assert score("openai:chat:model-b", "Japan", "javascript").judge_value == 1.0
    # Only the tests with an assertion of that kind have a score for it.
    assert not Score.objects.filter(item__key="France", subject="javascript").exists()
    reason = JudgeRound.objects.get(run__source_run__label="openai:chat:model-b", item=japan)
    assert 'icontains: Expected output to contain "Tokyo"' in reason.reason


@pytest.mark.django_db
def test_a_reviewed_verdict_goes_back_as_promptfoos_human_rating(task, reviewer_user, tmp_path):
    source = imported(task)
    judge = Judge.objects.get(task=task)
    board = build(task, Params(judge_id=judge.pk))
    assert [(r.label, round(r.cells["human"]["pass"].mean, 4)) for r in board.rows] == [
        ("openai:chat:model-a", 0.6667),
        ("openai:chat:model-b", 0.3333),
    ]
    score("openai:chat:model-b", "Japan", "pass").override(1.0, reviewer_user, "Kyoto, once")
    board = build(task, Params(judge_id=judge.pk))
    assert {r.label: r.cells["human"]["pass"].mean for r in board.rows} == pytest.approx(
        {"openai:chat:model-a": 2 / 3, "openai:chat:model-b": 2 / 3}
    )
    run = source.logs.get(run__label="openai:chat:model-b").run
    call_command("export_reviewed", str(run.pk), "-o", str(tmp_path))
    written = json.loads((tmp_path / "results-reviewed.json").read_text())
    original = json.loads(RESULTS.read_text())
    assert written["evalId"] == original["evalId"]
    rows = written["results"]["results"]
    assert len(rows) == 6  # every provider's results, in the file's order
    assert [(r["testIdx"], r["provider"]["id"]) for r in rows] == sorted(
        (r["testIdx"], r["provider"]["id"]) for r in original["results"]["results"]
    )
    (japan_b,) = [
        r for r in rows if r["testIdx"] == 1 and r["provider"]["id"] == "openai:chat:model-b"
    ]
    assert (japan_b["success"], japan_b["score"]) == (True, 1.0)
    human = japan_b["gradingResult"]["componentResults"][0]
    assert human == {
        "pass": True,
        "score": 1.0,
        "reason": "evalsite reviewers: Kyoto, once",
        "assertion": {"type": "human"},
    }
    assert written["results"]["stats"]["successes"] == 4
    assert written["results"]["stats"]["failures"] == 2
    # promptfoo's summary of each prompt × provider column, counted again: model-b 2 of 3.
    metrics = [p["metrics"] for p in written["results"]["prompts"]]
    assert [(m["testPassCount"], m["testFailCount"], m["score"]) for m in metrics] == [
        (2, 1, 2.0),
        (2, 1, 2.0),
    ]
    untouched = [r for r in rows if r["testIdx"] == 0]
    assert all("human" not in json.dumps(r["gradingResult"]) for r in untouched)


@pytest.mark.django_db
def test_a_bad_result_is_named_and_nothing_is_stored(task):
    document = json.loads(RESULTS.read_text())
    document["results"]["results"][2]["score"] = "high"
    with pytest.raises(ImportError_) as caught:
        import_files(task, Import.Tool.PROMPTFOO, [("r.json", json.dumps(document).encode())])
    test = document["results"]["results"][2]["testCase"]["description"]
    assert (
        str(caught.value)
        == f"r.json, result 3 (test {test!r}): score: 'high' is not a number or true/false."
    )
    assert not Dataset.objects.exists() and not Judge.objects.exists()


@pytest.mark.django_db
def test_the_import_page_imports_or_names_the_bad_result(task, reviewer_client):
    url = f"/tasks/{task.slug}/import-results/"
    page = reviewer_client.get(f"/tasks/{task.slug}/upload/")
    assert f'href="{url}"'.encode() in page.content
    assert b"Results from Inspect AI, lm-evaluation-harness, promptfoo or OpenAI Evals?" in (
        page.content
    )
    form = reviewer_client.get(url).content.decode()
    assert 'type="file" name="uploads" multiple' in form and 'value="promptfoo"' in form
    document = json.loads(RESULTS.read_text())
    document["results"]["results"][2]["score"] = "high"
    bad = SimpleUploadedFile("r.json", json.dumps(document).encode())
    page = reviewer_client.post(url, {"tool": "promptfoo", "uploads": [bad]})
    assert page.status_code == 200
    assert "r.json, result 3 (test &#x27;Japan&#x27;): score: &#x27;high&#x27; is not" in (
        page.content.decode()
    )
    assert not Dataset.objects.exists()
    good = SimpleUploadedFile(RESULTS.name, RESULTS.read_bytes())
    page = reviewer_client.post(url, {"tool": "promptfoo", "uploads": [good]}, follow=True)
    dataset = Dataset.objects.get()
    assert page.redirect_chain[-1][0] == dataset.get_absolute_url()
    assert "Imported promptfoo 0.121.20: results.json: 3 items into capitals v1" in (
        page.content.decode()
    )
    assert Client().get(url).status_code == 302  # signed out: to the login page
