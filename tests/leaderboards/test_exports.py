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

from apps.judges.models import JudgeRound, Score
from apps.review.models import BlindEntry
from tests import factories as f
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
        name="set",
    )
    judge = f.make_judge(task, name="quality", subjects=[{"name": "delta", "min": -5, "max": 5}])
    gen = f.make_generation_run(dataset, {"=cmd|' /C calc'!A0": '+HYPERLINK("x")'}, label="m")
    run = f.make_judge_run(dataset, judge, source_run=gen)
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
    assert run_export(viewer_client, board_data["run_a"], "xml").status_code == 404


def _export_queries(client, run) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        response = run_export(client, run)
        body = b"".join(response.streaming_content)
    return len(queries), body.count(b"\n")


def test_export_streams_with_a_fixed_number_of_queries(db, viewer_client):
    task = f.make_task("demo")
    judge = f.make_judge(task, name="quality")
    counts = []
    for n in (5, 60):
        dataset = f.make_items(task, n, name=f"set{n}")
        gen = f.make_generation_run(dataset, {f"k{i}": f"r{i}" for i in range(n)}, label=f"m{n}")
        run = f.make_judge_run(dataset, judge, source_run=gen)
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
    run = f.make_judge_run(dataset, f.make_judge(task, name="quality"), source_column="question")
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
            answered = float(row[f"{subject}.human.answered_mean"])
            assert shown[(run, subject, "human", "other_mean")] == f"{answered:.2f}"
            coverage = float(row[f"{subject}.human.coverage"])
            assert shown[(run, subject, "human", "coverage")] == f"{coverage * 100:.1f}%"
    assert checked == 8
    run_a = next(r for r in rows if int(r["run_id"]) == board_data["run_a"].pk)
    # Strict (the default): all six items are in the mean, k3's failure at the worst value 1.
    assert (run_a["accuracy.judge.n"], run_a["accuracy.judge.failed"]) == ("6", "1")
    assert run_a["accuracy.judge.strict_mean"] == run_a["accuracy.judge.mean"] == "3.33"
    assert run_a["accuracy.judge.answered_mean"] == "3.8"
    assert run_a["accuracy.judge.coverage"] == "0.833"
    assert (run_a["accuracy.human.n"], run_a["accuracy.human.failed"]) == ("6", "0")
    assert run_a["accuracy.human.coverage"] == "1.0"


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
    records = {r["model"]: r for r in map(json.loads, response.content.decode().splitlines())}
    a = records["model-a"]
    assert a["tag"] == "easy" and a["judge"] == "quality" and a["scoring"] == "strict"
    assert a["subjects"]["accuracy"]["judge"]["mean"] == pytest.approx(11 / 3)
    assert a["subjects"]["accuracy"]["judge"]["n"] == 3
    # k5 has no clarity score: strict counts it at 1, answered-only leaves it out.
    clarity = a["subjects"]["clarity"]["judge"]
    assert clarity["mean"] == clarity["strict_mean"] == pytest.approx((4 + 4 + 1) / 3)
    assert clarity["answered_mean"] == 4.0 and clarity["coverage"] == pytest.approx(2 / 3)


# ---- each export says what it is (issue #11.7) ---------------------------------------------
def board_rows(client, **query) -> list[dict[str, str]]:
    response = client.get(
        reverse("leaderboards:task-export", args=["demo"]), {**query, "format": "csv"}
    )
    return read_csv(response)


def test_board_csv_names_what_each_judge_run_judged(board_data, viewer_client):
    rows = {int(r["run_id"]): r for r in board_rows(viewer_client)}
    run_a, gen_a = board_data["run_a"], board_data["gen_a"]
    assert rows[run_a.pk]["judged_run_id"] == str(gen_a.pk)
    assert rows[run_a.pk]["judged_column"] == ""
    column_run = f.make_judge_run(
        board_data["dataset"], board_data["judge"], source_column="answer"
    )
    f.add_scores(column_run, {"k0": {"accuracy": 3, "clarity": 3}})
    rows = {int(r["run_id"]): r for r in board_rows(viewer_client)}
    assert (rows[column_run.pk]["judged_run_id"], rows[column_run.pk]["judged_column"]) == (
        "",
        "answer",
    )


