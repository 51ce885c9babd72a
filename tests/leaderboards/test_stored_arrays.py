"""The grid's and regressions' per-item arrays are stored when a judge run finishes (#28.3,
#28.4), so the first visit in a fresh web process reads a row per run, not every score."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.judges.models import judge_of
from apps.leaderboards import items, jobs, regressions
from apps.leaderboards.memo import clear_all, run_state
from apps.leaderboards.models import StoredArrays
from apps.runs.models import Run
from tests import factories as f

# Positions not in the order people count keys; a long key and an accented one.
KEYS = ["q10", "q9", "q1", "é", "z" * 200, "q100"]


@pytest.fixture
def two_runs(db):
    task = f.make_task("stored")
    dataset = f.make_dataset(task, [{"key": k, "fields": {"q": k}, "tags": ["t"]} for k in KEYS])
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    runs = []
    for label, values in (("base", [3, 3, 2, None, 4]), ("cand", [4, 3, None, 2, 4])):
        generation = f.make_generation_run(dataset, {i: label for i in range(6)}, label=label)
        run = f.make_judge_run(dataset, judge, source_run=generation, label=label)
        # q100 never judged by either: not compared.
        f.add_scores(run, {k: {"accuracy": v} for k, v in zip(KEYS, values, strict=False)})
        runs.append(run)
    return runs


def test_a_fresh_process_reads_the_stored_arrays_not_the_scores(two_runs):
    base, cand = two_runs
    for run in two_runs:
        jobs.refresh_summary(run.pk)  # what the worker does when a judge run finishes
    assert StoredArrays.objects.filter(run__in=two_runs).count() == 2
    assert StoredArrays.objects.filter(dataset=base.dataset).count() == 1
    clear_all()  # a fresh process
    with CaptureQueriesContext(connection) as queries:
        found = regressions.changes(base, cand, "accuracy", "judge")
        values = items.item_values(cand, "judge")["accuracy"]
    assert not [q["sql"] for q in queries if "judges_score" in q["sql"]]
    # Ties in the order people count keys: q1 < q9 < q10 < z… < é.
    assert [(c.key, c.state, c.baseline, c.candidate) for c in found] == [
        ("q1", "failed", 2.0, None),
        ("é", "failed", None, 2.0),
        ("q10", "improved", 3.0, 4.0),
        ("q9", "unchanged", 3.0, 3.0),
        ("z" * 200, "unchanged", 4.0, 4.0),
    ]  # q100: judged by neither
    assert [(c.baseline_item is None, c.candidate_item is None) for c in found][:2] == [
        (False, False),  # failed is scored: its review links
        (False, False),
    ]
    np.testing.assert_array_equal(values, [4, 3, np.nan, 2, 4, np.nan])
    assert items.dataset_items(base.dataset).keys.tolist() == KEYS


def test_new_results_are_read_again_and_stored(two_runs):
    base, cand = two_runs
    jobs.refresh_summary(cand.pk)
    f.add_scores(cand, {"q100": {"accuracy": 5}})  # moves the run row, as the judging job does
    clear_all()
    assert items.item_values(cand, "judge")["accuracy"][5] == 5
    assert StoredArrays.objects.get(run=cand).state == f"{run_state(cand)}|{items.LAYOUT}"
    found = regressions.changes(base, cand, "accuracy", "judge")
    assert ("q100", "failed", None, 5.0) in [
        (c.key, c.state, c.baseline, c.candidate) for c in found
    ]


def test_pairing_in_one_dataset_agrees_with_pairing_by_key(two_runs):
    base, cand = two_runs
    one = regressions._aligned_in_dataset(base, cand, "accuracy")
    other = regressions._aligned_by_key(base, cand, "accuracy")
    assert (one.keys, one.index) == (other.keys, other.index)
    for name in ("baseline_items", "candidate_items", "baseline", "candidate"):
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name))


def test_a_running_run_is_not_stored(two_runs):
    base, _ = two_runs
    base.status = "running"
    base.save(update_fields=["status"])
    clear_all()
    items.item_values(base, "judge")
    assert not StoredArrays.objects.filter(run=base).exists()


def test_a_dataset_edited_after_its_runs_were_deleted_is_read_again(two_runs):
    dataset, judge = two_runs[0].dataset, judge_of(two_runs[0])
    items.dataset_items(dataset)
    Run.objects.filter(dataset=dataset, kind=Run.Kind.JUDGE).delete()
    Run.objects.filter(dataset=dataset).delete()  # no run uses it: its items may change
    dataset.items.filter(key="q9").update(key="q99")
    f.make_judge_run(dataset, judge)
    clear_all()
    assert items.dataset_items(dataset).keys.tolist()[1] == "q99"
