"""Exports: streamed per-item results, the board as CSV/JSONL, formula neutralisation."""

import csv
import io
import json
import re

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.judges.models import Score
from tests.leaderboards import factories as f
from tests.leaderboards.test_board import page_cells


def read_csv(response) -> list[dict[str, str]]:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    assert text.startswith("\ufeff")  # the BOM: Excel reads UTF-8 (Chinese and all)
    return list(csv.DictReader(io.StringIO(text[1:])))


def run_export(client, run, fmt="csv"):
    return client.get(reverse("leaderboards:run-export", args=[run.pk]), {"format": fmt})


# ---- run results ------------------------------------------------------------------------
def test_run_results_csv_one_row_per_item(board_data, reviewer_user, viewer_client):
    run = board_data["run_a"]
    f.score(run, "k0", "accuracy").override(2, reviewer_user, "too generous")
    f.score(run, "k1", "clarity").confirm(reviewer_user)
    response = run_export(viewer_client, run)
    assert isinstance(response, StreamingHttpResponse)
    assert (
        response["Content-Disposition"] == f'attachment; filename="demo-run-{run.pk}-results.csv"'
    )
    rows = read_csv(response)
    assert [r["key"] for r in rows] == ["k0", "k1", "k2", "k3", "k4", "k5"]
    k0 = rows[0]
    assert (k0["position"], k0["question"], k0["answer"], k0["response"]) == (
        "0",
        "q0",
        "a0",
        "answer A0",
    )
    assert (k0["accuracy.judge"], k0["accuracy.final"], k0["accuracy.review"]) == (
        "5.0",
        "2.0",
        "overridden",
    )
    assert (k0["accuracy.override_reason"], k0["accuracy.reviewer"]) == ("too generous", "reviewer")
    assert json.loads(k0["accuracy.rounds"]) == [5.0]
    assert (rows[1]["clarity.review"], rows[1]["clarity.reviewer"]) == ("confirmed", "reviewer")
    k3 = rows[3]
    assert (k3["accuracy.status"], k3["accuracy.judge"], k3["accuracy.final"]) == ("failed", "", "")
    assert k3["accuracy.error"] == "unparseable: no JSON in the reply"
    # k5 was never scored on clarity: empty cells, like NaN in ml3m's load_scores.
    assert all(rows[5][f"clarity.{c}"] == "" for c in ("judge", "final", "status", "rounds"))


def test_run_results_neutralise_hostile_text(db, viewer_client):
    task = f.make_task("demo")
    dataset = f.make_dataset(
        task,
        [
            {
                "key": "=cmd|' /C calc'!A0",
                "fields": {"question": "@SUM(1+1)", "number": "-3", "formula": "-3+2"},
            }
        ],
    )
    judge = f.make_judge(task, subjects=[{"name": "delta", "min": -5, "max": 5}])
    gen = f.make_generation_run(task, dataset, "m", {"=cmd|' /C calc'!A0": '+HYPERLINK("x")'})
    run = f.make_judge_run(task, dataset, judge, source_run=gen)
    f.add_scores(run, {"=cmd|' /C calc'!A0": {"delta": -3}})
    [row] = read_csv(run_export(viewer_client, run))
    assert row["key"] == "'=cmd|' /C calc'!A0"
    assert row["question"] == "'@SUM(1+1)"
    assert row["formula"] == "'-3+2"
    # Text is text: "-3" from a file gets the quote like any cell starting with "-" ...
    assert row["number"] == "'-3"
    assert row["response"] == '\'+HYPERLINK("x")'
    # ... while numbers we write ourselves stay numbers: -3.0 cannot run as a formula.
    assert row["delta.judge"] == "-3.0"
    assert row["delta.final"] == "-3.0"


@pytest.mark.parametrize("hostile", ["=1+1", "+1", "-1-1", "@SUM(A1)", "\tTAB", "\rCR"])
def test_reasons_are_neutralised(board_data, reviewer_user, viewer_client, hostile):
    run = board_data["run_a"]
    f.score(run, "k0", "accuracy").override(2, reviewer_user, "x")
    Score.objects.filter(run=run, subject="accuracy", item__key="k0").update(
        override_reason=hostile
    )
    rows = read_csv(run_export(viewer_client, run))
    assert rows[0]["accuracy.override_reason"] == "'" + hostile


def test_run_results_jsonl(board_data, viewer_client):
    response = run_export(viewer_client, board_data["run_a"], "jsonl")
    assert response["Content-Type"].startswith("application/x-ndjson")
    lines = [
        json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()
    ]
    assert [line["key"] for line in lines] == ["k0", "k1", "k2", "k3", "k4", "k5"]
    assert lines[0]["scores"]["accuracy"]["judge"] == 5.0
    assert lines[0]["fields"] == {"question": "q0", "answer": "a0"}
    assert lines[3]["scores"]["accuracy"]["status"] == "failed"
    assert lines[5]["scores"]["clarity"] is None


