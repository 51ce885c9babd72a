"""Batch mode end to end: real worker processes (their watchdog enqueues the polls), real Redis,
the real openai SDK against the loopback server's Batch API (tests/llm_batches.py)."""

import io
import json
import subprocess
import sys
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from apps.judges.launching import JudgeRunError, create_judge_run
from apps.judges.models import JudgeRound, Score
from apps.runs.engine import batch as batch_mode
from apps.runs.engine.contract import plugin_for
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import AttemptLog, ErrorKind, Response, Run, RunBatch
from tests.base import ROOT, subprocess_env, wait_for
from tests.factories import (
    make_answers_dataset,
    make_generation_run,
    make_judge,
    make_qa_dataset,
    make_task,
    rubric_reply,
)
from tests.runs.conftest import SECRET, kill_hard

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PRICES = json.dumps({"test-model": [1.5, 6.0]})
# Polls as fast as the watchdog ticks (every 2 s); a dead poll is taken over after 10 s.
WORKER_ENV = {"EVALSITE_BATCH_POLL_SECONDS": "0.2", "EVALSITE_PRICE_TABLE": PRICES}


@pytest.fixture
def batch_endpoint(endpoint):
    endpoint.supports_batch = True
    endpoint.save()
    return endpoint


def finished(run: Run, timeout: float = 90) -> Run:
    wait_for(lambda: Run.objects.get(pk=run.pk).is_terminal, timeout, f"run #{run.pk} to end")
    run.refresh_from_db()
    return run


def test_a_generation_batch_answers_each_item_once_at_the_batch_price(
    start, batch_endpoint, llm_server, workers
):
    llm_server.configure(
        script=[
            {"match": "What is 7 + 7?", "status": 400},
            # The key quoted back in a line's error never reaches the database.
            {"match": "What is 9 + 9?", "status": 500},
        ],
        echo_auth=True,
    )
    llm_server.batches(lines_per_second=100)
    run = start(logging_mode="all", batch=True)
    assert run.batch and run.status == Run.Status.QUEUED
    workers(**WORKER_ENV)
    run = finished(run)
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES, run.error
    assert (run.done, run.failed, run.total) == (28, 2, 30)

    responses = {r.item.key: r for r in Response.objects.filter(run=run).select_related("item")}
    assert len(responses) == 30 == Response.objects.filter(run=run).count()
    assert responses["q3"].text == "echo: Q: What is 3 + 3?"
    assert responses["q3"].attempts == 1 and responses["q3"].finish_reason == "stop"
    # "Answer briefly." + "Q: What is i + i?" = 2 + 6 words in, "echo: Q: What is i + i?" = 7
    # out: (8 × 1.5 + 7 × 6.0) / 1e6 = 54e-6 at the listed price, half of it in a batch.
    assert (responses["q3"].prompt_tokens, responses["q3"].completion_tokens) == (8, 7)
    assert responses["q3"].cost == pytest.approx(27e-6)
    assert run.cost == pytest.approx(28 * 27e-6)
    assert (run.prompt_tokens, run.completion_tokens) == (28 * 8, 28 * 7)

    refused, failed = responses["q7"], responses["q9"]
    assert refused.status == failed.status == Response.Status.FAILED
    assert refused.error_kind == ErrorKind.API_ERROR
    assert refused.error == "the request was refused (400): Simulated HTTP 400."
    assert failed.error.startswith("the server failed (500) within the batch: Simulated HTTP 500.")
    assert SECRET not in failed.error and "[api key]" in failed.error

    # One attempt log per item: the answered ones with their reply, the failed with the error.
    logs = AttemptLog.objects.filter(run=run)
    assert logs.count() == 30 and logs.filter(ok=True).count() == 28
    log = logs.get(item__key="q3")
    assert log.request_messages == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Q: What is 3 + 3?"},
    ]
    assert json.loads(log.raw_reply)["choices"][0]["message"]["content"] == responses["q3"].text
    assert log.cost == pytest.approx(27e-6) and log.prompt_tokens == 8
    assert logs.get(item__key="q7").error == refused.error
    assert not AttemptLog.objects.filter(run=run, raw_reply__contains=SECRET).exists()

    # One file, one batch, every request in it; no request outside the batch.
    seen = llm_server.batches()
    assert len(seen["batches"]) == 1 and seen["batches"][0]["request_counts"]["total"] == 30
    assert [f["purpose"] for f in seen["files"]].count("batch") == 1
    sent = llm_server.stats()["log"]
    assert len(sent) == 30 and {e["batch_id"] for e in sent} == {seen["batches"][0]["id"]}
    row = RunBatch.objects.get(run=run)
    assert (row.status, row.requests, row.completed, row.failed) == ("completed", 30, 28, 2)
    assert row.applied_at is not None and row.batch_id == seen["batches"][0]["id"]


