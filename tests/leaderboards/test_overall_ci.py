"""The overall (weighted) score's 95% CI: items resampled with all their subjects together.

Answered-only boards are checked against a plain item bootstrap written here with numpy
(20,000 resamples of item indices), which shares no code with the board's
multinomial-on-vectors bootstrap; strict boards (every item has every subject) against the
bounded interval of the items' own overalls (#29.1), written here from the paper.
"""

import csv
import io
import random

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.leaderboards import boards, summaries
from apps.leaderboards.boards import Params
from tests import factories as f

# Both intervals are Monte Carlo estimates: with 1,000 resamples a 2.5% percentile has a
# standard error of about 2% of the interval's width, so the ends may differ by 3.5 of those.
RELATIVE_TOLERANCE = 0.08


def direct_ci(rows: list[tuple[float | None, float | None]], weights=(1.0, 1.0)) -> tuple:
    """Item bootstrap of the overall score of (accuracy, clarity) rows on 1–5 scales."""
    values = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)
    picks = np.random.default_rng(7).integers(0, len(rows), size=(20_000, len(rows)))
    drawn = values[picks]  # (resamples, items, subjects)
    means = np.nanmean(drawn, axis=1)
    scaled = (means - 1) / 4
    overall = (weights[0] * scaled[:, 0] + weights[1] * scaled[:, 1]) / sum(weights) * 100
    return tuple(np.percentile(overall, [2.5, 97.5]))


def direct_bounded(rows: list[tuple[float, float]], weights=(1.0, 1.0)) -> tuple:
    """Strict scoring: every item has both subjects, so the overall is the mean of the items'
    own 0–100 overalls, and its interval is Learned-Miller & Thomas's bound as their paper
    writes it: Dirichlet(1, …, 1) weights on the n items plus one point at 0 (lower end) or at
    100 (upper end), 20,000 draws."""
    values = np.array(rows, dtype=float)
    scaled = (values - 1) / 4
    per_item = (weights[0] * scaled[:, 0] + weights[1] * scaled[:, 1]) / sum(weights) * 100
    u = np.random.default_rng(7).dirichlet(np.ones(len(rows) + 1), size=20_000)
    low = np.percentile(u @ np.append(per_item, 0.0), 2.5)
    high = np.percentile(u @ np.append(per_item, 100.0), 97.5)
    return low, high


def scenario(rows: list[tuple[float | None, float | None]], tags=None, status="completed"):
    task = f.make_task("overall")
    dataset = f.make_items(task, len(rows), tags=tags or [])
    run = f.make_judge_run(
        dataset, f.make_judge(task, name="quality"), label="model-x", status=status
    )
    f.add_scores(
        run,
        {f"k{i}": {"accuracy": a, "clarity": c} for i, (a, c) in enumerate(rows)},
    )
    return task, run


def overall(task, mode="human", **params):
    board = boards.build(task, Params(**params))
    row = board.rows[0]
    return row.overall[mode], row.overall_ci[mode]


def assert_close(ci, expected: tuple, method: str = "bootstrap") -> None:
    assert ci is not None and ci.method == method
    tolerance = RELATIVE_TOLERANCE * (expected[1] - expected[0])
    assert ci.low == pytest.approx(expected[0], abs=tolerance)
    assert ci.high == pytest.approx(expected[1], abs=tolerance)