def test_generation_run_exports_its_responses(board_data, viewer_client):
    rows = read_csv(run_export(viewer_client, board_data["gen_b"]))
    assert [(r["key"], r["response"], r["status"]) for r in rows][:2] == [
        ("k0", "answer B0", "ok"),
        ("k1", "answer B1", "ok"),
    ]


def test_unknown_format_is_404(board_data, viewer_client):
    assert run_export(viewer_client, board_data["run_a"], "xlsx").status_code == 404


def _export_queries(client, run) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        response = run_export(client, run)
        body = b"".join(response.streaming_content)
    return len(queries), body.count(b"\n")


def test_export_streams_with_a_fixed_number_of_queries(db, viewer_client):
    task = f.make_task("demo")
    judge = f.make_judge(task)
    counts = []
    for n in (5, 60):
        dataset = f.make_items(task, n, name=f"set{n}")
        gen = f.make_generation_run(task, dataset, f"m{n}", {f"k{i}": f"r{i}" for i in range(n)})
        run = f.make_judge_run(task, dataset, judge, source_run=gen)
        f.add_scores(run, {f"k{i}": {"accuracy": 1 + i % 5, "clarity": 3} for i in range(n)})
        queries, lines = _export_queries(viewer_client, run)
        assert lines == n + 1
        counts.append(queries)
    assert counts[0] == counts[1]


def test_export_is_produced_in_pieces(db, monkeypatch):
    """A large run leaves in many chunks rather than one string built in memory."""
    from apps.leaderboards import exports

    monkeypatch.setattr(exports, "FLUSH", 10)
    task = f.make_task("demo")
    dataset = f.make_items(task, 45)
    run = f.make_judge_run(task, dataset, f.make_judge(task), source_column="question")
    f.add_scores(run, {f"k{i}": {"accuracy": 3} for i in range(45)})
    pieces = list(exports.results_csv(run))
    assert len(pieces) == 5 and sum(p.count("\n") for p in pieces) == 46


# ---- the board --------------------------------------------------------------------------
def test_board_csv_says_what_the_page_shows(board_data, reviewer_user, viewer_client):
    f.score(board_data["run_a"], "k3", "accuracy").override(4, reviewer_user, "judge failed")
    query = {"values": "both", "sort": "mean:accuracy"}
    html = viewer_client.get(reverse("leaderboards:task", args=["demo"]), query).content.decode()
    shown = page_cells(html)
    response = viewer_client.get(
        reverse("leaderboards:task-export", args=["demo"]), {**query, "format": "csv"}
    )
    assert (
        response["Content-Disposition"] == 'attachment; filename="demo-quality-v1-leaderboard.csv"'
    )
    rows = read_csv(response)
    order = [int(r) for r in re.findall(r'<tr data-run="(\d+)">', html)]
    assert [int(r["run_id"]) for r in rows] == order
    checked = 0
    for row in rows:
        run = int(row["run_id"])
        for subject in ("accuracy", "clarity"):
            for mode in ("judge", "human"):
                assert (
                    shown[(run, subject, mode, "mean")]
                    == f"{float(row[f'{subject}.{mode}.mean']):.2f}"
                )
                checked += 1
            low, high = (
                float(row[f"{subject}.human.ci_low"]),
                float(row[f"{subject}.human.ci_high"]),
            )
            assert shown[(run, subject, "human", "ci")] == f"[{low:.2f}, {high:.2f}]"
            for stat in ("n", "failed"):
                assert shown[(run, subject, "human", stat)] == row[f"{subject}.human.{stat}"]
            assert shown[(run, subject, "human", "overridden")] == row[f"{subject}.overridden"]
    assert checked == 8
    run_a = next(r for r in rows if int(r["run_id"]) == board_data["run_a"].pk)
    assert (run_a["accuracy.judge.n"], run_a["accuracy.judge.failed"]) == ("5", "1")
    assert (run_a["accuracy.human.n"], run_a["accuracy.human.failed"]) == ("6", "0")


def test_board_csv_neutralises_model_names(board_data, viewer_client):
    run = board_data["run_a"]
    run.label = '=HYPERLINK("http://evil")'
    run.save()
    rows = read_csv(
        viewer_client.get(reverse("leaderboards:task-export", args=["demo"]), {"format": "csv"})
    )
    assert '\'=HYPERLINK("http://evil")' in [r["model"] for r in rows]


def test_board_jsonl(board_data, viewer_client):
    response = viewer_client.get(
        reverse("leaderboards:task-export", args=["demo"]), {"format": "jsonl", "tag": "easy"}
    )
    records = [json.loads(line) for line in response.content.decode().splitlines()]
    assert [r["model"] for r in records] == ["model-a", "model-b"]
    a = records[0]
    assert a["tag"] == "easy" and a["judge"] == "quality"
    assert a["subjects"]["accuracy"]["judge"]["mean"] == pytest.approx(11 / 3)
    assert a["subjects"]["accuracy"]["judge"]["n"] == 3
