"""Keys handed back from a dead chunk are checked against the database (a dead chunk may have
committed some): only those keys' items are read, never the whole run's pending list (at a
million items that took seconds per handed-back batch, bench/bench_fleet.py), and the answer is
the same as filtering the run's pending keys, in every launch mode."""

import random

import pytest

from apps.runs.engine.contract import executor_for
from apps.runs.models import Response, Run
from tests.factories import (
    fail_item,
    judge_item,
    make_generation_run,
    make_item,
    make_judge_run,
    make_qa_dataset,
    make_review_dataset,
    make_task,
)

pytestmark = pytest.mark.django_db

MODES = [Run.Mode.RESUME, Run.Mode.RETRY_FAILED, Run.Mode.OVERWRITE]


def check(run: Run, keys: list[str], monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Per mode: unsettled_keys (without listing the run's pending keys) against the pending
    keys it must agree with; returns what it said per mode."""
    said = []
    for mode in MODES:
        Run.objects.filter(pk=run.pk).update(launch=2, mode=mode)
        run.refresh_from_db()
        plugin = executor_for(run)
        expected = set(plugin.pending_keys(run, mode))
        with monkeypatch.context() as patch:
            patch.setattr(type(plugin), "pending_keys", lambda *_: pytest.fail("listed all"))
            got = plugin.unsettled_keys(run, keys)
        assert got == [key for key in keys if key in expected], mode
        said.append(got)
    return said


def test_a_generation_run_checks_only_the_handed_back_keys(monkeypatch) -> None:
    dataset = make_qa_dataset(make_task(), 6)
    # Items 0-2 answered in launch 1 (two epochs, some failed); 3-5 not at all; item 2's
    # second epoch was redone in launch 2 (an overwrite's own work).
    run = make_generation_run(dataset, {0: ["a", "b"], 1: [None, "c"], 2: ["d", None]})
    Response.objects.filter(run=run, item__position=2, epoch=1).update(launch=2)
    ids = {item.position: item.pk for item in dataset.items.all()}
    keys = [str(ids[p]) for p in range(6)] + [f"{ids[p]}:1" for p in range(6)]
    random.Random(3).shuffle(keys)
    resume, retry, overwrite = check(run, keys, monkeypatch)
    assert len(resume) == 6 and len(retry) == 1 and len(overwrite) == 11
    assert check(run, keys[:4], monkeypatch)  # a part of them as well


def test_a_judge_run_checks_only_the_handed_back_keys(monkeypatch) -> None:
    dataset = make_review_dataset(make_task())
    items = [make_item(dataset, i) for i in range(6)]
    run = make_judge_run(dataset)
    for item in items[:3]:
        judge_item(run, item, [{"accuracy": 3, "clarity": 4}] * 2)
    fail_item(run, items[3])
    keys = [str(item.pk) for item in reversed(items)]
    resume, retry, overwrite = check(run, keys, monkeypatch)
    assert resume == [str(items[5].pk), str(items[4].pk)]
    assert retry == [str(items[3].pk)]
    assert len(overwrite) == 6
