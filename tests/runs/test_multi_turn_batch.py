"""Multi-turn generation in batch mode (#27.3): one batch per turn. Each batch holds the first
unanswered turn of every unit; its answers are written as turns (through `Call.emit`, as a
live multi-turn run writes them) and the units with turns left go out again in the next batch,
with those answers in context. Real Redis, the real openai SDK against the loopback server's
Batch API (tests/llm_batches.py); the submit and poll jobs run in this process, as a worker
would run them (tests/runs/test_batch.py has batch mode through real worker processes)."""

import time
from collections import Counter
from typing import Any

import pytest
from django.db import transaction

from apps.runs.engine import batch as batch_mode
from apps.runs.engine.batch import poll_job, submit_job
from apps.runs.engine.launch import launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import AttemptLog, PromptTemplate, Response, Run, RunBatch, Turn
from tests.base import wait_for
from tests.factories import make_conversation_dataset

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DIALOGUES = [
    ["Name a colour.", "Now a fruit of that colour.", "And its price?"],
    ["Write a haiku about rain.", "Now make it about snow."],
    [
        {"role": "system", "content": "Item system."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "Recorded: 5"},  # the file's answer gives way
        {"role": "user", "content": "Times three?"},
    ],
]
TURNS = 7  # 3 + 2 + 2


@pytest.fixture
def dialogues(task):
    return make_conversation_dataset(task, DIALOGUES)


@pytest.fixture
def chat_template(task) -> PromptTemplate:
    return PromptTemplate.objects.create(
        task=task,
        name="chat",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "conversation"}],
    )


@pytest.fixture
def batch_endpoint(endpoint, settings):
    settings.PRICE_TABLE = {**settings.PRICE_TABLE, "test-model": [1.5, 6.0]}
    endpoint.supports_batch = True
    endpoint.save()
    return endpoint


def start(dataset, endpoint, template, **kwargs: Any) -> Run:
    with transaction.atomic():
        return create_generation_run(
            dataset, endpoint, template, multi_turn=True, batch=True, **kwargs
        )


def submit(run: Run) -> None:
    assert submit_job(run.pk, run.launch) != "failed"


def poll_until(run: Run, done: Any, timeout: float = 90) -> Run:
    """Poll the launch's batches as the watchdog would have them polled, until `done(run)`."""
    deadline = time.monotonic() + timeout
    while True:
        run.refresh_from_db()
        if done(run):
            return run
        assert time.monotonic() < deadline, f"run #{run.pk} is still {run.status}"
        poll_job(run.pk, run.launch)
        time.sleep(0.05)


def finish(run: Run) -> Run:
    return poll_until(run, lambda r: r.is_terminal)


def provider_status(llm_server: Any, n: int) -> str:
    """The status of the run's n-th batch at the provider (no poll: nothing is applied)."""
    made = llm_server.batches()["batches"]
    return made[n]["status"] if len(made) > n else ""


def answered_once(run: Run) -> None:
    turns = Counter(Turn.objects.filter(run=run).values_list("item_id", "epoch", "number"))
    assert len(turns) == TURNS and set(turns.values()) == {1}
    assert Turn.objects.filter(run=run).answered().count() == TURNS


