"""The engine in the test's own process: a chunk of a run with a fake plug-in, no worker
subprocess, so a developer can set a breakpoint in ChunkRunner and step through a run.

The fake plug-in keeps its results in memory and answers in the order the engine asks; the
test checks what the engine promises every plug-in: each unit performed once, results
committed through `persist` in batches, progress counted, attempts logged per the run's
logging mode, a failing unit recorded as failed (not lost), and the run settled at the end.
"""

import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import django_rq
import pytest

from apps.runs.engine.chunk import run_chunk
from apps.runs.engine.contract import Call, Progress, Result, RunPlugin
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Attempt
from apps.runs.engine.tuning import FLUSH_EVERY
from apps.runs.models import AttemptLog, ErrorKind, Run
from tests.factories import make_qa_dataset

pytestmark = pytest.mark.django_db(transaction=True)

N = 45  # more than two FLUSH_EVERY batches


@dataclass
class Unit:
    key: str
    item_id: int


class FakePlugin(RunPlugin):
    """Squares the item's position; the item at position 7 raises (a bug in a plug-in)."""

    kind = Run.Kind.GENERATION

    def __init__(self, item_ids: dict[str, int]) -> None:
        self.item_ids = item_ids  # key → item id
        self.saved: dict[str, Any] = {}
        self.performed: list[str] = []
        self.where: set[tuple[int, int]] = set()  # (process, thread) that performed units
        self.batches: list[int] = []

    def total(self, run: Run) -> int:
        return len(self.item_ids)

    def pending_keys(self, run: Run, mode: str) -> list[str]:
        return [key for key in self.item_ids if key not in self.saved]

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]:
        failed = sum(1 for value in self.saved.values() if value is None)
        return len(self.saved) - failed, failed

    def lanes(self, run: Run) -> int:
        return 4

    def prepare(self, run: Run) -> dict[str, int]:
        return {"offset": 1000}

    def load_units(self, run: Run, ctx: Any, keys: list[str]) -> list[Unit]:
        return [Unit(key, self.item_ids[key]) for key in keys]

    async def perform(self, run: Run, ctx: Any, unit: Unit, call: Call) -> Result:
        self.performed.append(unit.key)
        self.where.add((os.getpid(), threading.get_ident()))
        position = int(unit.key)
        if position == 7:
            raise RuntimeError("the plug-in broke on item 7")
        call.record(Attempt(item_id=unit.item_id, attempt=1, ok=True, request_messages=[]))
        value = ctx["offset"] + position * position
        return Result(unit.key, unit.item_id, ok=True, data=value)

    def failed_result(
        self, run: Run, ctx: Any, unit: Unit, error_kind: str, message: str
    ) -> Result:
        return Result(unit.key, unit.item_id, ok=False, data=(error_kind, message))

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress:
        self.batches.append(len(results))
        for result in results:
            assert result.key not in self.saved, f"{result.key} persisted twice"
            self.saved[result.key] = result.data if result.ok else None
        failed = sum(1 for result in results if not result.ok)
        return Progress(done=len(results) - failed, failed=failed)


# The plug-in the registry names for generation runs while a test runs (see `fake_run`).
FAKE: FakePlugin | None = None


@pytest.fixture
def fake_run(task, monkeypatch, settings, django_capture_on_commit_callbacks):
    dataset = make_qa_dataset(task, N)
    item_ids = {str(item.position): item.pk for item in dataset.items.all()}
    plugin = FakePlugin(item_ids)
    monkeypatch.setattr(sys.modules[__name__], "FAKE", plugin)
    settings.RUN_KINDS = {**settings.RUN_KINDS, Run.Kind.GENERATION: f"{__name__}.FAKE"}
    run = Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        label="fake",
        chunk_size=N,
        logging_mode="all",
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert launch(run) == N
    # Nobody works the queue: the test runs the chunk itself.
    django_rq.get_queue("runs").empty()
    return run, plugin


