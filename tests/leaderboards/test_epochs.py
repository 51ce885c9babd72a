"""Repeated generations on the board (#18.5): mean over epochs, pass@k (unbiased estimator)
and majority vote, CIs over items (clustered by item), flaky items, and the same numbers in
the page, the CSV and the CLI."""

import csv
import io
import json
import math

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from scipy import special
from scipy import stats as scipy_stats

from apps.judges.models import Score, judge_of
from apps.leaderboards import boards
from apps.leaderboards.boards import Params
from apps.leaderboards.epochs import (
    Reduction,
    epoch_matrix,
    majority,
    majority_rows,
    pass_at_k,
    pass_values,
    passing,
    reduce,
)
from apps.leaderboards.stats import clustered_se
from tests import factories as f
from tests.base import make_user

SUBJECT = [{"name": "correct", "min": 0, "max": 100}]
# Per item, each epoch's value: A is right on i1 once and on i3 twice; B all or nothing.
EPOCHS = {
    "A": {"k0": [100, 100, 100], "k1": [100, 0, 0], "k2": [0, 0, 0], "k3": [100, 100, 0]},
    "B": {"k0": [100, 100, 100], "k1": [100, 100, 100], "k2": [0, 0, 0], "k3": [0, 0, 0]},
}


# ---- the estimators, pinned ------------------------------------------------------------------
def reference_pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n − c, k) / C(n, k), by scipy's exact binomial coefficients."""
    return 1 - special.comb(n - c, k, exact=True) / special.comb(n, k, exact=True)