def test_a_big_run_is_split_into_files_within_the_limits(
    start, batch_endpoint, llm_server, workers
):
    llm_server.batches(lines_per_second=200)
    run = start(batch=True, epochs=2)  # 60 units (item × epoch) of one request each
    workers(**WORKER_ENV, EVALSITE_BATCH_MAX_REQUESTS="25")
    run = finished(run)
    assert run.status == Run.Status.COMPLETED, run.error
    assert Response.objects.filter(run=run).count() == 60
    rows = list(RunBatch.objects.filter(run=run).order_by("part"))
    assert [r.requests for r in rows] == [25, 25, 10]
    assert [len(r.keys) for r in rows] == [25, 25, 10]
    assert len(llm_server.batches()["batches"]) == 3


def test_cancel_mid_batch_cancels_at_the_provider_and_resume_sends_only_the_rest(
    start, batch_endpoint, llm_server, workers
):
    # The batch holds after 10 of its 30 lines, however slowly a loaded machine polls it.
    llm_server.batches(lines_per_second=50, hold_after=10)
    run = start(batch=True)
    workers(**WORKER_ENV)
    wait_for(
        lambda: RunBatch.objects.filter(run=run, completed__gte=10).exists(),
        60,
        "the batch to get going",
    )
    run.refresh_from_db()
    cancel(run)
    run = finished(run)
    assert run.status == Run.Status.CANCELLED
    seen = llm_server.batches()
    assert seen["cancel_requests"] == 1 and seen["batches"][0]["status"] == "cancelled"
    answered = seen["batches"][0]["request_counts"]["completed"]
    assert answered == 10
    # What the batch answered before it stopped is kept; the rest has no result.
    assert Response.objects.filter(run=run).count() == answered == run.done
    assert run.not_run == 30 - answered

    llm_server.batches(lines_per_second=200, hold_after=None)
    with transaction.atomic():
        count = launch(run, Run.Mode.RESUME)
    assert count == 30 - answered
    run = finished(run)
    assert run.status == Run.Status.COMPLETED
    assert Response.objects.filter(run=run).count() == 30
    second = llm_server.batches()["batches"][-1]
    assert second["request_counts"]["total"] == 30 - answered


def test_a_worker_killed_while_polling_finishes_after_restart_without_sending_again(
    start, batch_endpoint, llm_server, workers
):
    # Held after 15 lines: the worker dies while the batch is surely still at the provider.
    llm_server.batches(lines_per_second=50, hold_after=15)
    run = start(batch=True)
    worker = workers(**WORKER_ENV)
    wait_for(
        lambda: RunBatch.objects.filter(run=run, completed__gte=15).exists(),
        60,
        "the batch to be polled",
    )
    kill_hard(worker)
    time.sleep(1)
    workers(**WORKER_ENV)
    llm_server.batches(hold_after=None)
    run = finished(run, timeout=120)
    assert run.status == Run.Status.COMPLETED, run.error
    assert Response.objects.filter(run=run).count() == 30
    seen = llm_server.batches()
    assert len(seen["batches"]) == 1 and len(seen["files"]) == 2  # the input and its output
    assert llm_server.stats()["requests"] == 30


