"""Comparing two runs item by item."""

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats as scipy_stats

from apps.judges.models import Score
from apps.leaderboards import sequential, stats
from apps.leaderboards.compare import compare
from tests import factories as f

# board_data: accuracy A = 5 4 3 (failed) 5 2, B = 3 3 2 2 4 1 on k0..k5.
PAIRED_A = [5, 4, 3, 5, 2]  # k3 is failed in A: not paired
PAIRED_B = [3, 3, 2, 4, 1]


def by_subject(comparisons):
    return {c.subject: c for c in comparisons}


def test_wins_losses_ties_and_tests(board_data):
    result = by_subject(compare(board_data["run_a"], board_data["run_b"], "judge"))
    accuracy = result["accuracy"]
    assert (
        accuracy.result.n,
        accuracy.result.wins,
        accuracy.result.losses,
        accuracy.result.ties,
    ) == (5, 5, 0, 0)
    assert accuracy.result.mean_diff == pytest.approx(6 / 5)
    diffs = [a - b for a, b in zip(PAIRED_A, PAIRED_B, strict=True)]
    # Differences of 1–5 values lie in [−4, 4]: the bounded interval (#29.1).
    assert accuracy.result.ci == stats.mean_ci(diffs, -4, 4)
    assert accuracy.result.sign_p == pytest.approx(2 / 2**5)  # 5 of 5 wins, two-sided
    assert accuracy.result.wilcoxon_p == pytest.approx(
        scipy_stats.wilcoxon(PAIRED_A, PAIRED_B).pvalue
    )
    assert (accuracy.only_a, accuracy.only_b, accuracy.neither) == (0, 1, 0)
    clarity = result["clarity"]
    # k5 has no clarity score in A; B is better on the other five.
    assert (clarity.result.n, clarity.result.wins, clarity.result.losses) == (5, 0, 5)
    assert clarity.only_b == 1


def test_largest_differences_link_to_review(board_data):
    accuracy = by_subject(compare(board_data["run_a"], board_data["run_b"], "judge"))["accuracy"]
    assert [(d.key, d.diff) for d in accuracy.largest][:1] == [("k0", 2.0)]
    assert {d.key for d in accuracy.largest} == {"k0", "k1", "k2", "k4", "k5"}
    first = accuracy.largest[0]
    k0 = board_data["dataset"].items.get(key="k0")
    assert first.url_a == reverse("review:item", args=[board_data["run_a"].pk, k0.pk])
    assert first.url_b == reverse("review:item", args=[board_data["run_b"].pk, k0.pk])


def test_human_corrected_comparison_uses_overrides(board_data, reviewer_user):
    f.score(board_data["run_a"], "k3", "accuracy").override(1, reviewer_user, "judge failed")
    f.score(board_data["run_a"], "k0", "accuracy").override(3, reviewer_user, "tie really")
    human = by_subject(compare(board_data["run_a"], board_data["run_b"], "human"))["accuracy"]
    assert (human.result.n, human.result.wins, human.result.losses, human.result.ties) == (
        6,
        4,
        1,
        1,
    )
    judge = by_subject(compare(board_data["run_a"], board_data["run_b"], "judge"))["accuracy"]
    assert judge.result.n == 5


def test_compare_page(board_data, viewer_client):
    url = reverse("leaderboards:compare", args=["demo"])
    html = viewer_client.get(
        url, {"a": board_data["run_a"].pk, "b": board_data["run_b"].pk, "values": "judge"}
    ).content.decode()
    assert 'data-stat="wins">5<' in html
    assert 'data-stat="mean_diff">1.20<' in html
    assert (
        reverse(
            "review:item",
            args=[board_data["run_a"].pk, board_data["dataset"].items.get(key="k0").pk],
        )
        in html
    )
    same = viewer_client.get(url, {"a": board_data["run_a"].pk, "b": board_data["run_a"].pk})
    assert "Pick two different runs" in same.content.decode()
    assert viewer_client.get(url).status_code == 200


def test_unpaired_counts_add_up_to_the_items_either_run_scored(board_data):
    # k5 has no clarity score in A; make B's clarity fail on k5: the item is in neither.
    Score.objects.filter(run=board_data["run_b"], item__key="k5", subject="clarity").update(
        status="failed", judge_value=None, final_value=None
    )
    clarity = by_subject(compare(board_data["run_a"], board_data["run_b"], "judge"))["clarity"]
    assert (clarity.result.n, clarity.only_a, clarity.only_b, clarity.neither) == (5, 0, 0, 1)
    # k0..k5 all have a score row in at least one run: 5 + 0 + 0 + 1 = 6.
    total = clarity.result.n + clarity.only_a + clarity.only_b + clarity.neither
    assert total == 6


def test_largest_differences_with_equal_gaps_are_in_item_order_not_string_order(db):
    task = f.make_task("demo")
    keys = ["102", "2", "10", "q10", "q9"]
    dataset = f.make_dataset(
        task, [{"key": k, "fields": {"question": k}} for k in keys], name="set"
    )
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    run_a = f.make_judge_run(dataset, judge, source_column="question")
    run_b = f.make_judge_run(dataset, judge, source_column="question", label="b")
    f.add_scores(run_a, {k: {"accuracy": 4} for k in keys})
    f.add_scores(run_b, {k: {"accuracy": 2} for k in keys})
    accuracy = by_subject(compare(run_a, run_b, "judge"))["accuracy"]
    assert [d.key for d in accuracy.largest] == ["2", "10", "102", "q9", "q10"]