def test_each_view_exports_what_it_shows(board_data, reviewer_user, viewer_client):
    f.score(board_data["run_a"], "k3", "accuracy").override(4, reviewer_user, "judge failed")
    both, human, judge = (
        board_rows(viewer_client, values=v, scoring="answered") for v in ("both", "human", "judge")
    )
    assert len({tuple(both[0]), tuple(human[0]), tuple(judge[0])}) == 3
    assert "accuracy.judge.mean" in both[0] and "accuracy.human.mean" in both[0]
    assert not any(".judge." in c or c == "overall.judge" for c in human[0])
    assert not any(".human." in c or c == "overall.human" for c in judge[0])
    run_a = str(board_data["run_a"].pk)
    (a_human,) = [r for r in human if r["run_id"] == run_a]
    (a_judge,) = [r for r in judge if r["run_id"] == run_a]
    # The override of k3 (4) enters the human mean only: (5+4+3+4+5+2)/6 = 3.83 vs 3.80.
    assert (a_human["accuracy.human.mean"], a_judge["accuracy.judge.mean"]) == ("3.83", "3.8")


def test_board_csv_records_the_judge_and_weights_it_was_built_with(board_data, viewer_client):
    rows = board_rows(viewer_client, **{"w.clarity": "0", "tag": "easy"})
    assert {r["judge"] for r in rows} == {"quality v1"}
    assert {r["tag"] for r in rows} == {"easy"}
    assert {(r["accuracy.weight"], r["clarity.weight"]) for r in rows} == {("1.0", "0.0")}
    assert {r["clarity.direction"] for r in rows} == {"higher is better"}


def test_board_csv_rounds_to_what_the_page_shows(board_data, viewer_client):
    rows = board_rows(viewer_client, scoring="answered")
    a = next(r for r in rows if r["run_id"] == str(board_data["run_a"].pk))
    # accuracy, human = judge values here: 19/5 = 3.8 exactly; overall 72.5; the CI ends
    # have at most two decimals, like the page's "[3.00, 4.60]".
    assert a["accuracy.human.mean"] == "3.8" and a["overall.human"] == "72.5"
    for column in ("overall.human.ci_low", "accuracy.human.ci_low", "clarity.judge.ci_high"):
        assert len(a[column].partition(".")[2]) <= 2, (column, a[column])


def make_round(run, key: str, reason: str, number: int = 0) -> None:
    item = run.dataset.items.get(key=key)
    JudgeRound.objects.create(run=run, item=item, round=number, status="ok", reason=reason)


def test_run_csv_carries_the_judges_reason_per_subject(board_data, viewer_client):
    run = board_data["run_a"]
    make_round(run, "k0", "accuracy: names the right year\nclarity: one long sentence")
    make_round(run, "k1", "Correct and short.")
    make_round(run, "k2", "accuracy: off by one", number=0)
    make_round(run, "k2", "accuracy: wrong unit", number=1)
    rows = {r["key"]: r for r in read_csv(run_export(viewer_client, run))}
    assert rows["k0"]["accuracy.judge_reason"] == "names the right year"
    assert rows["k0"]["clarity.judge_reason"] == "one long sentence"
    # One reason for the whole reply belongs to every subject.
    assert rows["k1"]["accuracy.judge_reason"] == rows["k1"]["clarity.judge_reason"]
    assert rows["k1"]["clarity.judge_reason"] == "Correct and short."
    assert rows["k2"]["accuracy.judge_reason"] == "round 1: off by one\nround 2: wrong unit"
    assert rows["k3"]["accuracy.judge_reason"] == ""
    record = next(
        json.loads(line)
        for line in b"".join(run_export(viewer_client, run, "jsonl").streaming_content)
        .decode()
        .splitlines()
        if json.loads(line)["key"] == "k0"
    )
    assert record["scores"]["clarity"]["judge_reason"] == "one long sentence"