def test_the_crash_window_after_the_provider_made_the_batch_finds_it_again(
    start, batch_endpoint, llm_server, workers
):
    """The submit job died after the provider made the batch but before its id was saved: the
    next job finds the file by its name and the batch by its file id."""
    llm_server.batches(lines_per_second=200)
    run = start(batch=True)
    # What the dead job left: the row with its keys, and at the provider its file and batch.
    plugin = plugin_for(run)
    run.mark_running()
    batch_mode._record_parts(run, plugin, plugin.pending_keys(run, Run.Mode.RESUME))
    row = RunBatch.objects.get(run=run)
    provider = batch_mode.Provider(batch_endpoint)
    lines = b"".join(b"".join(ls) for _, ls in batch_mode.render(run, plugin, row.keys))
    file_id = provider.upload(row.filename, io.BytesIO(lines))
    RunBatch.objects.filter(pk=row.pk).update(input_file_id=file_id)
    row.refresh_from_db()
    made = provider.create(row)
    workers(**WORKER_ENV)
    run = finished(run)
    assert run.status == Run.Status.COMPLETED, run.error
    assert Response.objects.filter(run=run).count() == 30
    seen = llm_server.batches()
    assert [b["id"] for b in seen["batches"]] == [made.id]
    assert RunBatch.objects.get(run=run).batch_id == made.id


def test_an_expired_batch_fails_the_items_it_never_answered(
    start, batch_endpoint, llm_server, workers
):
    llm_server.batches(lines_per_second=200, expire_after=20)
    run = start(batch=True)
    workers(**WORKER_ENV)
    run = finished(run)
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES
    assert (run.done, run.failed) == (20, 10)
    late = Response.objects.filter(run=run, status=Response.Status.FAILED)
    assert {r.error for r in late} == {
        "the batch could not do this request: This request could not be executed before "
        "the completion window expired."
    }


def test_an_endpoint_without_batch_support_is_refused_before_start(
    start, endpoint, dataset, template
):
    with pytest.raises(ValueError, match="not marked as supporting the Batch API"):
        start(batch=True)
    assert not Run.objects.exists()
    with pytest.raises(CommandError, match="not marked as supporting the Batch API"):
        call_command(
            "start_run",
            "generation",
            "--dataset",
            str(dataset.pk),
            "--endpoint",
            endpoint.name,
            "--template",
            template.name,
            "--batch",
        )
    assert not Run.objects.exists()
    # A run made some other way is still refused at launch.
    run = create_generation_run(dataset, endpoint, template)
    run.batch = True
    run.save()
    with pytest.raises(LaunchError, match="Supports the Batch API"):
        launch(run, Run.Mode.RESUME)


def test_a_judge_run_in_batch_mode(task, batch_endpoint, llm_server, workers):
    dataset = make_answers_dataset(task, 6)
    judge = make_judge(task, n_iter=2)
    llm_server.configure(
        default_reply=rubric_reply(4, 5),
        script=[
            {"match": "number 1\n</response>", "reply": rubric_reply(2, 3, "weak")},
            {"match": "number 2\n</response>", "reply": "no scores here"},
        ],
    )
    with transaction.atomic():
        run = create_judge_run(
            judge, endpoint=batch_endpoint, dataset=dataset, source_column="response", batch=True
        )
    # At most 5 requests a file: an item's two rounds stay in one file, so files of 4.
    workers(**WORKER_ENV, EVALSITE_BATCH_MAX_REQUESTS="5")
    run = finished(run)
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES, run.error
    assert (run.done, run.failed) == (5, 1)
    rounds = JudgeRound.objects.filter(run=run)
    assert rounds.count() == 12  # 6 items × 2 rounds, each once
    weak = Score.objects.get(run=run, item__position=1, subject="accuracy")
    assert weak.judge_value == 2 and weak.round_values == [2, 2]
    bad = Score.objects.get(run=run, item__position=2, subject="accuracy")
    assert bad.status == Score.Status.FAILED and bad.error_kind == ErrorKind.UNPARSEABLE
    seen = llm_server.batches()["batches"]
    assert [b["request_counts"]["total"] for b in seen] == [4, 4, 4]
    assert [len(r.keys) for r in RunBatch.objects.filter(run=run).order_by("part")] == [2, 2, 2]
    assert run.cost > 0 and run.cost == pytest.approx(sum(r.cost for r in rounds))


