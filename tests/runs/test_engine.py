"""Generation runs end to end: real RQ worker processes, real Redis, the loopback LLM server."""

import json
import os
import signal
import time
from datetime import UTC

import django_rq
import pytest
from django.utils import timezone
from rq import Worker
from rq.job import Job, JobStatus

from apps.runs.engine.chunk import chunk_job
from apps.runs.engine.launch import launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.engine.reaper import reap
from apps.runs.engine.redis_keys import (
    again_key,
    held_key,
    job_id,
    jobs_key,
    redis_connection,
    todo_key,
)
from apps.runs.models import AttemptLog, ErrorKind, Response, Run
from tests.base import wait_for, work
from tests.factories import make_qa_dataset
from tests.runs.conftest import descendants, kill_hard

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PRICES = json.dumps({"test-model": [1.5, 6.0]})


def snapshot(run: Run) -> dict[int, tuple]:
    return {
        r["item_id"]: (r["pk"], r["status"], r["text"], r["updated_at"], r["launch"])
        for r in Response.objects.filter(run=run).values(
            "pk", "item_id", "status", "text", "updated_at", "launch"
        )
    }


def test_a_run_answers_every_item_exactly_once_with_tokens_and_cost(start, dataset, llm_server):
    run = start(logging_mode="all")
    assert run.status == Run.Status.QUEUED and run.total == 30
    assert django_rq.get_queue("runs").job_ids == [f"run-{run.pk}-l1-chunk-0"]
    work(EVALSITE_PRICE_TABLE=PRICES)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert (run.done, run.failed, run.total) == (30, 0, 30)
    responses = Response.objects.filter(run=run).select_related("item")
    assert responses.count() == 30
    for response in responses:
        assert response.text == f"echo: Q: {response.item.fields['question']}"
        assert response.finish_reason == "stop" and response.attempts == 1
        price = response.prompt_tokens * 1.5 + response.completion_tokens * 6.0
        assert response.cost == pytest.approx(price / 1_000_000)
    assert run.prompt_tokens == sum(r.prompt_tokens for r in responses) > 0
    assert run.cost == pytest.approx(sum(r.cost for r in responses))
    assert AttemptLog.objects.filter(run=run, ok=True).count() == 30
    log = AttemptLog.objects.filter(run=run).first()
    assert log.request_messages[0] == {"role": "system", "content": "Answer briefly."}
    sent = llm_server.stats()["log"]
    assert len(sent) == 30 and {e["key_last4"] for e in sent} == {"9e7d"}


def test_errors_and_garbage_end_answered_or_failed_with_logs_and_retry_failed_completes(
    start, task, endpoint, llm_server
):
    dataset = make_qa_dataset(task, 120, name="big")
    endpoint.max_retries = 2
    endpoint.save()
    llm_server.configure(
        error_rate={"429": 0.05, "500": 0.05},
        garbage_rate=0.05,
        retry_after=0.01,
        seed=4,
        # Two items fail every attempt of this launch (3 attempts), whatever the dice say.
        script=[
            {"match": "What is 7 + 7?", "status": 500, "times": 3},
            {"match": "What is 9 + 9?", "garbage": True, "times": 3},
        ],
    )
    run = start(dataset=dataset, logging_mode="failed")
    work()
    run.refresh_from_db()
    stats = llm_server.stats(log=False)
    assert stats["by_outcome"].get("garbage", 0) >= 3 and stats["by_status"].get("429", 0) >= 1

    assert run.status == Run.Status.COMPLETED_WITH_FAILURES
    responses = Response.objects.filter(run=run)
    assert responses.count() == 120 and run.done + run.failed == 120
    failed = list(responses.filter(status=Response.Status.FAILED).select_related("item"))
    assert {"q7", "q9"} <= {r.item.key for r in failed}
    assert run.failed == len(failed)
    for response in failed:
        assert response.error_kind == ErrorKind.API_ERROR and response.error
        logs = AttemptLog.objects.filter(run=run, item=response.item)
        assert logs.count() == response.attempts == 3
        assert all(not log.ok and log.error and log.request_messages for log in logs)
    q9 = next(r for r in failed if r.item.key == "q9")
    assert "not JSON" in q9.error
    assert "502 Bad Gateway" in AttemptLog.objects.filter(run=run, item=q9.item).last().raw_reply
    # Items that succeeded after a retry keep the failed attempts' logs (logging: failed).
    retried_ok = responses.filter(status=Response.Status.OK, attempts__gt=1)
    for response in retried_ok:
        assert AttemptLog.objects.filter(run=run, item=response.item, ok=False).count() == (
            response.attempts - 1
        )
    ok_before = snapshot(run)
    ok_before = {k: v for k, v in ok_before.items() if v[1] == "ok"}
    logs_before = AttemptLog.objects.filter(run=run).count()

    llm_server.configure(error_rate={}, garbage_rate=0.0)
    llm_server.reset(stats_only=True)
    assert launch(run, Run.Mode.RETRY_FAILED) == len(failed)
    work()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and (run.done, run.failed) == (120, 0)
    assert llm_server.stats(log=False)["requests"] == len(failed)  # only the failed items
    after = snapshot(run)
    assert all(after[item] == row for item, row in ok_before.items())  # answered ones untouched
    assert AttemptLog.objects.filter(run=run).count() == logs_before  # history kept
    assert Response.objects.filter(run=run, status="ok").count() == 120


