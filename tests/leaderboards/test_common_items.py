"""Models are compared on the same items (#18.2): when models cover different item sets
(dataset versions, or failures when answered only), the board says so and offers "common items
only"; the per-tag table follows the same rule."""

import csv
import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.leaderboards import boards
from apps.leaderboards.boards import Coverage, Params
from tests import factories as f

pytestmark = pytest.mark.django_db

SUBJECTS = [{"name": "accuracy", "min": 1, "max": 5}]


def rows(keys: list[str], tags: dict[str, list[str]]) -> list[dict]:
    return [{"key": k, "fields": {"question": k}, "tags": tags.get(k, [])} for k in keys]


@pytest.fixture
def two_versions():
    """A on v1 (k0–k5), B on v2 (k0–k3, k6, k7): four items in common.

    A: 5 on k0–k3, 1 on k4 k5 (all items 3.67, common 5); B: 4 on k0–k3, 5 on k6 k7 (all
    items 4.33, common 4). Tags: k0 k1 k4 k6 easy, k2 k3 hard.
    """
    task = f.make_task("versions")
    tags = {
        "k0": ["easy"],
        "k1": ["easy"],
        "k4": ["easy"],
        "k6": ["easy"],
        "k2": ["hard"],
        "k3": ["hard"],
    }
    v1 = f.make_dataset(task, rows([f"k{i}" for i in range(6)], tags), name="set-v1")
    v2 = f.make_dataset(task, rows(["k0", "k1", "k2", "k3", "k6", "k7"], tags), name="set-v2")
    judge = f.make_judge(task, name="quality", subjects=SUBJECTS)
    runs = {}
    for label, dataset, values in (
        ("A", v1, {"k0": 5, "k1": 5, "k2": 5, "k3": 5, "k4": 1, "k5": 1}),
        ("B", v2, {"k0": 4, "k1": 4, "k2": 4, "k3": 4, "k6": 5, "k7": 5}),
    ):
        generation = f.make_generation_run(dataset, {}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {k: {"accuracy": v} for k, v in values.items()})
        runs[label] = run
    return task, runs


def cell(board, label: str):
    row = next(r for r in board.rows if r.label == label)
    return row, row.cells["human"]["accuracy"]


def test_the_board_says_the_models_cover_different_items(two_versions) -> None:
    task, _ = two_versions
    board = boards.build(task, Params())
    assert board.coverage == Coverage([("B", 6), ("A", 6)], 4)
    assert [r.label for r in board.rows] == ["B", "A"]  # all items: 4.33 before 3.67
    assert cell(board, "A")[1].mean == pytest.approx(22 / 6)


def test_common_items_only_compares_like_with_like(two_versions) -> None:
    task, _ = two_versions
    board = boards.build(task, Params(common=True))
    assert [r.label for r in board.rows] == ["A", "B"]
    row_a, a = cell(board, "A")
    _, b = cell(board, "B")
    assert (a.mean, a.n, b.mean, b.n) == (5.0, 4, 4.0, 4)
    assert row_a.overall["human"] == pytest.approx(100.0)
    # Every common item at the top: not a point but Clopper–Pearson's 4 of 4 (#29.1).
    ci = row_a.overall_ci["human"]
    assert ci.method == "clopper-pearson" and (ci.low, ci.high) == pytest.approx(
        (100 * 0.025**0.25, 100.0)
    )
    # The tag table follows: "easy" on common items is k0 k1 only.
    easy = next(t for t in board.tag_rows if t["tag"] == "easy")
    assert [(c["mean"], c["n"]) for c in easy["cells"]] == [(5.0, 2), (4.0, 2)]


def test_answered_only_counts_failures_as_not_covered(db) -> None:
    task = f.make_task("fails")
    dataset = f.make_items(task, 4)
    judge = f.make_judge(task, name="quality", subjects=SUBJECTS)
    for label, values in (("A", [None, 5, 5, 5]), ("B", [1, 3, 3, 3])):
        generation = f.make_generation_run(dataset, {}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {f"k{i}": {"accuracy": v} for i, v in enumerate(values)})
    assert boards.build(task, Params()).coverage is None  # strict: same dataset, same items
    answered = boards.build(task, Params(scoring="answered"))
    assert answered.coverage == Coverage([("A", 3), ("B", 4)], 3)
    common = boards.build(task, Params(scoring="answered", common=True))
    assert cell(common, "B")[1].mean == 3.0  # k0, which A failed, left out for B too


def test_page_csv_and_cli_say_it(two_versions, viewer_client, capsys) -> None:
    task, _ = two_versions
    url = reverse("leaderboards:task", args=[task.slug])
    html = viewer_client.get(url).content.decode()
    assert 'id="coverage-note"' in html and "4 items all of them have" in html
    assert 'id="common-items" href="?common=1"' in html
    common = viewer_client.get(url, {"common": "1"}).content.decode()
    assert 'id="common-on"' in common
    assert '<input type="hidden" name="common" value="1">' in common
    export = viewer_client.get(
        reverse("leaderboards:task-export", args=[task.slug]), {"format": "csv", "common": "1"}
    )
    records = list(csv.DictReader(io.StringIO(export.content.decode().lstrip("\ufeff"))))
    assert [(r["model"], r["items"], r["accuracy.human.mean"]) for r in records] == [
        ("A", "common", "5.0"),
        ("B", "common", "4.0"),
    ]
    call_command("leaderboard", task.slug)
    assert "4 all of them have: add --common" in capsys.readouterr().out
    call_command("leaderboard", task.slug, "--common")
    assert "4 all of them have: common items only" in capsys.readouterr().out