def test_a_rule_based_judge_cannot_batch(task, batch_endpoint):
    dataset = make_answers_dataset(task, 2)
    judge = make_judge(task, kind="metric")
    with pytest.raises(JudgeRunError, match="batch mode is for LLM judges"):
        create_judge_run(judge, dataset=dataset, source_column="response", batch=True)


def start_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "start_run", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_start_and_cancel_a_batch_run_from_the_command_line(
    dataset, batch_endpoint, template, llm_server, workers
):
    llm_server.batches(lines_per_second=0.5)  # a minute for the whole batch: time to cancel
    workers(**WORKER_ENV)
    started = start_run(
        "generation",
        *("--dataset", str(dataset.pk), "--endpoint", "local", "--template", "qa", "--batch"),
    )
    assert started.returncode == 0, started.stderr
    run = Run.objects.get()
    assert run.batch
    assert started.stdout.strip().endswith("in batch mode: 30 items.")
    wait_for(lambda: RunBatch.objects.filter(run=run, completed__gte=2).exists(), 60, "answers")
    stopped = start_run("cancel", str(run.pk), "--wait", "--poll", "0.3")
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    assert f"Run #{run.pk}: cancelling (its batch is cancelled at the provider)." in stopped.stdout
    assert "cancelled:" in stopped.stdout.splitlines()[-1]
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert llm_server.batches()["cancel_requests"] == 1
    assert Response.objects.filter(run=run).count() == run.done >= 2
    again = start_run("cancel", str(run.pk))
    assert again.returncode == 1 and "is not going (cancelled)" in again.stderr


def test_the_run_page_says_batch_where_a_batch_gives_no_time_per_request(viewer_client) -> None:
    """Seen in the install: every answer of a batch run read "0 ms"."""
    dataset = make_qa_dataset(make_task("qa"), 2)
    run = make_generation_run(dataset, {0: "four", 1: "six"})
    Response.objects.filter(run=run).update(attempts=1, latency_ms=0)
    page = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("0 ms") == 2
    Run.objects.filter(pk=run.pk).update(batch=True)
    page = viewer_client.get(f"/runs/{run.pk}/").content.decode()
    assert "0 ms" not in page and page.count(">batch</span>") == 2


def test_a_batch_run_reads_and_fills_the_response_cache(start, batch_endpoint, llm_server, workers):
    """The cost estimate's "batch and cache" row holds: a batch stores what it answers, and a
    batch run that reads the cache sends only the units it does not hold."""
    llm_server.configure(script=[{"match": "What is 7 + 7?", "status": 400}])
    llm_server.batches(lines_per_second=100)
    workers(**WORKER_ENV)
    first = finished(start(batch=True, use_cache=True))
    assert (first.done, first.failed, first.cached_count) == (29, 1, 0)
    assert len(llm_server.batches()["batches"]) == 1

    # Every item but the failed one is answered from the cache; only q7 goes to a batch.
    llm_server.configure(script=[])
    again = finished(start(batch=True, use_cache=True, label="again"))
    assert again.status == Run.Status.COMPLETED, again.error
    assert (again.done, again.failed, again.cached_count, again.sent_count) == (30, 0, 29, 1)
    assert again.saved_cost == pytest.approx(29 * 27e-6)
    batches = llm_server.batches()["batches"]
    assert len(batches) == 2 and batches[1]["request_counts"]["total"] == 1
    texts = dict(Response.objects.filter(run=again).values_list("item__key", "text"))
    assert len(texts) == 30 and texts["q3"] == "echo: Q: What is 3 + 3?"
    assert texts["q7"] == "echo: Q: What is 7 + 7?"

    # Now the cache holds all 30: a batch run sends nothing, and so does a run without batch.
    sent = len(llm_server.stats()["log"])
    third = finished(start(batch=True, use_cache=True, label="third"))
    fourth = finished(start(use_cache=True, label="fourth"))
    assert [(r.done, r.cached_count, r.sent_count) for r in (third, fourth)] == [(30, 30, 0)] * 2
    assert len(llm_server.batches()["batches"]) == 2 and len(llm_server.stats()["log"]) == sent
    assert not RunBatch.objects.filter(run=third).exists()  # not even an empty file
