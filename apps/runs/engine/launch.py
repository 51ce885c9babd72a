"""Launching a run: a new launch, its work list in Redis and its chunk jobs (or, in batch mode,
its submit job), all after the caller's transaction commits."""

from django.db import transaction

from apps.runs.engine.batch import submit_job
from apps.runs.engine.budget import start_spend
from apps.runs.engine.chunk import chunk_job, chunk_jobs, chunk_timeout
from apps.runs.engine.contract import executor_for, is_registered
from apps.runs.engine.lifecycle import settle
from apps.runs.engine.polls import batch_poll_claim, poll_batches_in
from apps.runs.engine.redis_keys import (
    BATCH_DUE_KEY,
    LIVE_KEY,
    again_key,
    batch_job_id,
    batch_submitting_key,
    job_id,
    launch_key,
    live_field,
    redis_connection,
    seq_key,
    stop_key,
    todo_key,
)
from apps.runs.engine.tuning import (
    BATCH_SUBMIT_TIMEOUT,
    KEY_TTL,
)
from apps.runs.models import Run, usd
from evalsite.enqueue import enqueue


# ---- launching --------------------------------------------------------------------------------------
class LaunchError(Exception):
    """The run cannot be (re)started now; the message says why."""


def launch(run: Run, mode: str = Run.Mode.RESUME) -> int:
    """Start a new launch of `run` in `mode`; returns how many units it will do.

    Call inside a transaction (or autocommit): the Redis list and the jobs appear only
    after commit, so no worker sees a half-made launch.
    """
    if not is_registered(run.kind):
        raise LaunchError(f"{run} is read from a file: there is nothing to run.")
    plugin = executor_for(run)
    if run.batch and (refusal := batch_refusal(run)):
        raise LaunchError(refusal)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.is_active and not locked.is_stalled and locked.launch > 0:
            raise LaunchError("This run is still going; cancel it first or wait for it to end.")
        if locked.budget_usd is not None and locked.cost >= float(locked.budget_usd):
            raise LaunchError(
                f"This run has spent {usd(locked.cost)} of its {usd(float(locked.budget_usd))} "
                "budget: raise the budget to go on."
            )
        number = locked.begin_launch(mode)
        keys = plugin.pending_keys(locked, mode)
        done, failed = plugin.settled_counts(locked, mode)
        Run.objects.filter(pk=run.pk).update(
            total=plugin.total(locked), done=done, failed=failed, progress_base=done + failed
        )
        locked.refresh_from_db()
        if locked.batch:
            count = _launch_batch(locked, keys)
            run.refresh_from_db()
            return count
        if not keys:
            settle(locked, plugin)
            run.refresh_from_db()
            return 0
        lanes = max(1, plugin.lanes(locked))
        n_jobs = chunk_jobs(len(keys), locked.chunk_size)
        run_id = run.pk
        timeout = chunk_timeout(locked, lanes, len(keys))
        spent = locked.cost

        def _push() -> None:
            conn = redis_connection()
            pipe = conn.pipeline()  # MULTI: the watchdog never sees the launch without its list
            pipe.delete(stop_key(run_id))
            pipe.set(launch_key(run_id), number, ex=KEY_TTL)
            if number > 1:
                pipe.delete(todo_key(run_id, number - 1), again_key(run_id, number - 1))
                pipe.hdel(LIVE_KEY, live_field(run_id, number - 1))
            for start in range(0, len(keys), 5000):
                pipe.rpush(todo_key(run_id, number), *keys[start : start + 5000])
            pipe.expire(todo_key(run_id, number), KEY_TTL)
            pipe.set(seq_key(run_id, number), n_jobs - 1, ex=KEY_TTL)
            pipe.hset(LIVE_KEY, live_field(run_id, number), timeout)
            start_spend(pipe, run_id, spent)
            pipe.execute()

        transaction.on_commit(_push)
        for n in range(n_jobs):
            enqueue(
                chunk_job,
                run_id,
                number,
                n,
                queue="runs",
                job_id=job_id(run_id, number, n),
                timeout=timeout,
            )
    run.refresh_from_db()
    return len(keys)


def batch_refusal(run: Run) -> str:
    """Why `run` cannot be sent as a batch; blank when it can."""
    if run.endpoint is None:
        return "Batch mode sends requests to a model: this run asks none (a rule-based judge)."
    if run.multi_turn and run.kind != Run.Kind.GENERATION:
        return (
            f"Batch mode asks multi-turn generation runs turn by turn; a {run.get_kind_display()} "
            "run cannot be sent as a batch: launch it without batch mode."
        )
    return run.endpoint.batch_refusal()


def _launch_batch(run: Run, keys: list[str]) -> int:
    """A batch-mode launch (apps.runs.engine.batch): one submit job sends the pending units that no
    earlier batch still holds, and the run's unfinished batches are polled on by this launch
    (a resume after a crash polls the batch it had, it never sends it twice)."""
    held = {
        key for keys_ in run.batches.unapplied().values_list("keys", flat=True) for key in keys_
    }
    fresh = [key for key in keys if key not in held]
    if not fresh and not held:
        settle(run, executor_for(run))
        return 0
    run_id, number = run.pk, run.launch

    def _push() -> None:
        conn = redis_connection()
        pipe = conn.pipeline()
        pipe.delete(stop_key(run_id))
        pipe.set(launch_key(run_id), number, ex=KEY_TTL)
        pipe.zrem(BATCH_DUE_KEY, live_field(run_id, number - 1))
        pipe.set(batch_submitting_key(run_id, number), 1, ex=KEY_TTL)
        pipe.execute()
        # Polls wait while the submit job is queued or at work; should it die, they take over.
        poll_batches_in(run_id, number, batch_poll_claim())

    transaction.on_commit(_push)
    enqueue(
        submit_job,
        run_id,
        number,
        queue="runs",
        job_id=batch_job_id(run_id, number, "submit"),
        timeout=BATCH_SUBMIT_TIMEOUT,
    )
    return len(fresh) + len(held)