def test_run_csv_of_a_judged_column_has_one_response_column(board_data, viewer_client):
    run = f.make_judge_run(board_data["dataset"], board_data["judge"], source_column="answer")
    f.add_scores(run, {"k0": {"accuracy": 3, "clarity": 3}})
    response = run_export(viewer_client, run)
    text = b"".join(response.streaming_content).decode()
    header = next(csv.reader(io.StringIO(text[1:])))
    assert header[:4] == ["key", "position", "question", "response"]
    assert "answer" not in header
    rows = list(csv.DictReader(io.StringIO(text[1:])))
    assert rows[0]["response"] == "a0"
    record = json.loads(
        b"".join(run_export(viewer_client, run, "jsonl").streaming_content).splitlines()[0]
    )
    assert record["fields"] == {"question": "q0"} and record["response"] == "a0"


def test_run_csv_rounds_values_to_what_the_results_page_shows(board_data, viewer_client):
    run = board_data["run_a"]
    Score.objects.filter(run=run, item__key="k0", subject="accuracy").update(
        judge_value=10 / 3, final_value=10 / 3
    )
    rows = {r["key"]: r for r in read_csv(run_export(viewer_client, run))}
    assert rows["k0"]["accuracy.judge"] == "3.333"
    assert rows["k0"]["accuracy.final"] == "3.333"
    assert rows["k1"]["accuracy.judge"] == "4.0"


def test_run_csv_carries_blind_entries(board_data, reviewer_user, viewer_client):
    score = f.score(board_data["run_a"], "k0", "accuracy")
    BlindEntry.objects.create(score=score, user=reviewer_user, value=2)
    rows = {r["key"]: r for r in read_csv(run_export(viewer_client, board_data["run_a"]))}
    assert rows["k0"]["accuracy.blind"] == f"{reviewer_user.username}: 2"
    assert rows["k1"]["accuracy.blind"] == ""


def _every_kind_of_cell(reviewer) -> "f.Run":
    """A judge run whose export holds every kind of cell: hostile text in keys, fields,
    responses, reasons, usernames; numbers, lists, None and text with newlines in fields; an
    override, a confirm, a failed and a missing score; per-subject, whole-reply and several
    rounds' reasons; blind entries; the first epoch's response of a generation run with two."""
    from tests.base import make_user

    task = f.make_task("bytes")
    rows = [
        {"key": "=k0", "fields": {"q": "-1+1", "n": 3, "l": [1, "@a"], "z": None}},
        {"key": "k1", "fields": {"q": 'two\nlines, "quoted"', "n": -2.5, "l": [], "z": "中文"}},
        {"key": "k2", "fields": {"q": "@x", "n": 0, "l": {"a": 1}, "z": ""}},
        {"key": "k3", "fields": {"q": "plain", "n": True, "l": None, "z": "+y"}},
    ]
    dataset = f.make_dataset(task, rows, columns=["q", "n", "l", "z"], name="set")
    gen = f.make_generation_run(
        dataset,
        {"=k0": ["+first, epoch 0", "second"], "k1": ["a\nb", None], "k2": [None, "late"]},
        label="m",
    )
    judge = f.make_judge(task, name="quality")
    run = f.make_judge_run(dataset, judge, source_run=gen)
    f.add_scores(
        run,
        {
            "=k0": {"accuracy": [5, 4, 5], "clarity": 10 / 3},
            "k1": {"accuracy": None, "clarity": 2},
            "k2": {"accuracy": 1},
        },
    )
    f.score(run, "=k0", "accuracy").override(1.5, reviewer, "=HYPERLINK(x)")
    f.score(run, "k1", "clarity").confirm(reviewer)
    items = {i.key: i for i in dataset.items.all()}
    for key, number, reason in (
        ("=k0", 0, "accuracy: +right\nmore\nclarity: @long"),
        ("k1", 0, "-One reason"),
        ("k2", 0, "accuracy: off"),
        ("k2", 1, "accuracy: wrong"),
    ):
        JudgeRound.objects.create(
            run=run, item=items[key], round=number, status="ok", reason=reason
        )
    other = make_user("reviewer", "@odd")
    BlindEntry.objects.create(score=f.score(run, "=k0", "accuracy"), user=reviewer, value=2)
    BlindEntry.objects.create(score=f.score(run, "=k0", "accuracy"), user=other, value=10 / 3)
    BlindEntry.objects.create(score=f.score(run, "k2", "accuracy"), user=other, value=1)
    return run


