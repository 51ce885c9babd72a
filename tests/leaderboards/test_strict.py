"""Failed items never help a model (#18.1): strict scoring counts a failed or missing item at
its subject's worst value and is the board's default; the answered-only mean and the coverage
stay beside it, on the page, in the CSV/JSONL and in the CLI."""

import csv
import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.leaderboards import boards
from apps.leaderboards.boards import Params, SubjectInfo, score_cell
from apps.leaderboards.stats import Dist
from tests import factories as f

pytestmark = pytest.mark.django_db

N = 240
HARD = range(8)  # the items the flaky model failed; the steady one scored them 2 of 5


@pytest.fixture
def same_answers():
    """Two models with the same answers, judged the same; `flaky` failed 8 of 240 items."""
    task = f.make_task("strict")
    dataset = f.make_items(task, N)
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    runs = {}
    for label in ("steady", "flaky"):
        generation = f.make_generation_run(
            dataset, {f"k{i}": "same" for i in range(N)}, label=label
        )
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        values = {}
        for i in range(N):
            failed = label == "flaky" and i in HARD
            values[f"k{i}"] = {"accuracy": None if failed else (2 if i in HARD else 5)}
        f.add_scores(run, values)
        runs[label] = run
    return task, runs


def test_the_failing_model_ranks_lower_by_default(same_answers, viewer_client, capsys) -> None:
    task, runs = same_answers
    board = boards.build(task, Params())
    steady, flaky = (next(r for r in board.rows if r.run == runs[k]) for k in ("steady", "flaky"))
    assert [r.label for r in board.rows] == ["steady", "flaky"]
    cell = flaky.cells["human"]["accuracy"]
    # Strict: 232 × 5 + 8 × 1 (the worst value) over all 240; answered only: 232 × 5 / 232.
    assert cell.mean == cell.strict_mean == pytest.approx((232 * 5 + 8) / 240)
    assert cell.answered_mean == 5.0 and cell.coverage == pytest.approx(232 / 240)
    assert (cell.n, cell.failed, cell.answered) == (240, 8, 232)
    assert steady.cells["human"]["accuracy"].mean == pytest.approx((232 * 5 + 8 * 2) / 240)
    # The page ranks the same way and offers the other scoring as one click.
    url = reverse("leaderboards:task", args=[task.slug])
    html = viewer_client.get(url).content.decode()
    order = [int(pk) for pk in re.findall(r'<tr data-run="(\d+)">', html)]
    assert order == [runs["steady"].pk, runs["flaky"].pk]
    assert 'id="scoring-strict" aria-current="true"' in html
    assert re.search(r'<a id="scoring-answered" href="\?[^"]*scoring=answered', html)
    # The CSV: rank, strict and answered means, coverage, and how it was scored.
    export = viewer_client.get(
        reverse("leaderboards:task-export", args=[task.slug]), {"format": "csv"}
    )
    rows = list(csv.DictReader(io.StringIO(export.content.decode().lstrip("\ufeff"))))
    assert [(r["rank"], r["model"]) for r in rows] == [("1", "steady"), ("2", "flaky")]
    assert rows[1]["accuracy.human.strict_mean"] == "4.87"
    assert rows[1]["accuracy.human.answered_mean"] == "5.0"
    assert rows[1]["accuracy.human.coverage"] == "0.967"
    assert {r["scoring"] for r in rows} == {"strict"}
    # The CLI.
    call_command("leaderboard", task.slug)
    out = capsys.readouterr().out
    ranked = [line.split()[:3] for line in out.splitlines() if re.match(r"\d+ ", line)]
    # Position, tied rank, model: the 8 items steady scored 2 and flaky failed tell them apart.
    assert ranked == [["1", "1", "steady"], ["2", "2", "flaky"]]
    assert "At the worst value in the means of flaky: accuracy: 8 failed" in out


def test_answered_only_is_one_click_and_shows_why_strict_is_the_default(
    same_answers, viewer_client
) -> None:
    task, _ = same_answers
    board = boards.build(task, Params(scoring="answered"))
    assert [r.label for r in board.rows] == ["flaky", "steady"]  # failing helped: the trap
    html = viewer_client.get(
        reverse("leaderboards:task", args=[task.slug]), {"scoring": "answered"}
    ).content.decode()
    assert 'id="scoring-answered" aria-current="true"' in html
    # The filter form keeps the choice when another setting changes.
    assert '<input type="hidden" name="scoring" value="answered">' in html


def test_worst_follows_direction_and_needs_a_range() -> None:
    dist = Dist.of([10.0, 20.0])
    lower_better = SubjectInfo("latency", "Latency", "ms", 0.0, 100.0, higher_is_better=False)
    cell = score_cell(dist, failed=1, missing=1, overridden=0, info=lower_better, scoring="strict")
    assert cell.mean == pytest.approx((10 + 20 + 100 + 100) / 4)  # the worst is the top
    assert cell.answered_mean == 15.0 and cell.coverage == 0.5
    no_range = SubjectInfo("tokens", "tokens", "", None, None, higher_is_better=True)
    cell = score_cell(dist, failed=1, missing=0, overridden=0, info=no_range, scoring="strict")
    assert cell.strict_mean is None and cell.mean == 15.0  # no worst value: answered only
    assert cell.n == 2 and cell.coverage == pytest.approx(2 / 3)
    nothing = score_cell(Dist(), 0, 0, 0, lower_better, "strict")
    assert (nothing.mean, nothing.coverage) == (None, None)


def test_tag_tables_score_the_same_way(board_data) -> None:
    # model-a on the items tagged "hard": k2 scored 3, k3 failed.
    def hard_cell(scoring: str) -> dict:
        board = boards.build(board_data["task"], Params(scoring=scoring))
        column = [r.run for r in board.rows].index(board_data["run_a"])
        (row,) = [row for row in board.tag_rows if row["tag"] == "hard"]
        return row["cells"][column]

    strict, answered = hard_cell("strict"), hard_cell("answered")
    assert (strict["mean"], strict["n"], strict["answered"]) == (2.0, 2, 1)
    assert (answered["mean"], answered["n"], answered["failed"]) == (3.0, 1, 1)
