"""Multi-turn generation through the engine (#27.3): real Redis, the loopback LLM server, RQ's
jobs in this process (tests.base.work_here) but for the tests of a worker kept busy, a killed
worker and the command line, which start real ones. Each user turn is asked in order with the
model's own earlier answers in context; each turn is kept as it finishes; a failed turn fails
the item naming it; resume, retry failed, overwrite, epochs, the cache and a killed worker all
leave each (item, turn) answered once."""

from collections import Counter
from typing import Any

import pytest
from django.db import transaction

from apps.runs.engine.launch import LaunchError, launch
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import PromptTemplate, Response, Run, Turn
from tests.base import wait_for, work_here
from tests.factories import make_conversation_dataset, make_qa_dataset
from tests.runs.conftest import kill_hard
from tests.runs.test_cli import start_run

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


@pytest.fixture
def dialogues(task):
    return make_conversation_dataset(task, DIALOGUES)


@pytest.fixture
def chat_template(task) -> PromptTemplate:
    return PromptTemplate.objects.create(
        task=task,
        name="chat",
        messages=[
            {"role": "system", "content": "Be brief ({{ key }})."},
            {"role": "conversation"},
        ],
    )


def multi_turn(dataset, endpoint, template, **kwargs: Any) -> Run:
    with transaction.atomic():
        return create_generation_run(dataset, endpoint, template, multi_turn=True, **kwargs)


def requests(llm_server) -> list[list[dict]]:
    return [entry["messages"] for entry in llm_server.stats()["log"]]


def test_each_turn_is_asked_in_order_with_the_models_own_answers(
    dialogues, endpoint, chat_template, llm_server
):
    llm_server.configure(default_reply="A{n}: {last_user}")
    run = multi_turn(dialogues, endpoint, chat_template, logging_mode="all")
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed, run.total) == (Run.Status.COMPLETED, 3, 0, 3)
    assert Turn.objects.filter(run=run).count() == 7
    sent = requests(llm_server)
    assert len(sent) == 7
    # The third item's second turn: the template's system message, the item's own system
    # message, turn 1 with the model's answer in place of the recorded "5", then turn 2.
    d2 = Response.objects.get(run=run, item__key="d2")
    first, second = d2.turns()
    assert first.asked == "What is 2 + 2?" and second.asked == "Times three?"
    assert [
        {"role": "system", "content": "Be brief (d2)."},
        {"role": "system", "content": "Item system."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "Times three?"},
    ] in sent
    assert first.text.endswith(": What is 2 + 2?") and "Recorded" not in str(sent)
    # The Response is the whole item: the last answer, the turns' tokens summed.
    assert d2.status == Response.Status.OK and d2.text == second.text
    assert d2.prompt_tokens == first.prompt_tokens + second.prompt_tokens > 0
    assert d2.completion_tokens == first.completion_tokens + second.completion_tokens
    assert d2.turn_answers() == [first.text, second.text]
    assert d2.transcript()[-1] == {"role": "assistant", "content": second.text}
    # Every request of a three-turn item waited for the answer before it.
    d0 = Response.objects.get(run=run, item__key="d0")
    assert [t.number for t in d0.turns()] == [1, 2, 3]
    assert [len(m) for m in sent if m[-1]["content"] in DIALOGUES[0]] == [2, 4, 6]
    assert run.prompt_tokens == sum(t.prompt_tokens for t in Turn.objects.filter(run=run))


def test_each_turn_is_committed_as_it_finishes(
    dialogues, endpoint, chat_template, llm_server, workers
):
    endpoint.timeout_seconds = 60  # turn 2 is slow on purpose, not timed out
    endpoint.save()
    llm_server.configure(script=[{"match": "make it about snow", "latency": 8, "reply": "late"}])
    run = multi_turn(dialogues, endpoint, chat_template)
    workers()
    d1 = dialogues.items.get(key="d1")
    # While turn 2 is still being answered, turn 1 is in the database, the item not yet.
    wait_for(
        lambda: Turn.objects.filter(run=run, item=d1, number=1).exists(),
        what="turn 1 committed on its own",
    )
    assert not Response.objects.filter(run=run, item=d1).exists()
    assert not Turn.objects.filter(run=run, item=d1, number=2).exists()
    wait_for(lambda: Run.objects.get(pk=run.pk).is_terminal, what="the run's end")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert Response.objects.get(run=run, item=d1).text == "late"