def test_run_export_bytes(db, reviewer_user):
    """The exact bytes of a run's CSV and JSONL: a faster way of reading the same rows must
    write the same files. (PostgreSQL's jsonb orders an item's fields its own way.)"""
    from apps.leaderboards import exports

    run = _every_kind_of_cell(reviewer_user)
    assert "".join(exports.results_csv(run)) == CSV_BYTES
    jsonl = "".join(exports.results_jsonl(run))
    if connection.vendor == "sqlite":
        assert jsonl == JSONL_BYTES
    assert [json.loads(line) for line in jsonl.splitlines()] == [
        json.loads(line) for line in JSONL_BYTES.splitlines()
    ]


CSV_BYTES = "\r\n".join(
    [
        "\ufeffkey,position,q,n,l,z,response,accuracy.judge,accuracy.final,accuracy.status,accuracy.judge_reason,accuracy.review,accuracy.override_reason,accuracy.reviewer,accuracy.blind,accuracy.rounds,accuracy.error,clarity.judge,clarity.final,clarity.status,clarity.judge_reason,clarity.review,clarity.override_reason,clarity.reviewer,clarity.blind,clarity.rounds,clarity.error",
        '\'=k0,0,\'-1+1,3,"[1, ""@a""]",,"\'+first, epoch 0",4.667,1.5,ok,"\'+right\nmore",overridden,\'=HYPERLINK(x),reviewer,\'@odd: 3.333; reviewer: 2,"[5.0, 4.0, 5.0]",,3.333,3.333,ok,\'@long,,,,,[3.3333333333333335],',
        'k1,1,"two\nlines, ""quoted""",-2.5,[],中文,"a\nb",,,failed,\'-One reason,,,,,[null],unparseable: no JSON in the reply,2.0,2.0,ok,\'-One reason,confirmed,,reviewer,,[2.0],',
        'k2,2,\'@x,0,"{""a"": 1}",,,1.0,1.0,ok,"round 1: off\nround 2: wrong",,,,\'@odd: 1,[1.0],,,,,,,,,,,',
        "k3,3,plain,true,,'+y,,,,,,,,,,,,,,,,,,,,,",
        "",
    ]
)
JSONL_BYTES = "".join(
    [
        '{"key": "=k0", "position": 0, "fields": {"q": "-1+1", "n": 3, "l": [1, "@a"], "z": null}, "response": "+first, epoch 0", "scores": {"accuracy": {"judge": 4.666666666666667, "final": 1.5, "status": "ok", "judge_reason": "+right\\nmore", "review": "overridden", "override_reason": "=HYPERLINK(x)", "reviewer": "reviewer", "blind": [{"user": "@odd", "value": 3.3333333333333335}, {"user": "reviewer", "value": 2.0}], "rounds": [5.0, 4.0, 5.0], "error": ""}, "clarity": {"judge": 3.3333333333333335, "final": 3.3333333333333335, "status": "ok", "judge_reason": "@long", "review": "", "override_reason": "", "reviewer": "", "blind": [], "rounds": [3.3333333333333335], "error": ""}}}\n',
        '{"key": "k1", "position": 1, "fields": {"q": "two\\nlines, \\"quoted\\"", "n": -2.5, "l": [], "z": "中文"}, "response": "a\\nb", "scores": {"accuracy": {"judge": null, "final": null, "status": "failed", "judge_reason": "-One reason", "review": "", "override_reason": "", "reviewer": "", "blind": [], "rounds": [null], "error": "unparseable: no JSON in the reply"}, "clarity": {"judge": 2.0, "final": 2.0, "status": "ok", "judge_reason": "-One reason", "review": "confirmed", "override_reason": "", "reviewer": "reviewer", "blind": [], "rounds": [2.0], "error": ""}}}\n',
        '{"key": "k2", "position": 2, "fields": {"q": "@x", "n": 0, "l": {"a": 1}, "z": ""}, "response": "", "scores": {"accuracy": {"judge": 1.0, "final": 1.0, "status": "ok", "judge_reason": "round 1: off\\nround 2: wrong", "review": "", "override_reason": "", "reviewer": "", "blind": [{"user": "@odd", "value": 1.0}], "rounds": [1.0], "error": ""}, "clarity": null}}\n',
        '{"key": "k3", "position": 3, "fields": {"q": "plain", "n": true, "l": null, "z": "+y"}, "response": null, "scores": {"accuracy": null, "clarity": null}}\n',
    ]
)