def test_pass_at_k_matches_hand_values_and_the_binomial_formula() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # c / n
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 − C(3,2)/C(5,2) = 1 − 3/10
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)  # 1 − C(2,2)/C(3,2)
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 2, 2) == 1.0  # n − c < k
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(reference_pass_at_k(n, c, k), abs=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_majority_breaks_ties_to_the_worse_value() -> None:
    assert majority([1, 5, 5], 1, 5) == 5
    assert majority([0, 100], 0, 100) == 0  # a tie: the worse value
    assert majority([2, 4], 5, 1) == 4  # lower is better: the worse is the higher
    assert majority([3, 4, 4, 3], None, None) == 3  # no range: the lower


def test_reduce_puts_pass_at_k_on_the_subjects_scale() -> None:
    two = Reduction("pass", 2)
    assert reduce([100, 0, 0], two, 0, 100) == pytest.approx(100 * 2 / 3)
    assert reduce([5, 3, 1], two, 1, 5) == pytest.approx(1 + 4 * 2 / 3)  # 1–5: 5 passes
    # Lower is better: 1 passes (one epoch of three), 2/3 of the way from 5 down to 1.
    assert reduce([1, 5, 5], two, 5, 1) == pytest.approx(5 - 4 * 2 / 3)
    assert math.isnan(reduce([3, 4], two, None, None))  # no range, no passing value
    assert math.isnan(reduce([100], two, 0, 100))  # fewer epochs than k
    assert reduce([100, 0, 0], Reduction("majority"), 0, 100) == 0
    assert reduce([100, 0, 0], Reduction(), 0, 100) == pytest.approx(100 / 3)
    assert [Reduction.parse(t).query for t in ("pass@3", "MAJORITY", "pass@0", "x", None)] == [
        "pass@3",
        "majority",
        "mean",
        "mean",
        "mean",
    ]


@pytest.mark.parametrize("worst,best", [(1, 5), (5, 1), (0, 100), (None, None)])
def test_whole_runs_reduce_as_one_item_does(worst, best) -> None:
    """The arrays a judge run stores (#33.2) give, item by item, what `reduce` gives: random
    epochs of 1–5 or 0/100 values, 1 to 5 of them, some without a value (left out)."""
    rng = np.random.default_rng(33)
    scale = [0.0, 100.0] if worst == 0 else [1.0, 2.0, 3.0, 4.0, 5.0]
    rows = []
    for _ in range(600):
        row = [float(rng.choice(scale)) for _ in range(int(rng.integers(1, 6)))]
        if rng.random() < 0.1:
            row[int(rng.integers(len(row)))] = None
        rows.append(row)
    rows.append([None, None])  # no epoch with a value
    matrix = epoch_matrix(rows)
    assert matrix.shape == (601, 5)
    present = [[v for v in row if v is not None] for row in rows]
    got = majority_rows(matrix, worst, best, chunk=64)
    for values, value in zip(present, got.tolist(), strict=True):
        want = reduce(values, Reduction("majority"), worst, best) if values else math.nan
        assert value == want or (math.isnan(want) and math.isnan(value)), values
    counted = (~np.isnan(matrix)).sum(axis=1)
    for k in (1, 2, 3):
        got = pass_values(counted, passing(matrix, best), k, worst, best)
        for values, value in zip(present, got.tolist(), strict=True):
            want = reduce(values, Reduction("pass", k), worst, best) if values else math.nan
            assert value == want or (math.isnan(want) and math.isnan(value)), (values, k)
    same = epoch_matrix([[1.0, 2.0], [3.0, None]])  # one width: a single conversion
    np.testing.assert_array_equal(same, [[1.0, 2.0], [3.0, math.nan]])


# ---- the board ----------------------------------------------------------------------------------
@pytest.fixture
def board_task(db):
    task = f.make_task("epochs")
    dataset = f.make_items(task, 4)
    judge = f.make_judge(task, name="exact", subjects=SUBJECT)
    runs = {}
    for label, values in EPOCHS.items():
        generation = f.make_generation_run(dataset, {k: ["…"] * 3 for k in values}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {k: {"correct": v} for k, v in values.items()})
        runs[label] = run
    return task, runs


def cell(board: boards.Board, label: str, mode: str = "human") -> boards.Cell:
    row = next(r for r in board.rows if r.label == label)
    return row.cells[mode]["correct"]


def overall(board: boards.Board, label: str) -> float | None:
    return next(r for r in board.rows if r.label == label).overall["human"]


def build(task, epochs: str = "mean") -> boards.Board:
    return boards.build(task, Params(epochs=Reduction.parse(epochs)))


@pytest.mark.django_db
def test_each_reduction_gives_its_hand_computed_means(board_task) -> None:
    task, _ = board_task
    mean = build(task)
    assert mean.epochs == 3 and mean.fewest_epochs == 3
    # A: (100 + 33.3 + 0 + 66.7) / 4; B: (100 + 100 + 0 + 0) / 4.
    assert cell(mean, "A").mean == pytest.approx(50) and cell(mean, "B").mean == pytest.approx(50)
    majority_board = build(task, "majority")  # A: 100, 0, 0, 100
    assert cell(majority_board, "A").mean == pytest.approx(50)
    pass1 = build(task, "pass@1")  # c / n per item: the mean, as a pass rate
    assert cell(pass1, "A").mean == pytest.approx(50)
    pass2 = build(task, "pass@2")  # A: 1, 2/3, 0, 1
    assert cell(pass2, "A").mean == pytest.approx(100 * (1 + 2 / 3 + 0 + 1) / 4)
    assert cell(pass2, "B").mean == pytest.approx(50)
    assert overall(pass2, "A") == pytest.approx(cell(pass2, "A").mean)
    assert [row.label for row in pass2.rows] == ["A", "B"]
    pass3 = build(task, "pass@3")  # A: 1, 1, 0, 1
    assert cell(pass3, "A").mean == pytest.approx(75)
    assert "pass@2 of its epochs" in pass2.overall_formula
    # n is items, not items × epochs: the interval is over items.
    assert cell(pass2, "A").n == 4 and cell(mean, "A").n == 4


@pytest.mark.django_db
def test_pass_at_k_beyond_the_fewest_epochs_is_capped(board_task) -> None:
    task, _ = board_task
    board = build(task, "pass@7")
    assert board.reduction == Reduction("pass", 3)
    assert cell(board, "A").mean == pytest.approx(75)


def test_the_item_mean_interval_is_the_epoch_level_interval_clustered_by_item() -> None:
    """Why per-item values make CIs clustered by item: with equal epochs per item, the
    cluster-robust (CR1) standard error of the epoch-level mean, items as clusters, is the
    plain standard error of the item means."""
    epochs = np.array([v for item in EPOCHS["A"].values() for v in item], dtype=float)
    clusters = np.repeat(np.arange(4), 3)
    item_means = epochs.reshape(4, 3).mean(axis=1)
    assert clustered_se(epochs, clusters) == pytest.approx(scipy_stats.sem(item_means))
    naive = scipy_stats.sem(epochs)
    assert naive < scipy_stats.sem(item_means)  # treating epochs as independent: too narrow


@pytest.mark.django_db
def test_an_override_is_the_items_value_under_every_reduction(board_task) -> None:
    task, runs = board_task
    admin = make_user("admin")
    f.score(runs["A"], "k2", "correct").override(100, admin, "right after all")
    pass2 = build(task, "pass@2")  # A: 1, 2/3, 1 (override), 1
    assert cell(pass2, "A").mean == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert cell(pass2, "A", "judge").mean == pytest.approx(100 * (2 + 2 / 3) / 4)
    assert cell(build(task, "majority"), "A").mean == pytest.approx(75)


@pytest.mark.django_db
def test_flaky_items_are_counted_and_listed(board_task) -> None:
    task, runs = board_task
    board = build(task)
    assert board.flaky == {runs["A"].pk: 2, runs["B"].pk: 0}
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(reverse("leaderboards:task", args=[task.slug]), {"epochs": "pass@2"})
    html = page.content.decode()
    assert 'id="epochs-toggle"' in html and 'id="epochs-pass@2" aria-current="true"' in html
    assert f'href="/judges/runs/{runs["A"].pk}/results/?flaky=1">A: 2</a>' in html
    listed = client.get(reverse("judges:results", args=[runs["A"].pk]), {"flaky": "1"})
    assert [row.item.key for row in listed.context["rows"]] == ["k1", "k3"]


@pytest.mark.django_db
def test_a_board_without_epochs_offers_no_epoch_toggle(db) -> None:
    task = f.make_task("single")
    dataset = f.make_items(task, 2)
    judge = f.make_judge(task, name="exact", subjects=SUBJECT)
    run = f.make_judge_run(dataset, judge, source_run=f.make_generation_run(dataset, {}))
    f.add_scores(run, {"k0": {"correct": 100}, "k1": {"correct": 0}})
    client = Client()
    client.force_login(make_user("viewer"))
    html = client.get(reverse("leaderboards:task", args=[task.slug])).content.decode()
    assert "epochs-toggle" not in html and "Flaky" not in html


@pytest.mark.django_db
def test_csv_and_cli_carry_the_reduction_the_epochs_and_the_flaky_count(board_task, capsys) -> None:
    task, _ = board_task
    call_command("leaderboard", task.slug, "--epochs", "pass@2", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out.lstrip("\ufeff"))))
    by_model = {row["model"]: row for row in rows}
    assert float(by_model["A"]["correct.human.mean"]) == pytest.approx(100 * (8 / 3) / 4, abs=0.005)
    assert by_model["A"]["epoch_reduction"] == "pass@2"
    assert (by_model["A"]["epochs"], by_model["A"]["flaky_items"]) == ("3", "2")
    assert by_model["B"]["flaky_items"] == "0"
    call_command("leaderboard", task.slug, "--epochs", "majority")
    text = capsys.readouterr().out
    assert (
        "majority vote of its epochs" in text and "Flaky items (epochs disagree): A 2, B 0" in text
    )
    with pytest.raises(Exception, match="--epochs takes mean, majority or pass@K"):
        call_command("leaderboard", task.slug, "--epochs", "best")