def test_compare_page_defines_its_counts(board_data, viewer_client):
    html = viewer_client.get(
        reverse("leaderboards:compare", args=["demo"]),
        {"a": board_data["run_a"].pk, "b": board_data["run_b"].pk},
    ).content.decode()
    assert '<dl id="compare-definitions"' in html
    assert "<dt>paired n</dt>" in html and "unpaired: A only / B only / neither</dt>" in html
    assert "unpaired: A only / B only / neither</th>" in html


def test_anytime_sequence_follows_the_order_pairs_were_complete(db, viewer_client):
    """A is right on all 60 items, B on the last 30 keys only. B's results arrive last key
    first, so the pairs complete in that order: 30 ties, then 30 A wins; the sequence is
    computed in that order (in key order it would decide at once, at item 30)."""
    task = f.make_task("demo")
    keys = [f"k{i:02d}" for i in range(60)]
    dataset = f.make_dataset(
        task, [{"key": k, "fields": {"question": k}} for k in keys], name="set"
    )
    judge = f.make_judge(task, name="pass", subjects=[{"name": "pass", "min": 0, "max": 1}])
    run_a = f.make_judge_run(dataset, judge, source_column="question")
    run_b = f.make_judge_run(dataset, judge, source_column="question", label="b")
    f.add_scores(run_a, {k: {"pass": 1} for k in keys})
    f.add_scores(
        run_b, {k: {"pass": 0 if i < 30 else 1} for i, k in reversed(list(enumerate(keys)))}
    )
    found = by_subject(compare(run_a, run_b, "judge"))["pass"].sequential
    assert found is not None
    arrived = np.array([1.0 if i < 30 else 0.0 for i in reversed(range(60))])
    expected = sequential.running(arrived, horizon=60)
    state, at = sequential.first_decision(arrived, 0.0, horizon=60)
    assert (found.low, found.high) == (
        pytest.approx(expected.low[-1]),
        pytest.approx(expected.high[-1]),
    )
    assert (found.state, found.decided_at) == (state, at) == (sequential.BETTER, at)
    assert at is not None and at > sequential.MIN_ITEMS
    assert sequential.first_decision(arrived[::-1], 0.0, horizon=60)[1] == sequential.MIN_ITEMS

    html = viewer_client.get(
        reverse("leaderboards:compare", args=["demo"]),
        {"a": run_a.pk, "b": run_b.pk, "values": "judge"},
    ).content.decode()
    assert 'data-state="better"><strong>decided: A better</strong>' in html
    assert f"at item {at}<" in html
    assert '<section class="card" id="sequential">' in html
    # The 30 wins after 30 ties put the last interval clear of the one at item 30 ([0, 0]):
    # the page says the order is not random.
    assert found.disjoint
    # 30 ties in a row are "no difference larger than 0.1" already, had that been asked.
    tied = by_subject(compare(run_a, run_b, "judge", delta=0.1))["pass"].sequential
    assert tied is not None and tied.state == sequential.EQUIVALENT
    assert tied.disjoint
    html = viewer_client.get(
        reverse("leaderboards:compare", args=["demo"]),
        {"a": run_a.pk, "b": run_b.pk, "values": "judge", "detect": "0.1"},
    ).content.decode()
    assert 'data-stat="disjoint">Two of its intervals share no value' in html
    # Swapped, B is the better one.
    swapped = by_subject(compare(run_b, run_a, "judge"))["pass"].sequential
    assert swapped is not None and swapped.state == sequential.WORSE
    assert swapped.label == "decided: B better"


def test_anytime_sequence_waits_for_enough_items(board_data):
    accuracy = by_subject(compare(board_data["run_a"], board_data["run_b"], "judge"))["accuracy"]
    assert accuracy.sequential is not None
    assert (accuracy.sequential.n, accuracy.sequential.state) == (5, sequential.GOING)
    assert accuracy.sequential.label == "keep going"
    assert not accuracy.sequential.disjoint


def test_a_kept_comparison_follows_overrides_and_ties_keep_the_counting_order(
    board_data, reviewer_user
):
    """compare() is memoised by both runs' results and the last score event: an override
    after a first look shows at once. Largest differences come out as a full sort by
    (−|difference|, natural key) would give: "k10" after "k9" at equal size."""
    from apps.leaderboards import memo
    from apps.leaderboards.compare import _largest

    run_a, run_b = board_data["run_a"], board_data["run_b"]
    before = by_subject(compare(run_a, run_b, "human"))["accuracy"]
    assert before.result.wins == 5
    f.score(run_a, "k0", "accuracy").override(1, reviewer_user, "worse than B")
    after = by_subject(compare(run_a, run_b, "human"))["accuracy"]
    assert (after.result.wins, after.result.losses) == (4, 1)
    memo.clear_all()
    assert repr(compare(run_a, run_b, "human")) == repr(compare(run_a, run_b, "human"))
    assert repr(by_subject(compare(run_a, run_b, "human"))["accuracy"]) == repr(after)
    keys = [f"k{i}" for i in range(25)]
    diff = np.array([(-1) ** i * (i % 3) for i in range(25)], dtype=float)
    full = sorted(range(25), key=lambda i: (-abs(diff[i]), compare_key(keys[i])))
    assert _largest(diff, keys) == [i for i in full if diff[i] != 0][:10]


def compare_key(key: str):
    from apps.leaderboards.compare import natural_key

    return natural_key(key)
