"""Every pair, corrected (#18.3): all model pairs on the board's leading number, paired on the
same items, p-values adjusted for the number of pairs, and tied ranks."""

import csv
import io

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy import stats as scipy_stats

from apps.leaderboards import boards, pairs
from apps.leaderboards.boards import Params
from tests import factories as f

N = 60


def test_holm_by_hand() -> None:
    # Sorted 0.005 0.01 0.03 0.04 times 4 3 2 1 = 0.02 0.03 0.06 0.04, made monotone: 0.06.
    assert pairs.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert pairs.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_benjamini_hochberg_by_hand() -> None:
    # p·m/rank: 0.02 0.02 0.04 0.04 (sorted), each the minimum of those at or above it.
    adjusted = pairs.adjust([0.01, 0.04, 0.03, 0.005], "bh")
    assert adjusted == pytest.approx([0.02, 0.04, 0.04, 0.02])


@pytest.fixture
def three_models(db):
    """top: every item 5; close: 5 but two items 4 (not told apart from top); low: every item 2."""
    task = f.make_task("pairs")
    dataset = f.make_items(task, N)
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    runs = {}
    for label, value in (
        ("top", lambda i: 5),
        ("close", lambda i: 4 if i < 2 else 5),
        ("low", lambda i: 2),
    ):
        generation = f.make_generation_run(dataset, {}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {f"k{i}": {"accuracy": value(i)} for i in range(N)})
        runs[label] = run
    return task, runs


def test_tied_ranks_say_who_is_told_apart(three_models) -> None:
    task, _runs = three_models
    board = boards.build(task, Params())
    table = pairs.build(board)
    ranks = {row.label: table.ranks[row.run.pk] for row in board.rows}
    assert ranks == {"top": 1, "close": 1, "low": 3}
    by_names = {(p.a.label, p.b.label): p for p in table.pairs}
    top_close = by_names[("top", "close")]
    # Differences 1, 1 and 58 zeros, on the 0–100 overall (one subject on 1–5: × 25).
    diffs = np.array([25.0, 25.0] + [0.0] * (N - 2))
    assert top_close.n == N and top_close.mean_diff == pytest.approx(diffs.mean())
    # Every non-zero difference of one size: the permutation test is the exact sign test.
    assert (top_close.p, top_close.test) == (scipy_stats.binomtest(2, 2).pvalue, "sign")
    assert top_close.p == 0.5
    # Holm: the two other pairs have tiny p; the largest of three is multiplied by 1.
    assert top_close.p_adjusted == pytest.approx(top_close.p) and not top_close.better
    assert by_names[("top", "low")].better.label == "top"
    assert board.tied_ranks == table.ranks


def test_pairs_are_paired_tests_not_unpaired_ones(db) -> None:
    """Items differ a lot from each other but model a beats b by ~1 on every item: a paired
    test sees it at once, an unpaired one (on the same numbers) does not."""
    task = f.make_task("paired")
    dataset = f.make_items(task, 30)
    judge = f.make_judge(task, name="quality", subjects=[{"name": "score", "min": 0, "max": 100}])
    rng = np.random.default_rng(5)
    base = rng.integers(10, 90, size=30)
    a_values = base + 1 + rng.integers(0, 2, size=30)
    for label, values in (("a", a_values), ("b", base)):
        generation = f.make_generation_run(dataset, {}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {f"k{i}": {"score": int(v)} for i, v in enumerate(values)})
    board = boards.build(task, Params(sort="mean:score"))
    [pair] = pairs.build(board).pairs
    paired_p = scipy_stats.ttest_rel(a_values, base).pvalue
    unpaired_p = scipy_stats.ttest_ind(a_values, base).pvalue
    assert pair.p == pytest.approx(paired_p)
    assert pair.p < 1e-6 < 0.5 < unpaired_p


def test_pairs_csv_from_the_cli_and_the_web(three_models, viewer_client, capsys) -> None:
    task, _runs = three_models
    call_command("leaderboard", task.slug, "--pairs", "--format", "csv")
    printed = capsys.readouterr().out
    web = viewer_client.get(
        reverse("leaderboards:task-export", args=[task.slug]), {"format": "csv", "pairs": "1"}
    )
    assert printed == web.content.decode()
    rows = list(csv.DictReader(io.StringIO(printed.lstrip("\ufeff"))))
    assert len(rows) == 3 and {r["correction"] for r in rows} == {"holm"}
    low = next(r for r in rows if r["model_b"] == "low" and r["model_a"] == "top")
    assert low["significantly_better"] == "top" and float(low["mean_diff"]) == 75.0
    assert float(low["p_adjusted"]) >= float(low["p"])
    # Tiny p-values keep their digits (#28.6: they were written 0.0 beside "< 0.001").
    by_names = {(p.a.label, p.b.label): p for p in pairs.build(boards.build(task, Params())).pairs}
    exact = by_names[("top", "low")]
    assert 0 < exact.p < 1e-6 and float(low["p"]) == pytest.approx(exact.p, rel=1e-5)
    assert float(low["p_adjusted"]) == pytest.approx(exact.p_adjusted, rel=1e-5)
    call_command("leaderboard", task.slug, "--pairs", "--correction", "bh", "--format", "csv")
    assert "bh" in capsys.readouterr().out
    board_rows = list(
        csv.DictReader(
            io.StringIO(
                viewer_client.get(
                    reverse("leaderboards:task-export", args=[task.slug]), {"format": "csv"}
                )
                .content.decode()
                .lstrip("\ufeff")
            )
        )
    )
    assert {r["model"]: r["tied_rank"] for r in board_rows} == {
        "top": "1",
        "close": "1",
        "low": "3",
    }