@pytest.mark.django_db
def test_a_model_with_one_epoch_keeps_pass_at_k_for_the_others(board_task, capsys) -> None:
    """#29.10: a model with one answer per item beside models with three. The board used to
    fall back to pass@1 for every model; now A and B keep their own pass@2 (the hand values of
    `test_each_reduction_gives_its_hand_computed_means`) and C, which cannot have pass@2,
    shows its pass@1 marked as such on the page, in the CSV and the CLI."""
    task, runs = board_task
    dataset = runs["A"].dataset
    single = f.make_judge_run(
        dataset, judge_of(runs["A"]), source_run=f.make_generation_run(dataset, {}), label="C"
    )
    f.add_scores(single, {"k0": {"correct": 100}, "k1": {"correct": 0}, "k2": {"correct": 100}})
    board = build(task, "pass@2")
    assert board.fewest_epochs == 1 and board.reduction == Reduction("pass", 2)
    assert cell(board, "A").mean == pytest.approx(100 * (1 + 2 / 3 + 0 + 1) / 4)
    assert cell(board, "B").mean == pytest.approx(50)
    assert board.short_epochs == {single.pk: Reduction("pass", 1)}
    # Strict: C's missing k3 counts at the worst value.
    assert cell(board, "C").mean == pytest.approx(50) and cell(board, "C").missing == 1
    assert Score.objects.filter(run=single, epoch_spread__gt=0).count() == 0
    client = Client()
    client.force_login(make_user("viewer"))
    html = client.get(reverse("leaderboards:task", args=[task.slug]), {"epochs": "pass@2"})
    page = html.content.decode()
    assert f'class="short-epochs" data-run="{single.pk}"' in page
    assert page.count('class="short-epochs"') == 1
    assert 'id="short-epochs"' in page and "C has 1 epoch and shows pass@1" in page
    call_command("leaderboard", task.slug, "--epochs", "pass@2", "--format", "csv")
    rows = {
        r["model"]: r for r in csv.DictReader(io.StringIO(capsys.readouterr().out.lstrip("\ufeff")))
    }
    assert {m: r["model_epoch_reduction"] for m, r in rows.items()} == {
        "A": "pass@2",
        "B": "pass@2",
        "C": "pass@1",
    }
    assert {r["epoch_reduction"] for r in rows.values()} == {"pass@2"}
    call_command("leaderboard", task.slug, "--epochs", "pass@2")
    assert "C has 1 epoch and shows pass@1" in capsys.readouterr().out


@pytest.mark.django_db
def test_the_response_export_has_a_row_per_epoch(db) -> None:
    task = f.make_task("export")
    dataset = f.make_items(task, 2)
    generation = f.make_generation_run(dataset, {"k0": ["a0", "=b0", None], "k1": ["a1"] * 3})
    client = Client()
    client.force_login(make_user("viewer"))
    url = reverse("leaderboards:run-export", args=[generation.pk])
    body = b"".join(client.get(url, {"format": "csv"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body.lstrip("\ufeff"))))
    assert [(r["key"], r["epoch"], r["response"], r["status"]) for r in rows] == [
        ("k0", "1", "a0", "ok"),
        ("k0", "2", "'=b0", "ok"),
        ("k0", "3", "", "failed"),
        ("k1", "1", "a1", "ok"),
        ("k1", "2", "a1", "ok"),
        ("k1", "3", "a1", "ok"),
    ]
    lines = b"".join(client.get(url, {"format": "jsonl"}).streaming_content).decode().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3, 1, 2, 3]