def test_each_turn_goes_in_its_own_batch_with_the_answers_before_it(
    dialogues, batch_endpoint, chat_template, llm_server
):
    llm_server.batches(lines_per_second=200)
    run = start(dialogues, batch_endpoint, chat_template, logging_mode="all")
    submit(run)
    run = finish(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 3, 0), run.error
    answered_once(run)

    # Turn 1 of all three, turn 2 of all three, turn 3 of the one item that has it.
    rows = list(RunBatch.objects.filter(run=run).order_by("part"))
    assert [(r.launch, r.part, r.requests, len(r.keys)) for r in rows] == [
        (1, 0, 3, 3),
        (1, 1, 3, 3),
        (1, 2, 1, 1),
    ]
    assert all(r.applied_at is not None for r in rows)
    seen = llm_server.batches()["batches"]
    assert [b["request_counts"]["total"] for b in seen] == [3, 3, 1]
    sent = llm_server.stats()["log"]
    assert len(sent) == TURNS and {e["batch_id"] for e in sent} == {b["id"] for b in seen}

    # The item's second turn was asked with the model's own first answer, not the file's.
    d2 = Response.objects.get(run=run, item__key="d2")
    first, second = d2.turns()
    assert first.text == "echo: What is 2 + 2?"
    assert AttemptLog.objects.filter(run=run, item=d2.item).order_by(
        "pk"
    ).last().request_messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Item system."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "echo: What is 2 + 2?"},
        {"role": "user", "content": "Times three?"},
    ]
    assert d2.text == second.text == "echo: Times three?"
    # Each turn at the batch price, the response their sum.
    d0 = Response.objects.get(run=run, item__key="d0")
    turns = d0.turns()
    assert [t.number for t in turns] == [1, 2, 3]
    for t in turns:
        assert t.cost == pytest.approx(
            batch_endpoint.cost(t.prompt_tokens, t.completion_tokens, batch=True)
        )
        assert t.cost > 0
    assert d0.cost == pytest.approx(sum(t.cost for t in turns))
    assert d0.prompt_tokens == sum(t.prompt_tokens for t in turns)
    assert run.cost == pytest.approx(sum(r.cost for r in Response.objects.filter(run=run)))


def test_a_failed_line_fails_its_item_naming_the_turn_and_asks_no_later_turn(
    dialogues, batch_endpoint, chat_template, llm_server
):
    llm_server.configure(script=[{"match": "Now a fruit of that colour.", "status": 400}])
    llm_server.batches(lines_per_second=200)
    run = start(dialogues, batch_endpoint, chat_template)
    submit(run)
    run = finish(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED_WITH_FAILURES, 2, 1)
    failed = Response.objects.get(run=run, item__key="d0")
    assert failed.error.startswith("Turn 2 of 3: the request was refused (400)")
    assert [t.is_answered for t in failed.turns()] == [True, False]
    # Turn 3 of d0 was never asked: two batches, 3 + 3 lines.
    assert [b["request_counts"]["total"] for b in llm_server.batches()["batches"]] == [3, 3]


def test_cancel_mid_turn_keeps_what_was_answered_and_resume_asks_only_the_rest(
    dialogues, batch_endpoint, chat_template, llm_server
):
    llm_server.batches(lines_per_second=200)
    run = start(dialogues, batch_endpoint, chat_template)
    submit(run)
    # The second turn's batch (sent by the poll that reads the first) holds after one line.
    wait_for(lambda: provider_status(llm_server, 0) == "completed", 60, "the first batch")
    llm_server.batches(hold_after=1)
    poll_until(run, lambda r: RunBatch.objects.filter(run=r, part=1, completed__gte=1).exists())
    cancel(run)
    run = finish(run)
    assert run.status == Run.Status.CANCELLED
    # Turn 1 of each item, and the one turn 2 the cancelled batch had answered.
    assert Turn.objects.filter(run=run).answered().count() == 4
    assert not Response.objects.filter(run=run).exists()
    assert llm_server.batches()["batches"][1]["status"] == "cancelled"

    llm_server.batches(hold_after=None)
    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == 3
    submit(run)
    run = finish(run)
    assert (run.status, run.done) == (Run.Status.COMPLETED, 3), run.error
    answered_once(run)
    # Nothing asked twice: the resume's batches hold the three turns that were missing.
    assert len(llm_server.stats()["log"]) == TURNS
    assert sum(b["request_counts"]["total"] for b in llm_server.batches()["batches"][2:]) == 3


class Killed(BaseException):
    """Where kill -9 would stop the poll job: no handler of ours runs."""