def test_a_timeout_is_a_failure_with_its_cause_not_a_hang(start, endpoint, llm_server):
    endpoint.timeout_seconds = 0.5
    endpoint.max_retries = 1
    endpoint.save()
    # The server hangs for its default 300 s: a worker that waited it out would miss the 240 s
    # it is given, which a loaded machine needs anyway to start a worker (60 s was too few).
    llm_server.configure(script=[{"match": "What is 3 + 3?", "hang": True}])
    run = start()
    work(timeout=240)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES and run.failed == 1
    response = Response.objects.get(run=run, status="failed")
    assert response.item.key == "q3" and response.error_kind == ErrorKind.TIMEOUT
    assert response.error == "no answer within 0.5 s" and response.attempts == 2


def test_a_refused_key_stops_the_run_at_once_and_resume_finishes_it(start, endpoint, llm_server):
    llm_server.configure(require_key="sk-the-right-one")
    run = start()
    work()
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("Stopped: the API key was refused (401)")
    assert "SECRET" not in run.error
    assert llm_server.stats(log=False)["requests"] <= endpoint.concurrency_limit + 4
    assert Response.objects.filter(run=run).count() == 0  # no item blamed for the key
    assert AttemptLog.objects.filter(run=run, ok=False).exists()

    endpoint.api_key_secret = "sk-the-right-one"
    endpoint.save()
    launch(run, Run.Mode.RESUME)
    work()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.done == 30 and not run.error


@pytest.mark.parametrize(
    ("mode", "expected"), [("all", {True: 7, False: 2}), ("failed", {False: 2}), ("none", {})]
)
def test_logging_mode_decides_which_attempts_are_stored(start, task, llm_server, mode, expected):
    dataset = make_qa_dataset(task, 8, name=f"logs-{mode}")
    llm_server.configure(
        script=[
            {"match": "What is 2 + 2?", "status": 500, "times": 1},
            {"match": "What is 5 + 5?", "status": 400},
        ]
    )
    run = start(dataset=dataset, logging_mode=mode)
    work()
    run.refresh_from_db()
    assert (run.done, run.failed) == (7, 1)
    counts = {}
    for log in AttemptLog.objects.filter(run=run):
        counts[log.ok] = counts.get(log.ok, 0) + 1
    # 7 answers (one after a 500), and two failed attempts: that 500 and a refused 400.
    assert counts == expected
    failed = Response.objects.get(run=run, status="failed")
    assert failed.error.startswith("the request was refused (400)") and failed.attempts == 1


def test_cancel_stops_new_requests_within_seconds_and_resume_finishes(
    start, task, endpoint, llm_server, workers
):
    dataset = make_qa_dataset(task, 60, name="slow")
    endpoint.concurrency_limit = 2
    endpoint.save()
    llm_server.configure(latency=0.3)
    run = start(dataset=dataset, chunk_size=20)
    workers()
    wait_for(lambda: Run.objects.get(pk=run.pk).done >= 4, what="some answers")
    cancel(run)
    wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED, 20, "cancelled")
    time.sleep(1.0)  # requests already sent may still land
    sent = llm_server.stats(log=False)["requests"]
    time.sleep(2.0)
    assert llm_server.stats(log=False)["requests"] == sent  # nothing new after the cancel
    run.refresh_from_db()
    assert run.done < 60 and run.finished_at is not None
    before = snapshot(run)
    assert len(before) == run.done

    llm_server.configure(latency=0.0)
    assert launch(run, Run.Mode.RESUME) == 60 - run.done
    wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED, 60, "completed")
    after = snapshot(run)
    assert len(after) == 60 and all(after[item] == row for item, row in before.items())


# ---- a dead worker's units go to live workers by themselves (issue #10) ---------------------
RECOVERY_LIMIT = 45.0  # a lease (15 s) + a watchdog tick (2 s) + the rest of the run, with margin