def test_a_failed_turn_fails_the_item_naming_it_and_later_turns_are_not_asked(
    dialogues, endpoint, chat_template, llm_server
):
    llm_server.configure(script=[{"match": "Now a fruit", "status": 400}])
    run = multi_turn(dialogues, endpoint, chat_template, logging_mode="all")
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED_WITH_FAILURES, 2, 1)
    failed = Response.objects.get(run=run, item__key="d0")
    assert failed.status == Response.Status.FAILED
    assert failed.error.startswith("Turn 2 of 3: ") and "400" in failed.error
    turns = failed.turns()
    assert [(t.number, t.is_answered) for t in turns] == [(1, True), (2, False)]
    assert turns[1].error == failed.error.removeprefix("Turn 2 of 3: ")
    assert not any(m[-1]["content"] == "And its price?" for m in requests(llm_server))

    # Retry failed asks from the failed turn on: turn 1 stands, turns 2 and 3 are asked.
    llm_server.configure(script=[])
    llm_server.reset(stats_only=True)
    with transaction.atomic():
        launch(run, Run.Mode.RETRY_FAILED)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 3, 0)
    asked = [m[-1]["content"] for m in requests(llm_server)]
    assert asked == ["Now a fruit of that colour.", "And its price?"]
    again = Response.objects.get(run=run, item__key="d0")
    assert again.status == Response.Status.OK and again.error == ""
    assert [t.number for t in again.turns() if t.is_answered] == [1, 2, 3]
    assert again.turns()[0].pk == turns[0].pk  # turn 1 was kept, not asked again


def test_resume_asks_from_the_first_turn_without_an_answer(
    dialogues, endpoint, chat_template, llm_server
):
    run = multi_turn(dialogues, endpoint, chat_template)
    d0 = dialogues.items.get(key="d0")
    # A worker died after committing d0's first turn (and before its Response).
    Turn.objects.create(run=run, item=d0, number=1, asked=DIALOGUES[0][0], text="Blue.", launch=1)
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    d0_requests = [m for m in requests(llm_server) if m[-1]["content"] in DIALOGUES[0]]
    assert [m[-1]["content"] for m in d0_requests] == DIALOGUES[0][1:]  # turn 1 not asked
    assert {"role": "assistant", "content": "Blue."} in d0_requests[0]
    assert Response.objects.get(run=run, item=d0).turn_answers()[0] == "Blue."


def test_epochs_and_the_cache_work_per_turn(dialogues, endpoint, chat_template, llm_server):
    endpoint.seed = 3
    endpoint.save()
    llm_server.configure(default_reply="seed {seed}: {last_user}")
    run = multi_turn(dialogues, endpoint, chat_template, epochs=2)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.total) == (Run.Status.COMPLETED, 6, 6)
    rows = Turn.objects.filter(run=run)
    assert Counter(rows.values_list("epoch", flat=True)) == {0: 7, 1: 7}
    assert all(t.text.startswith(f"seed {3 + t.epoch}: ") for t in rows)
    assert run.sent_count == 14 and run.cached_count == 0
    # The same run again on a deterministic endpoint: every turn of every epoch is cached
    # (each turn's request carries the same earlier answers, so it is the same request).
    again = multi_turn(dialogues, endpoint, chat_template, epochs=2)
    assert again.use_cache
    work_here()
    again.refresh_from_db()
    assert (again.status, again.cached_count, again.sent_count) == (Run.Status.COMPLETED, 14, 0)
    assert sorted(Turn.objects.filter(run=again).values_list("text", flat=True)) == sorted(
        rows.values_list("text", flat=True)
    )


def test_overwrite_asks_every_turn_again_without_mixing_launches(
    dialogues, endpoint, chat_template, llm_server
):
    llm_server.configure(default_reply="first: {last_user}")
    run = multi_turn(dialogues, endpoint, chat_template, use_cache=False)
    work_here()
    llm_server.configure(default_reply="second: {last_user}")
    with transaction.atomic():
        launch(run, Run.Mode.OVERWRITE)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.COMPLETED, 3)
    turns = Turn.objects.filter(run=run)
    assert turns.count() == 7 and all(t.text.startswith("second: ") for t in turns)
    assert all(r.launch == 2 for r in Response.objects.filter(run=run))


def test_what_a_multi_turn_run_refuses(task, dialogues, endpoint, chat_template, template):
    plain = make_qa_dataset(task, 2, name="plain")
    with pytest.raises(ValueError, match="has no conversation column"):
        create_generation_run(plain, endpoint, chat_template, multi_turn=True)
    with pytest.raises(ValueError, match="does not send the item's conversation"):
        create_generation_run(dialogues, endpoint, template, multi_turn=True)
    trailing = PromptTemplate.objects.create(
        task=task,
        name="after",
        messages=[{"role": "conversation"}, {"role": "user", "content": "Be brief."}],
    )
    with pytest.raises(ValueError, match="messages after the item's conversation"):
        create_generation_run(dialogues, endpoint, trailing, multi_turn=True)
    # A memory script's or a simulated user's next message depends on the answer: no batch.
    run = multi_turn(dialogues, endpoint, chat_template)
    endpoint.supports_batch = True
    endpoint.save()
    Run.objects.filter(pk=run.pk).update(
        kind=Run.Kind.SCRIPT, batch=True, status=Run.Status.CANCELLED
    )
    run.refresh_from_db()
    with pytest.raises(LaunchError, match="a Memory script run cannot be sent as a batch"):
        launch(run, Run.Mode.RESUME)