def mixed_rows(n: int, seed: int = 3) -> list[tuple[float | None, float | None]]:
    """Clarity follows accuracy most of the time; a few failed accuracy scores."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        accuracy = rng.randint(1, 5)
        clarity = min(5, max(1, accuracy + rng.choice([-1, 0, 0, 1])))
        rows.append((None if i % 17 == 5 else accuracy, clarity))
    return rows


def test_the_overall_ci_is_the_item_bootstrap_of_the_weighted_score(db):
    rows = mixed_rows(120)
    task, _ = scenario(rows)
    value, ci = overall(task, scoring="answered")
    accuracy = np.nanmean([np.nan if a is None else a for a, _ in rows])
    clarity = np.mean([c for _, c in rows])
    assert value == pytest.approx(((accuracy - 1) / 4 + (clarity - 1) / 4) / 2 * 100)
    assert_close(ci, direct_ci(rows))
    assert ci.low < value < ci.high
    # Weights move it the same way as the score.
    value, ci = overall(task, weights={"accuracy": 3.0, "clarity": 1.0}, scoring="answered")
    assert_close(ci, direct_ci(rows, weights=(3.0, 1.0)))


def test_the_strict_overall_ci_resamples_failed_items_at_the_worst_value(db):
    rows = mixed_rows(120)
    task, _ = scenario(rows)
    value, ci = overall(task)  # strict by default
    strict_rows = [(1 if a is None else a, c) for a, c in rows]
    accuracy = np.mean([a for a, _ in strict_rows])
    clarity = np.mean([c for _, c in strict_rows])
    assert value == pytest.approx(((accuracy - 1) / 4 + (clarity - 1) / 4) / 2 * 100)
    assert_close(ci, direct_bounded(strict_rows), "bounded")
    assert ci.low < value < ci.high


def test_subjects_of_one_item_are_resampled_together(db):
    # Clarity equals accuracy on every item: the overall is as uncertain as one subject. Were
    # subjects resampled apart, the interval would be about 1/√2 as wide.
    rows = [(v, v) for v in mixed_rows(120, seed=11) for v in [v[1]]]
    task, _ = scenario(rows)
    _, ci = overall(task)
    board = boards.build(task, Params())
    subject_ci = board.rows[0].cells["human"]["accuracy"].ci
    subject_width = (subject_ci.high - subject_ci.low) / 4 * 100
    assert ci.high - ci.low == pytest.approx(subject_width, rel=0.1)
    assert_close(ci, direct_bounded(rows), "bounded")


def test_one_weighted_subject_gives_its_own_ci_rescaled(db):
    rows = mixed_rows(60)
    task, _ = scenario(rows)
    board = boards.build(task, Params(weights={"clarity": 0.0}))
    row = board.rows[0]
    subject_ci = row.cells["human"]["accuracy"].ci
    ci = row.overall_ci["human"]
    assert (ci.low, ci.high) == pytest.approx(
        ((subject_ci.low - 1) / 4 * 100, (subject_ci.high - 1) / 4 * 100)
    )


def test_human_corrected_resamples_the_corrected_items(db, reviewer_user):
    rows = [(1, 2) if i < 8 else (4, 4) for i in range(40)]
    task, run = scenario(rows)
    for i in range(5):  # the judge was wrong on five items: accuracy 5, not 1
        f.score(run, f"k{i}", "accuracy").override(5, reviewer_user, "right after all")
    corrected = [(5, 2) if i < 5 else row for i, row in enumerate(rows)]
    _, judge_ci = overall(task, mode="judge")
    _, human_ci = overall(task, mode="human")
    assert_close(judge_ci, direct_bounded(rows), "bounded")
    assert_close(human_ci, direct_bounded(corrected), "bounded")
    # Five of forty accuracies up by 4 points of a 1–5 scale: the overall moves by 6.25.
    shift = (human_ci.low + human_ci.high - judge_ci.low - judge_ci.high) / 2
    assert shift == pytest.approx(6.25, abs=2)


def test_a_tag_narrows_the_items_resampled(db):
    rows = mixed_rows(90)
    tags = [["hard"] if i % 3 == 0 else ["easy"] for i in range(90)]
    task, _ = scenario(rows, tags=tags)
    _, ci = overall(task, tag="hard")
    hard = [row for i, row in enumerate(rows) if i % 3 == 0]
    assert_close(ci, direct_bounded([(1 if a is None else a, c) for a, c in hard]), "bounded")


def test_a_running_run_gets_its_interval_once_it_has_ended(db):
    # Its summary is rebuilt on every request while it runs: no per-item scan until it ends.
    task, run = scenario(mixed_rows(40), status="running")
    value, ci = overall(task)
    assert value is not None and ci is None
    run.status = "completed"
    run.save(update_fields=["status"])
    assert overall(task)[1] is not None


def test_too_many_distinct_vectors_give_no_interval_rather_than_a_wrong_one(db, monkeypatch):
    monkeypatch.setattr(summaries, "VECTOR_LIMIT", 3)
    task, _ = scenario(mixed_rows(40))
    value, ci = overall(task)
    assert value is not None and ci is None


def test_page_csv_and_cli_show_the_same_interval(db, viewer_client, capsys):
    task, _ = scenario(mixed_rows(50))
    _, ci = overall(task)
    page = viewer_client.get(reverse("leaderboards:task", args=[task.slug])).content.decode()
    shown = f"[{ci.low:.2f}, {ci.high:.2f}]"
    assert f'data-stat="overall-ci" data-mode="human">{shown}</td>' in page
    export = viewer_client.get(
        reverse("leaderboards:task-export", args=[task.slug]), {"format": "csv"}
    )
    record = next(csv.DictReader(io.StringIO(export.content.decode().lstrip("\ufeff"))))
    # The CSV carries the page's precision: the same interval, to two decimals.
    low, high = record["overall.human.ci_low"], record["overall.human.ci_high"]
    assert f"[{float(low):.2f}, {float(high):.2f}]" == shown
    assert all(len(end.partition(".")[2]) <= 2 for end in (low, high))
    call_command("leaderboard", task.slug)
    assert shown in capsys.readouterr().out
    # The chart of the overall column draws the same interval as its whisker.
    board = boards.build(task, Params())
    whisker = boards.chart(board)["bars"][0]["ci"]
    assert whisker is not None and whisker["x1"] < whisker["x2"]