def busy_horses(run: Run) -> list[tuple[str, int]]:
    """(job id, work horse pid) of every worker running a chunk of `run` now. RQ's worker
    registry names the worker and its job; the horse is the worker process's child."""
    found = []
    for worker in Worker.all(connection=django_rq.get_connection("default")):
        job = worker.get_current_job_id()
        if job and job.startswith(f"run-{run.pk}-l{run.launch}-") and worker.pid:
            found += [(job, pid) for pid in descendants(worker.pid)]
    return found


def replacement_chunks(run: Run, launched: int) -> list[str]:
    """Chunk jobs the watchdog enqueued (numbers after the launch's) wherever they are now."""
    queue = django_rq.get_queue("runs")
    ids = set(queue.job_ids)
    for registry in (queue.started_job_registry, queue.finished_job_registry):
        ids.update(registry.get_job_ids())
    prefix = f"run-{run.pk}-l{run.launch}-chunk-"
    return sorted(i for i in ids if i.startswith(prefix) and int(i[len(prefix) :]) >= launched)


def handed_over_after(run: Run, launched: int, killed: float) -> float:
    """Seconds from the kill (time.time()) to the first replacement chunk's enqueueing."""
    first = Job.fetch(replacement_chunks(run, launched)[0], connection=redis_connection())
    enqueued = first.enqueued_at
    if enqueued.tzinfo is None:
        enqueued = enqueued.replace(tzinfo=UTC)
    return enqueued.timestamp() - killed


def asked(llm_server, question: str) -> int:
    return sum(
        1
        for entry in llm_server.stats()["log"]
        if entry["messages"][-1]["content"] == f"Q: {question}"
    )


def assert_every_item_once(run: Run, at_kill: dict, llm_server, n: int) -> None:
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    responses = Response.objects.filter(run=run)
    assert responses.count() == n and responses.values("item").distinct().count() == n
    assert (run.done, run.failed, run.total) == (n, 0, n)
    assert run.prompt_tokens == sum(r.prompt_tokens for r in responses)  # nothing counted twice
    final = snapshot(run)
    assert all(final[item] == row for item, row in at_kill.items())  # no finished answer lost
    for response in responses.filter(item_id__in=at_kill).select_related("item"):
        assert asked(llm_server, response.item.fields["question"]) == 1  # and none redone


def test_a_killed_work_horse_hands_its_units_to_a_live_worker_by_itself(
    start, task, endpoint, llm_server, workers
):
    dataset = make_qa_dataset(task, 300, name="horse")
    endpoint.concurrency_limit = 8
    endpoint.save()
    llm_server.configure(latency=0.2)
    run = start(dataset=dataset, chunk_size=50, logging_mode="none")
    workers()
    workers()
    wait_for(
        lambda: len(busy_horses(run)) == 2 and Run.objects.get(pk=run.pk).done >= 40,
        what="both workers on the run",
    )
    job, horse = busy_horses(run)[0]
    os.kill(horse, signal.SIGKILL)  # the work horse only: its worker process lives on
    killed = time.time()
    at_kill = snapshot(run)
    assert 40 <= len(at_kill) < 300

    # No resume, no operator: the run ends by itself, well before it would show as stalled.
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        RECOVERY_LIMIT,
        "the run to complete without a resume",
    )
    print(
        f"horse killed: units handed over after {handed_over_after(run, 6, killed):.1f} s,"
        f" run completed after {time.time() - killed:.1f} s"
    )
    failed = django_rq.get_queue("runs").failed_job_registry.get_job_ids()
    assert job in failed  # RQ saw the horse die...
    assert replacement_chunks(run, launched=6)  # ...and the watchdog replaced its chunk
    assert_every_item_once(run, at_kill, llm_server, 300)


def test_a_killed_worker_process_hands_its_units_to_another_worker_by_itself(
    start, task, endpoint, llm_server, workers
):
    dataset = make_qa_dataset(task, 300, name="kill")
    endpoint.concurrency_limit = 8
    endpoint.save()
    llm_server.configure(latency=0.2)
    run = start(dataset=dataset, chunk_size=50, logging_mode="none")
    first = workers()
    workers()
    wait_for(
        lambda: len(busy_horses(run)) == 2 and Run.objects.get(pk=run.pk).done >= 40,
        what="both workers on the run",
    )
    kill_hard(first)  # the worker process and its horse: no one there records anything
    killed = time.time()
    at_kill = snapshot(run)
    assert 40 <= len(at_kill) < 300

    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED,
        RECOVERY_LIMIT,
        "the run to complete without a resume",
    )
    print(
        f"worker killed: units handed over after {handed_over_after(run, 6, killed):.1f} s,"
        f" run completed after {time.time() - killed:.1f} s"
    )
    assert_every_item_once(run, at_kill, llm_server, 300)


