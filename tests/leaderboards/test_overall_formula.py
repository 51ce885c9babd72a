"""How the overall score is formed is said wherever it is shown (issue #11.3): a 0–100 overall
beside 1–5 subject means is otherwise a puzzle ("50.26 beside 3.04 and 2.98")."""

import csv
import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.leaderboards import boards
from tests import factories as f

FORMULA = (
    "Overall = weighted mean of the subjects' means, each rescaled to 0–100 by its range: "
    "(mean − min) / (max − min) × 100, or 100 minus that where lower is better. "
    "Failed and missing items count at each subject's worst value (strict). "
    "accuracy 1–5, higher is better, weight 2; clarity 1–5, higher is better, weight 1."
)


def board_page(client, **query) -> str:
    return client.get(reverse("leaderboards:task", args=["demo"]), query).content.decode()


def test_the_overall_is_the_weighted_mean_of_rescaled_means_by_hand(board_data):
    answered = boards.Params(values="judge", scoring="answered")
    board = boards.build(board_data["task"], answered)
    row = next(r for r in board.rows if r.run == board_data["run_a"])
    # model-a, judge-only, answered items: accuracy (5+4+3+5+2)/5 = 3.8 -> (3.8-1)/4*100 = 70;
    # clarity 4 on all five scored items -> 75; equal weights -> 72.5.
    assert row.overall["judge"] == pytest.approx(72.5)
    answered.weights = {"accuracy": 2}
    weighted = boards.build(board_data["task"], answered)
    row = next(r for r in weighted.rows if r.run == board_data["run_a"])
    assert row.overall["judge"] == pytest.approx((2 * 70 + 75) / 3)
    assert weighted.overall_formula == FORMULA.replace(
        "count at each subject's worst value (strict)",
        "are left out of the means (answered only)",
    )
    # Strict (the default): k3's failed accuracy counts as 1, k5's missing clarity as 1:
    # accuracy 20/6 -> 58.33, clarity 21/6 -> 62.5.
    strict = boards.build(
        board_data["task"], boards.Params(values="judge", weights={"accuracy": 2})
    )
    row = next(r for r in strict.rows if r.run == board_data["run_a"])
    assert row.overall["judge"] == pytest.approx((2 * (20 / 6 - 1) / 4 * 100 + 62.5) / 3)
    assert strict.overall_formula == FORMULA


def test_the_page_shows_the_formula_and_the_scale(board_data, viewer_client):
    html = board_page(viewer_client, **{"w.accuracy": "2"})
    found = re.search(r'<p id="overall-formula"[^>]*>(.*?)</p>', html, re.S)
    assert found and found.group(1).strip() == FORMULA.replace("'", "&#x27;")
    assert "Overall (0–100)" in html


def test_the_csv_and_the_cli_say_it_too(board_data, viewer_client, capsys):
    response = viewer_client.get(
        reverse("leaderboards:task-export", args=["demo"]),
        {"format": "csv", "w.accuracy": "2"},
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode().lstrip("\ufeff"))))
    assert {r["overall.formula"] for r in rows} == {FORMULA}
    assert {(r["accuracy.weight"], r["accuracy.min"], r["accuracy.max"]) for r in rows} == {
        ("2.0", "1.0", "5.0")
    }
    call_command("leaderboard", "demo")
    out = capsys.readouterr().out
    assert "overall (0–100)" in out
    # The CLI has no weights option: the formula it prints names weight 1 for both.
    assert FORMULA.replace("weight 2", "weight 1") in out


def test_without_declared_ranges_it_says_means_are_not_rescaled(db):
    task = f.make_task("plain")
    dataset = f.make_items(task, 2)
    judge = f.make_judge(
        task,
        name="quality",
        subjects=[{"name": "tokens"}, {"name": "accuracy", "min": 1, "max": 5}],
    )
    run = f.make_judge_run(dataset, judge, source_column="question")
    f.add_scores(run, {"k0": {"tokens": 10, "accuracy": 3}, "k1": {"tokens": 30, "accuracy": 5}})
    board = boards.build(task, boards.Params())
    assert not board.normalised
    assert "raw means, not rescaled" in board.overall_formula
    assert "tokens no declared range" in board.overall_formula