def test_a_poll_killed_while_writing_a_turn_or_sending_the_next_loses_nothing(
    dialogues, batch_endpoint, chat_template, llm_server, monkeypatch
):
    llm_server.batches(lines_per_second=200)
    run = start(dialogues, batch_endpoint, chat_template)
    submit(run)
    wait_for(lambda: provider_status(llm_server, 0) == "completed", 60, "the first batch")

    # The poll dies after the first item's turn 1 is written: the batch is read again.
    monkeypatch.setattr(batch_mode, "SLICE", 1)
    real_write = batch_mode.write_results
    writes = []

    def write_then_die(*args: Any, **kwargs: Any) -> Any:
        if writes:
            raise Killed
        writes.append(real_write(*args, **kwargs))
        return writes[-1]

    monkeypatch.setattr(batch_mode, "write_results", write_then_die)
    with pytest.raises(Killed):
        batch_mode.poll(Run.objects.get(pk=run.pk))
    monkeypatch.setattr(batch_mode, "write_results", real_write)
    assert Turn.objects.filter(run=run).count() == 1

    # The next poll dies once the second turn's file is recorded, before it is sent.
    real_send = batch_mode.send

    def die_sending(*args: Any, **kwargs: Any) -> None:
        raise Killed

    monkeypatch.setattr(batch_mode, "send", die_sending)
    with pytest.raises(Killed):
        batch_mode.poll(Run.objects.get(pk=run.pk))
    monkeypatch.setattr(batch_mode, "send", real_send)
    assert RunBatch.objects.filter(run=run, part=1, batch_id="").exists()
    assert Turn.objects.filter(run=run).count() == 3

    run = finish(run)
    assert (run.status, run.done) == (Run.Status.COMPLETED, 3), run.error
    answered_once(run)
    assert len(llm_server.stats()["log"]) == TURNS
    assert [b["request_counts"]["total"] for b in llm_server.batches()["batches"]] == [3, 3, 1]


def test_turns_the_cache_answers_never_go_into_a_batch(
    dialogues, batch_endpoint, chat_template, llm_server
):
    llm_server.batches(lines_per_second=200)
    first = start(dialogues, batch_endpoint, chat_template, use_cache=True)
    submit(first)
    assert finish(first).status == Run.Status.COMPLETED
    # The same dialogues again, one with a new second turn: only that turn is sent.
    changed = [list(DIALOGUES[0]), DIALOGUES[1], DIALOGUES[2]]
    changed[0][1] = "Now a vegetable of that colour."
    task = first.task
    again = make_conversation_dataset(task, changed, name="again")
    second = start(again, batch_endpoint, chat_template, use_cache=True)
    submit(second)
    second = finish(second)
    assert (second.status, second.done) == (Run.Status.COMPLETED, 3), second.error
    assert second.cached_count == TURNS - 2  # d0's turns 2 and 3 were never asked before
    assert [b["request_counts"]["total"] for b in llm_server.batches()["batches"]][3:] == [1, 1]
    d0 = Response.objects.get(run=second, item__key="d0")
    assert [t.text for t in d0.turns()] == [
        "echo: Name a colour.",
        "echo: Now a vegetable of that colour.",
        "echo: And its price?",
    ]


def test_a_real_worker_finishes_a_multi_turn_batch_run_by_itself(
    dialogues, batch_endpoint, chat_template, llm_server, workers
):
    """The other tests here run the submit and poll jobs in this process; here one real worker
    process does everything after the start: submit, the watchdog's polls, each turn's batch."""
    llm_server.batches(lines_per_second=200)
    run = start(dialogues, batch_endpoint, chat_template)
    workers(EVALSITE_BATCH_POLL_SECONDS="0.2")
    wait_for(lambda: Run.objects.get(pk=run.pk).is_terminal, 120, f"run #{run.pk} to end")
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 3, 0), run.error
    answered_once(run)
    assert [b["request_counts"]["total"] for b in llm_server.batches()["batches"]] == [3, 3, 1]
    assert list(RunBatch.objects.filter(run=run).order_by("part").values_list("requests", flat=True)) == [3, 3, 1]  # fmt: skip
    assert Response.objects.get(run=run, item__key="d2").text == "echo: Times three?"