def test_the_watchdog_hands_back_only_dead_chunks_units_and_nothing_already_answered(
    start, llm_server, redis_conn
):
    """Three chunks of one run are registered, as if workers ran them: chunk 0's process died
    (its lease ran out; RQ still thinks its job runs), chunk 1's horse was killed (its lease is
    fresh, RQ recorded the failure), chunk 2 is slow but alive (fresh lease, job running).
    Chunk 0 had committed 3 of its 10 units before dying."""
    run = start(chunk_size=10)
    django_rq.get_queue("runs").empty()  # the three jobs were taken by those workers
    run.mark_running()
    seconds, micros = redis_conn.time()
    now_ms = seconds * 1000 + micros // 1000
    todo = todo_key(run.pk, 1)
    chunks = {0: (now_ms - 1000, JobStatus.STARTED), 1: (now_ms + 15000, JobStatus.FAILED)}
    chunks[2] = (now_ms + 10000, JobStatus.STARTED)
    held = {}
    for n, (lease, status) in chunks.items():
        name = job_id(run.pk, 1, n)
        job = Job.create(chunk_job, args=(run.pk, 1, n), id=name, connection=redis_conn)
        job.save()
        job.set_status(status)
        held[n] = [k.decode() for k in redis_conn.lpop(todo, 10 if n == 0 else 5)]
        redis_conn.sadd(held_key(run.pk, 1, name), *held[n])
        redis_conn.zadd(jobs_key(run.pk, 1), {name: lease})
    answered = sorted(int(k) for k in held[0][:3])
    for item_id in answered:
        Response.objects.create(
            run=run, item_id=item_id, status="ok", text="answered before the kill", launch=1
        )
    run.add_progress(done=3)

    replacements = reap(redis_conn)
    assert sorted(replacements) == [job_id(run.pk, 1, n) for n in (3, 4)]
    assert reap(redis_conn) == []  # handed back once only
    again = {k.decode() for k in redis_conn.lrange(again_key(run.pk, 1), 0, -1)}
    assert again == {*held[0], *held[1]}
    alive = held_key(run.pk, 1, job_id(run.pk, 1, 2))
    assert {k.decode() for k in redis_conn.smembers(alive)} == set(held[2])  # left alone
    assert redis_conn.zscore(jobs_key(run.pk, 1), job_id(run.pk, 1, 2))

    # Then chunk 2's worker dies as well; the replacements finish the run.
    redis_conn.zadd(jobs_key(run.pk, 1), {job_id(run.pk, 1, 2): now_ms - 1})
    assert reap(redis_conn) == [job_id(run.pk, 1, 5)]
    work()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and (run.done, run.failed) == (30, 0)
    assert Response.objects.filter(run=run).count() == 30
    kept = Response.objects.filter(run=run, item_id__in=answered)
    assert {r.text for r in kept} == {"answered before the kill"}
    assert llm_server.stats(log=False)["requests"] == 27  # the 3 committed units not asked again


def test_the_concurrency_limit_holds_with_three_workers_on_one_run(
    start, task, endpoint, llm_server, workers
):
    dataset = make_qa_dataset(task, 90, name="shared")
    endpoint.concurrency_limit = 3
    endpoint.save()
    llm_server.configure(latency=0.2)
    run = start(dataset=dataset, chunk_size=10)
    for _ in range(3):
        workers()
    wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED, 120, "completed")
    stats = llm_server.stats(log=False)
    assert stats["requests"] == 90
    assert stats["peak_concurrency"] == 3  # never above the limit, and the limit was used
    queue = django_rq.get_queue("runs")
    registry = queue.finished_job_registry
    busy = set()
    for name in registry.get_job_ids():
        job = queue.fetch_job(name)
        if job is not None and job.return_value() not in (None, "nothing to do", "0 units"):
            busy.add(job.worker_name)
    assert len(busy) >= 2  # the run really was shared between worker processes


def test_a_stalled_run_is_shown_and_can_be_resumed(start, reviewer_client, llm_server):
    run = start()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        started_at=timezone.now(),
        heartbeat_at=timezone.now() - Run.STALL_AFTER - timezone.timedelta(seconds=5),
    )
    django_rq.get_queue("runs").empty()  # its worker died with the jobs
    page = reviewer_client.get(run.get_absolute_url()).content.decode()
    assert "Stalled" in page and 'id="resume-run"' in page and 'id="cancel-run"' not in page
    response = reviewer_client.post(f"/runs/{run.pk}/resume/")
    assert response.status_code == 302
    work()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.launch == 2 and run.done == 30