def test_the_board_page_shows_tied_ranks_and_every_pair(three_models, viewer_client) -> None:
    task, runs = three_models
    html = viewer_client.get(reverse("leaderboards:task", args=[task.slug])).content.decode()
    for label, rank in (("top", 1), ("close", 1), ("low", 3)):
        assert f'data-run="{runs[label].pk}" data-stat="tied-rank">{rank}<' in html
    assert 'id="pairs-table"' in html and "Holm" in html
    bh = viewer_client.get(
        reverse("leaderboards:task", args=[task.slug]), {"correction": "bh"}
    ).content.decode()
    assert '<strong id="correction-bh">' in bh


def by_models(board) -> dict[frozenset, pairs.Pair]:
    return {frozenset((p.a.label, p.b.label)): p for p in pairs.build(board).pairs}


def test_an_override_reaches_the_pairs_at_once(three_models, reviewer_user) -> None:
    task, runs = three_models
    top_close = frozenset(("top", "close"))
    before = by_models(boards.build(task, Params()))[top_close]
    assert abs(before.mean_diff) > 0
    for key in ("k0", "k1"):  # close's two 4s become 5s: now it equals top on every item
        f.score(runs["close"], key, "accuracy").override(5, reviewer_user, "fine after all")
    after = by_models(boards.build(task, Params()))[top_close]
    assert after.mean_diff == 0 and after.p == 1.0
    judge_only = by_models(boards.build(task, Params(values="judge")))[top_close]
    assert abs(judge_only.mean_diff) == pytest.approx(abs(before.mean_diff))


def test_pairs_follow_the_boards_tag_filter(board_data) -> None:
    # Items tagged "hard": k2 and k3 (model-a failed k3's accuracy: strict counts it as 1).
    [pair] = pairs.build(boards.build(board_data["task"], Params(tag="hard"))).pairs
    [everything] = pairs.build(boards.build(board_data["task"], Params())).pairs
    assert (pair.n, everything.n) == (2, 6)


def two_models(n: int, a_values, b_values, low: float = 1, high: float = 5):
    task = f.make_task("small")
    dataset = f.make_items(task, n)
    judge = f.make_judge(
        task, name="quality", subjects=[{"name": "score", "min": low, "max": high}]
    )
    for label, values in (("a", a_values), ("b", b_values)):
        generation = f.make_generation_run(dataset, {}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        f.add_scores(run, {f"k{i}": {"score": float(v)} for i, v in enumerate(values)})
    return task


def test_two_equal_differences_do_not_separate_two_models(db, viewer_client) -> None:
    """#29.2: a beats b by the same margin on both of two items. The old rule set p = 0 when
    every difference was the same, so the tied ranks said 1, 2 after two items; the exact
    sign test (scipy's binomtest) says p = 0.5."""
    task = two_models(2, [5, 5], [4, 4])
    board = boards.build(task, Params(sort="mean:score"))
    table = pairs.build(board)
    [pair] = table.pairs
    assert pair.p == scipy_stats.binomtest(2, 2, 0.5).pvalue == 0.5
    assert pair.test == "sign" and pair.better is None
    assert sorted(table.ranks.values()) == [1, 1]
    html = viewer_client.get(reverse("leaderboards:task", args=[task.slug])).content.decode()
    assert 'data-stat="test">exact sign test<' in html
    exported = viewer_client.get(
        reverse("leaderboards:task-export", args=[task.slug]), {"format": "csv", "pairs": "1"}
    ).content.decode()
    [row] = list(csv.DictReader(io.StringIO(exported.lstrip("\ufeff"))))
    assert (row["p"], row["test"]) == ("0.5", "exact sign test")


def exact_sign_flip_p(diff: np.ndarray) -> float:
    """Every one of the 2ⁿ sign patterns, counted by hand: P(|mean| ≥ |observed mean|)."""
    n = len(diff)
    signs = np.array(
        [[1 if (mask >> i) & 1 else -1 for i in range(n)] for mask in range(2**n)], dtype=float
    )
    means = np.abs(signs @ diff) / n
    return float(np.mean(means >= abs(diff.mean()) - 1e-12))


def test_few_items_get_a_sign_flip_permutation_test(db) -> None:
    """Under 30 items the p of a pair comes from the sign-flip permutation test, exact by
    enumeration here (2⁸ patterns), where the t-test's normal theory does not hold."""
    a_values = [5, 4, 5, 3, 5, 4, 5, 2]
    b_values = [4, 4, 3, 3, 4, 1, 5, 1]
    diff = np.array(a_values, dtype=float) - np.array(b_values, dtype=float)
    task = two_models(8, a_values, b_values)
    [pair] = pairs.build(boards.build(task, Params(sort="mean:score"))).pairs
    assert pair.test == "permutation"
    assert pair.p == pytest.approx(exact_sign_flip_p(diff), abs=1e-12)
    assert pair.p != pytest.approx(scipy_stats.ttest_1samp(diff, 0).pvalue, abs=1e-3)