def test_a_chunk_runs_in_the_tests_own_process(fake_run) -> None:
    run, plugin = fake_run
    assert run_chunk(run.pk, run.launch, 0) == f"{N} units"
    # Performed here, in this process (on the engine's event loop thread), each unit once.
    assert {pid for pid, _ in plugin.where} == {os.getpid()}
    assert sorted(plugin.performed, key=int) == [str(i) for i in range(N)]
    assert plugin.saved["6"] == 1036 and plugin.saved["44"] == 1000 + 44 * 44
    assert plugin.saved["7"] is None  # the broken unit is a failed result, not lost
    # Committed in batches by the writer (FLUSH_EVERY at a time when they pile up), never one
    # transaction per result.
    assert sum(plugin.batches) == N and len(plugin.batches) <= N // FLUSH_EVERY + 1
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES
    assert (run.done, run.failed, run.total) == (N - 1, 1, N)
    # Attempt logs as the run's logging mode asks; the crash keeps its traceback.
    assert AttemptLog.objects.filter(run=run, ok=True).count() == N - 1
    crash = AttemptLog.objects.get(run=run, ok=False)
    assert crash.error_kind == ErrorKind.INTERNAL
    assert "RuntimeError: the plug-in broke on item 7" in crash.error
    assert "RuntimeError" in crash.traceback and __file__ in crash.traceback


def test_a_second_launch_does_only_what_is_left(fake_run, django_capture_on_commit_callbacks):
    run, plugin = fake_run
    run_chunk(run.pk, run.launch, 0)
    del plugin.saved["3"]  # as if that result had been lost
    plugin.performed.clear()
    run.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        assert launch(run, Run.Mode.RESUME) == 1  # item 3: the failed 7 has its result
    django_rq.get_queue("runs").empty()
    run_chunk(run.pk, run.launch, 0)
    assert plugin.performed == ["3"]
    run.refresh_from_db()
    assert run.launch == 2 and run.status == Run.Status.COMPLETED_WITH_FAILURES


def test_a_launch_enqueues_few_chunks_and_one_out_of_time_hands_on_to_a_successor(
    task, monkeypatch, settings, django_capture_on_commit_callbacks
) -> None:
    """A million-item launch must not enqueue a job per `chunk_size` units (jobs beyond the busy
    workers only find the list dry): at most CHUNK_JOBS_MAX, here 2. Each chunk stops for its
    time (a budget of 0) after one take of 8 keys, so the work is carried to the end only by
    each chunk enqueueing its successor while keys are left."""
    from tests.base import work_here

    dataset = make_qa_dataset(task, N)
    plugin = FakePlugin({str(item.position): item.pk for item in dataset.items.all()})
    monkeypatch.setattr(sys.modules[__name__], "FAKE", plugin)
    settings.RUN_KINDS = {**settings.RUN_KINDS, Run.Kind.GENERATION: f"{__name__}.FAKE"}
    monkeypatch.setattr("apps.runs.engine.chunk.CHUNK_JOBS_MAX", 2)
    monkeypatch.setattr("apps.runs.engine.chunk.CHUNK_BUDGET_SHARE", 0.0)
    run = Run.objects.create(
        task=task, kind=Run.Kind.GENERATION, dataset=dataset, label="fake", chunk_size=5
    )
    queue = django_rq.get_queue("runs")
    with django_capture_on_commit_callbacks(execute=True):
        assert launch(run) == N
    assert queue.count == 2  # not ceil(45 / 5) = 9
    work_here()
    # Chunks 0 and 1, then a successor per chunk that left keys behind: 8 keys a take, the
    # sixth chunk takes the last 5 and leaves none; the seventh (chunk 1's successor's
    # successor…) finds the run settled.
    finished = sorted(queue.finished_job_registry.get_job_ids())
    assert finished == sorted(f"run-{run.pk}-l1-chunk-{n}" for n in range(7))
    assert sorted(plugin.performed, key=int) == [str(i) for i in range(N)]  # each once
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES
    assert (run.done, run.failed) == (N - 1, 1)