def test_a_killed_worker_leaves_each_item_and_turn_answered_once_and_the_run_finishes(
    task, endpoint, chat_template, llm_server, workers
):
    n = 60
    dataset = make_conversation_dataset(
        task, [[f"item {i} turn {t}" for t in (1, 2, 3)] for i in range(n)], name="many"
    )
    endpoint.concurrency_limit = 8
    endpoint.save()
    llm_server.configure(latency=0.2, default_reply="answer to {last_user}")
    run = multi_turn(dataset, endpoint, chat_template, chunk_size=20)
    first = workers()
    workers()
    wait_for(
        lambda: Turn.objects.filter(run=run).count() >= 40,
        what="turns answered before the kill",
    )
    kill_hard(first)  # the worker process and its horse, mid-item for some of its units
    at_kill = set(Turn.objects.filter(run=run).values_list("pk", "item_id", "number", "text"))
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        240,
        "the run to complete without a resume",
    )
    run.refresh_from_db()
    assert (run.done, run.failed, run.total) == (n, 0, n)
    turns = Turn.objects.filter(run=run)
    assert turns.count() == 3 * n
    pairs = Counter(turns.values_list("item_id", "number"))
    assert set(pairs.values()) == {1} and len(pairs) == 3 * n  # each (item, turn) once
    assert all(t.is_answered for t in turns)
    # No turn committed before the kill was asked or written again.
    after = set(turns.values_list("pk", "item_id", "number", "text"))
    assert at_kill <= after
    sent = Counter(m[-1]["content"] for m in requests(llm_server))
    keys = dict(dataset.items.values_list("pk", "key"))
    committed = {f"item {keys[item][1:]} turn {number}" for _, item, number, _ in at_kill}
    assert all(sent[question] == 1 for question in committed)
    # Each item's Response agrees with its turns.
    for response in Response.objects.filter(run=run):
        assert response.turn_answers()[-1] == response.text


def test_start_run_generation_multi_turn_on_the_command_line(
    dialogues, endpoint, chat_template, template, workers
):
    workers()
    args = ["--dataset", str(dialogues.pk), "--endpoint", "local", "--template", "chat"]
    result = start_run("generation", *args, "--multi-turn", "--wait", "--poll", "0.3")
    assert result.returncode == 0, result.stdout + result.stderr
    run = Run.objects.get()
    assert run.multi_turn and run.status == Run.Status.COMPLETED
    assert Turn.objects.filter(run=run).count() == 7
    refused = start_run("generation", *args[:-1], "qa", "--multi-turn")
    assert refused.returncode != 0 and "does not send the item's conversation" in refused.stderr


def test_a_budget_stops_between_turns_and_resume_asks_exactly_the_rest(
    settings, dialogues, endpoint, chat_template, llm_server
):
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}
    endpoint.max_tokens = 10
    endpoint.concurrency_limit = 1  # one request at a time: the stopping point is exact
    endpoint.save()
    run = multi_turn(dialogues, endpoint, chat_template, budget_usd="0.0004", use_cache=False)
    work_here()
    run.refresh_from_db()
    asked = llm_server.stats()["requests"]
    assert run.status == Run.Status.CANCELLED and run.stop_reason.startswith("budget of")
    assert 0 < asked < 7 and run.cost <= 0.0004
    assert Turn.objects.filter(run=run).count() == asked  # every answered turn was kept

    llm_server.reset(stats_only=True)
    run.set_budget("0.01")
    with transaction.atomic():
        launch(run, Run.Mode.RESUME)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.COMPLETED, 3)
    assert llm_server.stats()["requests"] == 7 - asked  # nothing asked twice
    pairs = Counter(Turn.objects.filter(run=run).values_list("item_id", "number"))
    assert len(pairs) == 7 and set(pairs.values()) == {1}


def test_turns_keep_to_the_endpoints_requests_per_minute(task, endpoint, chat_template, llm_server):
    """Rate limits hold as for single-turn runs: every turn's request waits for its place in the
    endpoint's pace (300 a minute: 0.2 s apart, a burst of 2), whichever dialogue it is from.
    Sixteen requests span at least fourteen intervals, less a late arrival's slack
    (tests/runs/test_rate_limits_run.py); unpaced, four lanes send them within a fraction of
    a second."""
    dataset = make_conversation_dataset(
        task, [[f"Dialogue {i}, turn 1.", f"Dialogue {i}, turn 2."] for i in range(8)]
    )
    endpoint.rpm_limit = 300
    endpoint.save()
    # No x-ratelimit headers: the pace is the endpoint's own limit, not what the server states.
    llm_server.configure(rpm=300, rate_headers=False)
    run = multi_turn(dataset, endpoint, chat_template)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 8, 0), run.error
    assert Turn.objects.filter(run=run).answered().count() == 16
    stats = llm_server.stats()
    assert stats["by_status"] == {"200": 16} and stats["rate_limited"] == 0
    times = sorted(entry["time"] for entry in stats["log"])
    assert times[-1] - times[0] >= 14 * 60 / 300 - 1.5
