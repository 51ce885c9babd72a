"""The execution engine shared by generation runs and judge runs.

A run's work is a set of *units*, each named by a string key (a generation run: one key per
item, the item id; a judge run may use "item:round"). What a unit is and how it is done
belongs to the run's plug-in (a `RunPlugin`, one per `Run.Kind`); everything else is here and
the same for every run:

Launch (`launch(run, mode)`, inside the caller's transaction)
    A new launch starts (`Run.launch` + 1, status queued); the plug-in lists the pending keys for
    the mode (resume: units without a result; retry_failed: failed units; overwrite: all),
    they go to one Redis list for the launch, and `ceil(n / chunk_size)` chunk jobs
    `run-<id>-l<launch>-chunk-<n>` are enqueued on RQ after commit.

A chunk job (`chunk_job`: `run_chunk`, failing the run if the job itself crashes)
    registers a job lease, then takes keys from the launch's list in small batches (so every
    worker on every machine shares one run, and one worker keeps its lanes full from one
    chunk to the next instead of draining each chunk's tail). Taking moves the keys into the
    chunk's own *held* set in Redis (one Lua step), and a key leaves that set once its result
    is committed. It has taken at least `chunk_size` keys (or the list ran dry) before it may
    stop for its time budget, so the enqueued jobs always cover the list. `lanes` coroutines
    perform units concurrently with one `LLM` (one AsyncOpenAI client) per chunk; every
    request takes a slot of the endpoint's concurrency limit and a turn of its rate limit,
    both in Redis (apps.runs.limits). A writer task commits results in small batches, so lanes
    never wait for the database: when `FLUSH_EVERY` results wait (at most every `FLUSH_GAP`
    s, so a fast run writes bigger batches) and whenever the oldest has waited `FLUSH_AFTER`
    s. A thread renews the chunk's lease every second (`LeaseKeeper`); a heartbeat task
    writes `Run.heartbeat_at`, and notices cancel, a fatal endpoint error, a failed run or a
    newer launch within a second; lanes then stop asking.

A dead chunk (its work horse or whole worker SIGKILLed, its machine gone)
    loses what was in flight and at most the last second of answers, but not its units: they
    are in its held set. Every worker process runs a watchdog thread (apps.runs.watchdog →
    `reap`) that gives the chunk up for dead as soon as RQ records its job as ended (a killed
    horse: at once) or its lease ran out (a killed worker process: `JOB_LEASE_SECONDS`); its
    held keys go to the launch's *again* list, which chunks take before the todo list
    (dropping keys the dead chunk had already committed), and a replacement chunk job is
    enqueued. So the run finishes by itself while any worker lives.
    The job that leaves last (no registered chunk, lists empty) finalizes the run with exact
    counts from the database; if units are still pending then (work lost some other way) the
    run is marked interrupted, shown as stalled, and resume finishes it. With no worker left
    at all, the run shows as stalled after `Run.STALL_AFTER` and resume finishes it too.

A kind's plug-in (`RunPlugin`) has two sides. `RunExecutor`, what executes its runs (the
engine and batch mode call only these):
    kind: str                                           Run.Kind value it serves
    total(run) -> int                                   progress units of the run (items)
    pending_keys(run, mode) -> list[str]                work of this launch (run.launch is set)
    pending_count(run, mode) -> int                     default len(pending_keys)
    unsettled_keys(run, keys) -> list[str]              default: keys in pending_keys
    settled_counts(run, mode) -> (done, failed)         results that are not pending
    lanes(run) -> int                                   concurrent units per chunk
    prepare(run) -> ctx                                 once per chunk, DB thread (templates, judge…)
    load_units(run, ctx, keys) -> list[unit]            DB thread: everything perform needs;
                                                        a unit has `.item_id` (for the logs),
                                                        or `.log_unit` when it has no item
    async perform(run, ctx, unit, call) -> Result       no DB here; call.chat(messages) for LLM
                                                        requests, call.prompt_logprobs(prompts)
                                                        for prompt log-probabilities (both
                                                        raise LLMError; re-raise it
                                                        when .fatal), call.record(Attempt) for
                                                        rule evaluations
    failed_result(run, ctx, unit, error_kind, message) -> Result   unexpected exception in perform
    persist(run, ctx, results) -> Progress              DB thread, inside a transaction; write
                                                        domain rows exactly once (unique
                                                        constraints), return the progress deltas
`RunStarter`, what starts them:
    startable: bool                                     whether `start_run <kind>` offers it
    add_cli_arguments(parser), create_from_cli(options, user) -> Run   `start_run <kind> …`
    sample_keys(run, n), planned_requests(run, ctx, unit)  the start form's cost estimate
                                                        (apps.runs.estimate; default: none)
    The engine writes AttemptLog rows from `Result.attempts` per the run's logging mode.
    Kinds are listed in one registry, settings.RUN_KINDS (kind -> dotted path of the plug-in),
    read where a plug-in is needed (`executor_for`, `starter_of`): no kind registers itself on
    import and no module of the engine names a kind's module.
    When a run completes, the `run_finished` signal (apps.runs.signals) tells later apps.

Lifecycle: queued → running (the first chunk is ready to send) → completed / completed with
failures / cancelled / failed (a crashed job via `chunk_job`, or a fatal endpoint
error such as a refused key, with a plain message). Redis keys: evalsite:run:<id>:l<launch>:todo
(the work list), …:jobs (registered chunks scored by lease expiry), …:held:<job id> (a chunk's
uncommitted keys), …:again (keys handed back from dead chunks), …:seq (the last chunk number),
evalsite:runs:live (the launches the watchdog watches), evalsite:run:<id>:launch and :stop (read
by every chunk's heartbeat), evalsite:endpoint:<id>:inflight, :rate, :tokens and :pause
(apps.runs.limits; the heartbeat reads :pause too).
"""

import asyncio
import contextlib
import functools
import logging
import math
import threading
import time
import traceback
from argparse import ArgumentParser
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from apps.runs import cache
from apps.runs.budget import RunBudget, start_spend
from apps.runs.limits import (
    KEY_PREFIX,
    EndpointSemaphore,
    RateLimiter,
    async_redis,
    lower_limit,
    provider_limits,
)
from apps.runs.llm import (
    LLM,
    Attempt,
    Echo,
    LLMError,
    OverBudget,
    Reply,
    SlotPool,
    Stopped,
    run_async,
)
from apps.runs.models import AttemptLog, ErrorKind, LoggingMode, Run, usd
from apps.runs.signals import run_finished
from apps.runs.tuning import (
    BATCH_POLL_CLAIM_MIN,
    BATCH_POLL_TIMEOUT,
    BATCH_SUBMIT_TIMEOUT,
    CANCEL_GRACE,
    CHUNK_BUDGET_SHARE,
    CHUNK_TIMEOUT_MARGIN,
    CHUNK_TIMEOUT_MAX,
    CHUNK_TIMEOUT_MIN,
    CHUNK_TIMEOUT_SLACK,
    COMPLETION_TOKENS_GUESS,
    DB_HEARTBEAT_EVERY,
    FLUSH_AFTER,
    FLUSH_EVERY,
    FLUSH_GAP,
    HEARTBEAT_EVERY,
    JOB_LEASE_SECONDS,
    KEY_TTL,
    RATE_PROMPT_TOKENS_GUESS,
    TAKE_BATCH_MAX,
    TAKE_BATCH_MIN,
    UNIT_SECONDS_WITHOUT_ENDPOINT,
    WRITER_TICK,
)
from evalsite.enqueue import enqueue, enqueue_now

logger = logging.getLogger(__name__)


# ---- the interface ---------------------------------------------------------------------------
@dataclass
class Progress:
    done: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def __iadd__(self, other: "Progress") -> "Progress":
        self.done += other.done
        self.failed += other.failed
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost
        return self


@dataclass
class Result:
    """The outcome of one unit; `data` is the plug-in's own (a reply, scores, an error…)."""

    key: str
    item_id: int
    ok: bool
    attempts: list[Attempt] = field(default_factory=list)
    data: Any = None


@dataclass(frozen=True)
class PlannedRequest:
    """One request a unit would send (what `Call.chat` gets), for the cost estimate."""

    messages: list[dict[str, str]]
    params: dict[str, Any]
    epoch: int = 0
    round: int | None = None


class Call:
    """What `perform` may do with the outside world for one unit."""

    def __init__(self, llm: LLM | None, item_id: int, unit: int | None = None) -> None:
        self.llm = llm
        self.item_id = item_id
        # A unit that makes items instead of answering one (dataset generation): its
        # attempts are logged under this number (AttemptLog.unit).
        self.unit = unit
        self.log: list[Attempt] = []

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        if self.llm is None:
            raise LLMError(ErrorKind.INTERNAL, "this run has no endpoint to ask")
        start = len(self.log)
        try:
            return await self.llm.chat(
                messages, log=self.log, item_id=self.item_id, round=round, epoch=epoch, **params
            )
        finally:
            if self.unit is not None:
                for attempt in self.log[start:]:
                    attempt.unit = self.unit

    async def prompt_logprobs(self, prompts: list[str]) -> Echo:
        """Each prompt's token log-probabilities from the endpoint's completions API."""
        if self.llm is None:
            raise LLMError(ErrorKind.INTERNAL, "this run has no endpoint to ask")
        return await self.llm.prompt_logprobs(prompts, log=self.log, item_id=self.item_id)

    def record(self, attempt: Attempt) -> None:
        attempt.unit = self.unit if attempt.unit is None else attempt.unit
        self.log.append(attempt)


class RunExecutor(Protocol):
    """What executes a kind's runs: the engine's side of a kind (chunks, batch mode, settling).
    Methods with a body are defaults a kind may override."""

    kind: ClassVar[str]

    def total(self, run: Run) -> int: ...

    def pending_keys(self, run: Run, mode: str) -> list[str]: ...

    def pending_count(self, run: Run, mode: str) -> int:
        return len(self.pending_keys(run, mode))

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]: ...

    def lanes(self, run: Run) -> int:
        return run.endpoint.concurrency_limit if run.endpoint is not None else 1

    def unsettled_keys(self, run: Run, keys: list[str]) -> list[str]:
        """Those of `keys` this launch still has to do (a dead chunk may have done some)."""
        pending = set(self.pending_keys(run, run.mode))
        return [key for key in keys if key in pending]

    def prepare(self, run: Run) -> Any:
        return None

    def load_units(self, run: Run, ctx: Any, keys: list[str]) -> list[Any]: ...

    async def perform(self, run: Run, ctx: Any, unit: Any, call: Call) -> Result: ...

    def failed_result(
        self, run: Run, ctx: Any, unit: Any, error_kind: str, message: str
    ) -> Result: ...

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress: ...


class RunStarter(Protocol):
    """What starts a kind's runs: `start_run <kind>` and the start form's cost estimate
    (apps.runs.estimate, which also renders units through the kind's `RunExecutor` side)."""

    kind: ClassVar[str]
    # Whether `start_run <kind>` makes runs of this kind (some are made only by their page).
    startable: ClassVar[bool] = True

    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        return None

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        # Two statements: a lone `raise NotImplementedError` would make it abstract to mypy.
        message = f"{self.kind} runs cannot be started from the command line"
        raise NotImplementedError(message)

    # -- the cost estimate, on an unsaved run as a start form makes it --
    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        """Up to `n` unit keys spread over the run, and how many units it has in all."""
        return [], 0

    def planned_requests(self, run: Run, ctx: Any, unit: Any) -> list[PlannedRequest]:
        """The requests performing `unit` would send."""
        return []


class RunPlugin(RunExecutor, RunStarter, Protocol):
    """A run kind's plug-in, as the registry (settings.RUN_KINDS) names it: both sides."""


BATCH_HELP = (
    "send the requests through the provider's Batch API (endpoints marked as supporting it): "
    "answered within 24 h at the batch price"
)


def add_batch_argument(parser: ArgumentParser) -> None:
    """`--batch` for the `start_run` subcommands of kinds that ask a model."""
    parser.add_argument("--batch", action="store_true", help=BATCH_HELP)


def is_registered(kind: str) -> bool:
    """Whether runs of `kind` are executed (a response column read from a file is not)."""
    return kind in settings.RUN_KINDS


def plugin_of(kind: str) -> RunPlugin:
    """The plug-in of run kind `kind`, looked up in the registry of kinds, settings.RUN_KINDS
    (kind -> dotted path): the engine names no kind's module, and nothing registers on import."""
    return cast(RunPlugin, import_string(settings.RUN_KINDS[kind]))


def plugin_for(run: Run) -> RunPlugin:
    """Both sides of `run`'s kind (the cost estimate renders units to price them)."""
    return plugin_of(run.kind)


def executor_for(run: Run) -> RunExecutor:
    return plugin_of(run.kind)


def starter_of(kind: str) -> RunStarter:
    return plugin_of(kind)


def registered_kinds() -> list[str]:
    return sorted(settings.RUN_KINDS)


# ---- Redis keys -----------------------------------------------------------------------------------
def _key(run_id: int, suffix: str) -> str:
    return f"{KEY_PREFIX}:run:{run_id}:{suffix}"


def todo_key(run_id: int, launch: int) -> str:
    return _key(run_id, f"l{launch}:todo")


def jobs_key(run_id: int, launch: int) -> str:
    return _key(run_id, f"l{launch}:jobs")


def held_key(run_id: int, launch: int, me: str) -> str:
    """The keys chunk `me` has taken and not yet committed (a set)."""
    return _key(run_id, f"l{launch}:held:{me}")


def again_key(run_id: int, launch: int) -> str:
    """Keys handed back from dead chunks; taken before the todo list, checked against the DB."""
    return _key(run_id, f"l{launch}:again")


def seq_key(run_id: int, launch: int) -> str:
    """The last chunk number used in the launch (replacement chunks count on from it)."""
    return _key(run_id, f"l{launch}:seq")


def launch_key(run_id: int) -> str:
    return _key(run_id, "launch")


def stop_key(run_id: int) -> str:
    return _key(run_id, "stop")


# Every launch that may still have chunks: "<run id>:<launch>" -> RQ timeout of a chunk.
LIVE_KEY = f"{KEY_PREFIX}:runs:live"


def live_field(run_id: int, launch: int) -> str:
    return f"{run_id}:{launch}"


def job_id(run_id: int, launch: int, n: int) -> str:
    return f"run-{run_id}-l{launch}-chunk-{n}"


# Batch mode (apps.runs.batch): "<run id>:<launch>" -> when its batches are next polled (ms).
# The watchdog enqueues the poll job of every launch that is due; a poll that dies mid-way is
# due again once its claim (BATCH_POLL_CLAIM) lapses. Nothing else keeps a batch run going.
BATCH_DUE_KEY = f"{KEY_PREFIX}:batches:due"
BATCH_SUBMIT_JOB = "apps.runs.batch.submit_job"
BATCH_POLL_JOB = "apps.runs.batch.poll_job"


def batch_job_id(run_id: int, launch: int, what: str) -> str:
    return f"run-{run_id}-l{launch}-batch-{what}"


def batch_submitting_key(run_id: int, launch: int) -> str:
    """Set while the launch's submit job is queued or at work (it renews it): polls wait."""
    return _key(run_id, f"l{launch}:batch-submitting")


def poll_batches_in(run_id: int, launch: int, seconds: float) -> None:
    """Have the launch's batches polled in `seconds` (0: at the watchdog's next tick)."""
    conn = _redis()
    seconds_now, micros = conn.time()
    due = int(seconds_now) * 1000 + int(micros) // 1000 + int(seconds * 1000)
    conn.zadd(BATCH_DUE_KEY, {live_field(run_id, launch): due})


def _redis() -> Any:
    import django_rq

    return django_rq.get_connection("default")


_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Lua's unpack() takes a few thousand values at most: a set goes to a list in slices.
_MOVE = """
local function move(src, dst, ttl)
  local keys = redis.call('SMEMBERS', src)
  for i = 1, #keys, 1000 do
    redis.call('RPUSH', dst, unpack(keys, i, math.min(i + 999, #keys)))
  end
  if #keys > 0 then redis.call('EXPIRE', dst, ttl) end
  redis.call('DEL', src)
  return #keys
end
"""

# KEYS jobs, held, again; ARGV me, lease ms, ttl. A job that runs again under the same id
# (requeued by hand) is sure its earlier run is dead: what that run held goes back first.
_JOIN = (
    _NOW
    + _MOVE
    + """
local moved = move(KEYS[2], KEYS[3], tonumber(ARGV[3]))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return moved
"""
)

# KEYS jobs; ARGV me, lease ms, ttl. 0 when the watchdog has reaped us: we must not come back.
_RENEW = (
    _NOW
    + """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""
)

# KEYS jobs, again, todo, held; ARGV me, n, ttl. Takes up to n keys (handed-back ones first)
# into our held set in one step, so no key is ever only in a dead process's memory.
# Returns {source, keys}: source 1 = handed back, 0 = todo (no keys: both empty), -1 = reaped.
_TAKE = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {-1, {}} end
local source = 1
local keys = redis.call('LPOP', KEYS[2], ARGV[2])
if not keys then
  source = 0
  keys = redis.call('LPOP', KEYS[3], ARGV[2])
end
if not keys then return {0, {}} end
redis.call('SADD', KEYS[4], unpack(keys))
redis.call('EXPIRE', KEYS[4], tonumber(ARGV[3]))
return {source, keys}
"""

# KEYS jobs, todo, again, held; ARGV me. Registered chunks include dead ones not yet reaped:
# while one is there its units are not done, so nobody may call the run finished.
_LEAVE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[4])
return {redis.call('ZCARD', KEYS[1]), redis.call('LLEN', KEYS[2]) + redis.call('LLEN', KEYS[3])}
"""

# KEYS jobs, held, again, seq; ARGV me, "expired" | "ended", requeue (1/0), ttl.
# Atomically forgets a dead chunk and hands its held keys back; returns the number for a
# replacement chunk (0 when the launch is over: nothing to requeue), -1 when there was nothing
# to do (another watchdog was first, or the lease was renewed after all).
_REAP = (
    _NOW
    + _MOVE
    + """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return -1 end
if ARGV[2] == 'expired' and tonumber(score) > now then return -1 end
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[3] ~= '1' then
  redis.call('DEL', KEYS[2])
  return 0
end
move(KEYS[2], KEYS[3], tonumber(ARGV[4]))
local n = redis.call('INCR', KEYS[4])
redis.call('EXPIRE', KEYS[4], tonumber(ARGV[4]))
return n
"""
)

# KEYS live, jobs, todo, again; ARGV field. A launch with no chunk and no work left is over.
_FORGET = """
if redis.call('ZCARD', KEYS[2]) + redis.call('LLEN', KEYS[3]) + redis.call('LLEN', KEYS[4]) == 0 then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


def live_jobs(run_id: int, launch: int) -> int:
    now_ms = int(time.time() * 1000)
    return int(_redis().zcount(jobs_key(run_id, launch), now_ms, "+inf"))


# ---- launching --------------------------------------------------------------------------------------
class LaunchError(Exception):
    """The run cannot be (re)started now; the message says why."""


def chunk_timeout(run: Run, lanes: int, units: int = 0) -> int:
    """RQ's limit for one chunk job: its `chunk_size` units in the worst case, with margin.

    Under RPM/TPM limits (the endpoint's, or its provider's as last stated) a chunk shares
    the endpoint's pace with every other chunk, however many run at once, so it may take as
    long as the launch's `units` at that pace (a request each, of max_tokens +
    `RATE_PROMPT_TOKENS_GUESS` tokens): never less than that.
    """
    endpoint = run.endpoint
    per_unit = UNIT_SECONDS_WITHOUT_ENDPOINT
    paced = 0.0
    if endpoint is not None:
        retries = endpoint.max_retries
        per_unit = (endpoint.timeout_seconds + 5) * (retries + 1) + 30.0 * retries
        tokens = (endpoint.max_tokens or COMPLETION_TOKENS_GUESS) + RATE_PROMPT_TOKENS_GUESS
        # Limits the provider stated pace the chunk like the endpoint's own.
        told_rpm, told_tpm = (
            provider_limits([endpoint.pk])[endpoint.pk] if endpoint.pk else (None, None)
        )
        rpm = lower_limit(endpoint.rpm_limit, told_rpm)
        tpm = lower_limit(endpoint.tpm_limit, told_tpm)
        paced = units * max(60.0 / rpm if rpm else 0.0, 60.0 * tokens / tpm if tpm else 0.0)
    waves = math.ceil(max(run.chunk_size, 1) / max(lanes, 1))
    limit = max(waves * per_unit, paced) * CHUNK_TIMEOUT_MARGIN + CHUNK_TIMEOUT_SLACK
    return int(min(max(CHUNK_TIMEOUT_MIN, limit), CHUNK_TIMEOUT_MAX))


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
            _settle(locked, plugin)
            run.refresh_from_db()
            return 0
        lanes = max(1, plugin.lanes(locked))
        n_jobs = math.ceil(len(keys) / max(locked.chunk_size, 1))
        run_id = run.pk
        timeout = chunk_timeout(locked, lanes, len(keys))
        spent = locked.cost

        def _push() -> None:
            conn = _redis()
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
            enqueue(chunk_job, run_id, number, n, job_id=job_id(run_id, number, n), timeout=timeout)
    run.refresh_from_db()
    return len(keys)


def batch_refusal(run: Run) -> str:
    """Why `run` cannot be sent as a batch; blank when it can."""
    if run.endpoint is None:
        return "Batch mode sends requests to a model: this run asks none (a rule-based judge)."
    return run.endpoint.batch_refusal()


def _launch_batch(run: Run, keys: list[str]) -> int:
    """A batch-mode launch (apps.runs.batch): one submit job sends the pending units that no
    earlier batch still holds, and the run's unfinished batches are polled on by this launch
    (a resume after a crash polls the batch it had, it never sends it twice)."""
    held = {
        key for keys_ in run.batches.unapplied().values_list("keys", flat=True) for key in keys_
    }
    fresh = [key for key in keys if key not in held]
    if not fresh and not held:
        _settle(run, executor_for(run))
        return 0
    run_id, number = run.pk, run.launch

    def _push() -> None:
        conn = _redis()
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
        BATCH_SUBMIT_JOB,
        run_id,
        number,
        job_id=batch_job_id(run_id, number, "submit"),
        timeout=BATCH_SUBMIT_TIMEOUT,
    )
    return len(fresh) + len(held)


def cancel(run: Run) -> None:
    """Stop asking the endpoint within seconds; what is answered stays, resume does the rest."""
    run.request_cancel()
    if run.batch:
        # The next poll cancels the batches at the provider, writes what they answered by
        # then, and ends the run cancelled (a run not sent yet was cancelled above; the poll
        # still cancels batches it took over from an earlier launch).
        poll_batches_in(run.pk, run.launch, 0)
        run.refresh_from_db()
        return
    conn = _redis()
    conn.set(stop_key(run.pk), "cancel", ex=KEY_TTL)
    conn.delete(todo_key(run.pk, run.launch), again_key(run.pk, run.launch))
    run.refresh_from_db()
    if run.status == Run.Status.RUNNING and live_jobs(run.pk, run.launch) == 0:
        finalize(run.pk, run.launch)
    run.refresh_from_db()


def fail(run_id: int, message: str) -> None:
    """The run itself broke: every chunk stops at its next check."""
    with contextlib.suppress(Exception):
        _redis().set(stop_key(run_id), "failed", ex=KEY_TTL)
    run = Run.objects.filter(pk=run_id).first()
    if run is not None:
        run.mark_failed(message)


def finalize(run_id: int, launch: int) -> None:
    """Settle the run once no chunk of `launch` is left: exact counts and the final status."""
    run = Run.objects.select_related("endpoint").get(pk=run_id)
    if run.launch != launch:
        return  # a newer launch owns the run now
    _settle(run, executor_for(run))
    with contextlib.suppress(Exception):
        conn = _redis()
        conn.delete(
            todo_key(run_id, launch),
            jobs_key(run_id, launch),
            again_key(run_id, launch),
            seq_key(run_id, launch),
        )
        conn.hdel(LIVE_KEY, live_field(run_id, launch))


def _settle(run: Run, plugin: RunExecutor) -> None:
    done, failed = plugin.settled_counts(run, run.mode)
    if not run.is_active:
        Run.objects.filter(pk=run.pk).update(done=done, failed=failed)
        run.refresh_from_db()
        return
    if run.cancel_requested:
        run.finish(Run.Status.CANCELLED, done=done, failed=failed)
        return
    if plugin.pending_count(run, run.mode) > 0:
        Run.objects.filter(pk=run.pk).update(done=done, failed=failed)
        run.mark_interrupted()
        run.refresh_from_db()
        return
    status = Run.Status.COMPLETED_WITH_FAILURES if failed else Run.Status.COMPLETED
    if run.finish(status, done=done, failed=failed):
        # Later apps react (auto-judging, leaderboard summaries); a receiver that breaks is
        # logged and never fails the run, whose work is done.
        for receiver, error in run_finished.send_robust(sender=Run, run=run):
            if isinstance(error, Exception):
                logger.error(
                    "run_finished receiver %s failed on run #%s: %r", receiver, run.pk, error
                )


# ---- the chunk job ------------------------------------------------------------------------------
def chunk_job(run_id: int, launch: int, n: int) -> str:
    """The RQ job of one chunk. If the job itself crashes (a bug, the database or Redis gone,
    RQ's time limit), the run is marked failed with the traceback and every other chunk of it
    stops; RQ still records the job as failed."""
    try:
        return run_chunk(run_id, launch, n)
    except BaseException:
        fail(run_id, traceback.format_exc())
        raise


def run_chunk(run_id: int, launch: int, n: int) -> str:
    """Do units of `run_id`'s launch until none are left (or the budget is spent)."""
    run = Run.objects.select_related("endpoint", "template", "dataset").filter(pk=run_id).first()
    if run is None or run.launch != launch or not run.is_active or run.cancel_requested:
        return "nothing to do"
    conn = _redis()
    me = job_id(run_id, launch, n)
    conn.register_script(_JOIN)(
        keys=[jobs_key(run_id, launch), held_key(run_id, launch, me), again_key(run_id, launch)],
        args=[me, JOB_LEASE_SECONDS * 1000, KEY_TTL],
    )
    lease = LeaseKeeper(run_id, launch, me)
    try:
        plugin = executor_for(run)
        lanes = max(1, plugin.lanes(run))
        runner = ChunkRunner(
            run, plugin, me, lanes, budget=chunk_timeout(run, lanes) * CHUNK_BUDGET_SHARE
        )
        runner.lease = lease
        # Our own thread does the ORM work: the event loop thread must not touch the DB.
        connection.close()
        processed = run_async(runner.execute())
    except BaseException:
        # Fail the run before leaving, so the last one out does not call it complete.
        fail(run_id, traceback.format_exc())
        raise
    finally:
        lease.stop()
        close_old_connections()
        remaining, todo = conn.register_script(_LEAVE)(
            keys=[
                jobs_key(run_id, launch),
                todo_key(run_id, launch),
                again_key(run_id, launch),
                held_key(run_id, launch, me),
            ],
            args=[me],
        )
        if int(remaining) == 0 and int(todo) == 0:
            finalize(run_id, launch)
    return f"{processed} units"


class LeaseKeeper:
    """Renews a chunk's lease from a thread of its own while the process lives.

    Not from the event loop: a lane busy in CPU work or a slow database write must not make a
    live chunk look dead. `lost` is set when the watchdog reaped the chunk anyway (the process
    froze longer than the lease): its units are someone else's now, so it stops.
    """

    def __init__(self, run_id: int, launch: int, me: str) -> None:
        self.keys = [jobs_key(run_id, launch)]
        self.me = me
        self.lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="run-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        conn = _redis()
        renew = conn.register_script(_RENEW)
        while not self._done.wait(HEARTBEAT_EVERY):
            renewed = None
            with contextlib.suppress(Exception):  # a Redis blip: the lease outlasts many
                renewed = renew(keys=self.keys, args=[self.me, JOB_LEASE_SECONDS * 1000, KEY_TTL])
            if renewed == 0:
                self.lost.set()
                break
        conn.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=HEARTBEAT_EVERY * 5)


# ---- polling batches (batch mode) ---------------------------------------------------------------
# KEYS due; ARGV now ms, claim ms. Claims every due launch for `claim` ms: its poll job renews
# the claim while it works and sets the next poll when done, so a poll whose worker died is due
# again once the claim lapses, and two watchdogs never enqueue one poll twice.
_CLAIM_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), member)
end
return due
"""


def batch_poll_claim() -> float:
    """Seconds a poll job holds its launch before another may be enqueued (it renews them)."""
    return max(BATCH_POLL_CLAIM_MIN, 3 * settings.BATCH_POLL_SECONDS)


def enqueue_due_batch_polls(conn: Any = None) -> list[str]:
    """Enqueue the poll job of every batch-mode launch that is due; returns their job ids.
    Run by the watchdog (Redis only, like `reap`); each poll job gets its own id, counted per
    launch, and is safe to run twice (apps.runs.batch.poll_job)."""
    conn = conn if conn is not None else _redis()
    seconds, micros = conn.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    claim_ms = int(batch_poll_claim() * 1000)
    started = []
    for raw in conn.register_script(_CLAIM_DUE)(keys=[BATCH_DUE_KEY], args=[now_ms, claim_ms]):
        member = raw.decode() if isinstance(raw, bytes) else str(raw)
        run_id, launch = (int(part) for part in member.split(":"))
        n = conn.incr(_key(run_id, f"l{launch}:batch-polls"))
        conn.expire(_key(run_id, f"l{launch}:batch-polls"), KEY_TTL)
        name = batch_job_id(run_id, launch, f"poll-{n}")
        enqueue_now(BATCH_POLL_JOB, run_id, launch, job_id=name, timeout=BATCH_POLL_TIMEOUT)
        started.append(name)
    return started


def renew_batch_claim(run_id: int, launch: int) -> None:
    """The poll job of the launch is still at work: hold off another one."""
    poll_batches_in(run_id, launch, batch_poll_claim())


def forget_batch_polls(run_id: int, launch: int) -> None:
    _redis().zrem(BATCH_DUE_KEY, live_field(run_id, launch))


# ---- handing a dead chunk's units to live workers ------------------------------------------------
def _job_running(conn: Any, name: str) -> bool:
    """RQ's view of chunk job `name`: False once its work horse died (RQ's worker marks the job
    failed the moment its horse exits badly) or the job is gone."""
    from rq.exceptions import InvalidJobOperation
    from rq.job import Job, JobStatus

    try:
        return Job(name, connection=conn).get_status() == JobStatus.STARTED
    except InvalidJobOperation:
        return False


def reap(conn: Any = None) -> list[str]:
    """Hand the units of every dead chunk back and enqueue a replacement chunk for each;
    returns the replacement job ids. Run by the watchdog thread of every worker process
    (apps.runs.watchdog); any number may run at once (each hand-back is one Lua call).

    A chunk is dead when its lease ran out (its process, machine or network is gone: nothing
    renewed it for JOB_LEASE_SECONDS) or, at once, when RQ no longer runs its job (the work
    horse was killed and its worker recorded the failure). Its held keys go to the launch's
    `again` list, which live chunks take before the todo list, and which the replacement
    chunk takes if no live chunk is left. Keys the dead chunk had already committed are
    dropped there (`RunExecutor.unsettled_keys`); unique constraints keep a unit written once even
    if a chunk was wrongly given up for dead.
    """
    conn = conn if conn is not None else _redis()
    reap_script = conn.register_script(_REAP)
    forget = conn.register_script(_FORGET)
    seconds, micros = conn.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    started = []
    for field_raw, timeout_raw in conn.hgetall(LIVE_KEY).items():
        field_name = field_raw.decode() if isinstance(field_raw, bytes) else str(field_raw)
        run_id, launch = (int(part) for part in field_name.split(":"))
        jobs = jobs_key(run_id, launch)
        holders = conn.zrange(jobs, 0, -1, withscores=True)
        if not holders:
            forget(
                keys=[LIVE_KEY, jobs, todo_key(run_id, launch), again_key(run_id, launch)],
                args=[field_name],
            )
            continue
        stop, current = conn.mget(stop_key(run_id), launch_key(run_id))
        # A cancelled, failed or relaunched launch only needs its dead chunks forgotten.
        requeue = not stop and current is not None and int(current) == launch
        for member, expiry in holders:
            name = member.decode() if isinstance(member, bytes) else str(member)
            expired = expiry <= now_ms
            if not expired and _job_running(conn, name):
                continue
            n = int(
                reap_script(
                    keys=[
                        jobs,
                        held_key(run_id, launch, name),
                        again_key(run_id, launch),
                        seq_key(run_id, launch),
                    ],
                    args=[name, "expired" if expired else "ended", int(requeue), KEY_TTL],
                )
            )
            if n <= 0:
                continue
            replacement = job_id(run_id, launch, n)
            enqueue_now(chunk_job, run_id, launch, n, job_id=replacement, timeout=int(timeout_raw))
            logger.warning(
                "run %s launch %s: chunk %s died (%s); its units went to %s",
                run_id,
                launch,
                name,
                "lease ran out" if expired else "its job ended",
                replacement,
            )
            started.append(replacement)
    return started


class ChunkRunner:
    def __init__(self, run: Run, plugin: RunExecutor, me: str, lanes: int, budget: float) -> None:
        self.run = run
        self.plugin = plugin
        self.me = me
        self.lanes = lanes
        self.budget = budget
        self.launch = run.launch
        self.buffer: list[Result] = []
        self.attempt_buffer: list[Attempt] = []
        self.processed = 0
        self.closing = False
        self.lease: LeaseKeeper | None = None
        self.held = held_key(run.pk, run.launch, me)

    async def db(self, func: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, functools.partial(func, *args)
        )

    async def execute(self) -> int:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-db")
        self.redis = async_redis()
        self.stop = asyncio.Event()
        self.started = time.monotonic()
        self.llm: LLM | None = None
        self.budget_guard: RunBudget | None = None
        self.semaphore: EndpointSemaphore | None = None
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=self.lanes)
        self.flush_lock = asyncio.Lock()
        self.last_flush = time.monotonic()
        self.first_buffered: float | None = None
        try:
            self.ctx = await self.db(self.plugin.prepare, self.run)
            endpoint = self.run.endpoint
            if endpoint is not None:
                self.semaphore = EndpointSemaphore(
                    self.redis, endpoint.pk, endpoint.concurrency_limit
                )
                # Always there: even without RPM/TPM limits a 429 pauses the endpoint.
                rate = RateLimiter.for_endpoint(self.redis, endpoint)
                # An overwrite asks again on purpose: it never reads the cache.
                reuse = self.run.use_cache and self.run.mode != Run.Mode.OVERWRITE
                if self.run.budget_usd is not None:
                    self.budget_guard = RunBudget(
                        self.redis, self.run.pk, float(self.run.budget_usd), self.run.cost
                    )
                    await self.budget_guard.join()
                self.llm = LLM(
                    endpoint,
                    slots=SlotPool(self.semaphore, self.stop),
                    rate=rate,
                    stop=self.stop,
                    connections=self.lanes,
                    cache=cache.ReplyCache(self.db).get if reuse else None,
                    budget=self.budget_guard,
                )
            # Running from here on: set up (client, templates, pool) and about to send.
            await self.db(self.run.mark_running)
            if self.llm is not None and self.llm.rate is not None:
                # Just before the first request: what other chunks read from the provider's
                # headers meanwhile (the heartbeat reads it again every second).
                await self.llm.rate.load_learned()
            writer = asyncio.create_task(self.writer())
            helpers = [
                asyncio.create_task(self.heartbeat()),
                asyncio.create_task(self.db_heartbeat()),
                asyncio.create_task(self.feed()),
            ]
            lanes = [asyncio.create_task(self.lane()) for _ in range(self.lanes)]
            try:
                await self._wait_lanes(lanes, helpers, watched=[writer])
            finally:
                # The writer is never cut mid-commit: it finishes its batch, then we flush.
                self.closing = True
                await asyncio.gather(writer, return_exceptions=True)
            if writer.exception() is not None:
                raise writer.exception()  # type: ignore[misc]
            await self.flush(force=True)
        finally:
            if self.llm is not None:
                with contextlib.suppress(Exception):
                    await self.llm.slots.trim(everything=True)  # type: ignore[union-attr]
                    await self.llm.close()
            if self.semaphore is not None:
                with contextlib.suppress(Exception):
                    await self.semaphore.release_all()
            with contextlib.suppress(Exception):
                await self.redis.aclose()
            with contextlib.suppress(Exception):
                await self.db(close_old_connections)
                await self.db(connection.close)
            self.pool.shutdown(wait=True)
        return self.processed

    async def _wait_lanes(
        self,
        lanes: list[asyncio.Task[Any]],
        helpers: list[asyncio.Task[Any]],
        watched: list[asyncio.Task[Any]],
    ) -> None:
        """Until every lane ends; a crash anywhere stops all, and once stopping, units in
        flight get `CANCEL_GRACE` seconds before they are cut (they stay pending). Helpers
        are cancelled at the end; `watched` tasks are only watched for crashes."""
        stopper = asyncio.create_task(self.stop.wait())
        watch: set[asyncio.Task[Any]] = {*lanes, *helpers, *watched, stopper}
        error: BaseException | None = None
        while any(not lane.done() for lane in lanes):
            done, watch = await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopper and not task.cancelled() and task.exception():
                    error = error or task.exception()
            if error is not None or stopper in done:
                self.stop.set()
                break
        if self.stop.is_set():
            for _ in lanes:  # wake lanes waiting for work
                with contextlib.suppress(asyncio.QueueFull):
                    self.queue.put_nowait(None)
            _, pending = await asyncio.wait(lanes, timeout=CANCEL_GRACE)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for task in [*helpers, stopper]:
            task.cancel()
        await asyncio.gather(*helpers, stopper, return_exceptions=True)
        for lane in lanes:
            if not lane.cancelled() and lane.exception() is not None:
                error = error or lane.exception()
        if error is not None:
            raise error

    # -- claiming work ---------------------------------------------------------------------
    async def feed(self) -> None:
        claimed = 0
        take = self.redis.register_script(_TAKE)
        lists = [
            jobs_key(self.run.pk, self.launch),
            again_key(self.run.pk, self.launch),
            todo_key(self.run.pk, self.launch),
            self.held,
        ]
        batch = max(TAKE_BATCH_MIN, min(self.lanes, TAKE_BATCH_MAX))
        while not self.stop.is_set():
            over_budget = time.monotonic() - self.started > self.budget
            if claimed >= self.run.chunk_size and over_budget:
                break
            source, raw = await take(keys=lists, args=[self.me, batch, KEY_TTL])
            if int(source) < 0:
                self.stop.set()  # reaped as dead: our units went to another chunk
                break
            if not raw:
                break
            keys = [k.decode() if isinstance(k, bytes) else k for k in raw]
            try:
                if int(source) == 1:
                    # Handed back from a dead chunk, which may have committed some of them.
                    fresh = await self.db(self.plugin.unsettled_keys, self.run, keys)
                    settled = set(keys).difference(fresh)
                    if settled:
                        await self.redis.srem(self.held, *settled)
                    keys = [k for k in keys if k not in settled]
                    if not keys:
                        continue
                claimed += len(keys)
                units = await self.db(self.plugin.load_units, self.run, self.ctx, keys)
            except BaseException:
                # Give the keys back so another chunk still sees them (when stopping, they
                # stay pending for resume: a stopped launch must not get work back).
                if keys and not self.stop.is_set():
                    pipe = self.redis.pipeline()
                    pipe.rpush(lists[1], *keys)
                    pipe.srem(self.held, *keys)
                    await pipe.execute()
                raise
            for unit in units:
                await self.queue.put(unit)
        for _ in range(self.lanes):
            await self.queue.put(None)

    async def lane(self) -> None:
        while True:
            unit = await self.queue.get()
            if unit is None or self.stop.is_set():
                return
            result = await self.perform(unit)
            if result is not None:
                self.processed += 1
                self.buffer.append(result)
                if self.first_buffered is None:
                    self.first_buffered = time.monotonic()

    async def perform(self, unit: Any) -> Result | None:
        item_id = getattr(unit, "item_id", 0)
        call = Call(self.llm, item_id, getattr(unit, "log_unit", None))
        try:
            result = await self.plugin.perform(self.run, self.ctx, unit, call)
        except OverBudget:
            await self.over_budget()
            return None  # not done: resume with a larger budget does it
        except Stopped:
            return None  # not done: it stays pending for resume
        except LLMError as exc:
            if exc.fatal:
                self.attempt_buffer.extend(call.log)
                await self.fatal(exc.message)
                return None
            result = self.plugin.failed_result(self.run, self.ctx, unit, exc.kind, exc.message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            result = self.plugin.failed_result(
                self.run, self.ctx, unit, ErrorKind.INTERNAL, message
            )
            call.log.append(
                Attempt(
                    item_id=item_id,
                    unit=call.unit,
                    attempt=len(call.log) + 1,
                    ok=False,
                    request_messages=[],
                    error_kind=ErrorKind.INTERNAL,
                    error=message,
                    traceback="".join(traceback.format_exception(exc)),
                )
            )
        result.attempts = call.log
        return result

    async def fatal(self, message: str) -> None:
        if self.stop.is_set():
            return
        self.stop.set()
        await self.redis.set(stop_key(self.run.pk), "failed", ex=KEY_TTL)
        await self.flush(force=True)
        await self.db(self.run.mark_failed, f"Stopped: {message}")

    async def over_budget(self) -> None:
        """A request could cross the run's budget: stop the whole run like a cancel (every
        chunk at its next check; their work lists go), with the reason on the run."""
        if self.stop.is_set():
            return
        self.stop.set()
        spent = await self.budget_guard.spent() if self.budget_guard is not None else 0.0
        pipe = self.redis.pipeline()
        pipe.set(stop_key(self.run.pk), "budget", ex=KEY_TTL)
        pipe.delete(todo_key(self.run.pk, self.launch), again_key(self.run.pk, self.launch))
        await pipe.execute()
        await self.db(self.run.stop_for_budget, spent)

    # -- committing results ---------------------------------------------------------------
    async def writer(self) -> None:
        """Commits results in the background, so no lane waits for the database."""
        while not self.closing:
            await asyncio.sleep(WRITER_TICK)
            await self.flush()

    async def flush(self, force: bool = False) -> None:
        if not self.buffer and not self.attempt_buffer:
            return
        now = time.monotonic()
        due = (len(self.buffer) >= FLUSH_EVERY and now - self.last_flush >= FLUSH_GAP) or (
            self.first_buffered is not None and now - self.first_buffered >= FLUSH_AFTER
        )
        if not (force or due) or (self.flush_lock.locked() and not force):
            return
        async with self.flush_lock:
            batch, self.buffer = self.buffer, []
            attempts, self.attempt_buffer = self.attempt_buffer, []
            self.first_buffered = None
            if batch or attempts:
                await self.db(self._write, batch, attempts)
            if batch:
                # Committed: no longer ours to hand back should this process die now. (Dying
                # between the commit and this, a key is handed back and dropped as settled.)
                await self.redis.srem(self.held, *{r.key for r in batch})
            self.last_flush = time.monotonic()

    def _write(self, results: list[Result], stray_attempts: list[Attempt]) -> None:
        write_results(self.run, self.plugin, self.ctx, results, stray_attempts)

    # -- staying in touch -------------------------------------------------------------------
    async def heartbeat(self) -> None:
        """Every second: endpoint slot leases, and whether to stop (cancel, failure, a newer
        launch, or this chunk given up for dead). The chunk's own lease is LeaseKeeper's."""
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY)
            if self.semaphore is not None:
                await self.semaphore.renew()
            if self.llm is not None and self.llm.slots is not None:
                await self.llm.slots.trim()
            pipe = self.redis.pipeline(transaction=False)
            pipe.mget(stop_key(self.run.pk), launch_key(self.run.pk))
            if self.llm is not None and self.llm.rate is not None:
                pipe.pttl(self.llm.rate.pause_key)
                pipe.get(self.llm.rate.learned_key)
            (stop, launch), *rate = await pipe.execute()
            if rate and self.llm is not None and self.llm.rate is not None:
                # Read here for endpoints without RPM/TPM limits, whose lanes ask no Redis,
                # and for the limits another chunk read from the provider's headers.
                self.llm.rate.note_pause(int(rate[0]))
                self.llm.rate.read_learned(rate[1])
            if stop or (launch is not None and int(launch) != self.launch):
                self.stop.set()
            if self.lease is not None and self.lease.lost.is_set():
                self.stop.set()

    async def db_heartbeat(self) -> None:
        """`Run.heartbeat_at`, apart from the loop above: a slow database must not delay it."""
        while True:
            await asyncio.sleep(DB_HEARTBEAT_EVERY)
            if not await self.db(self._db_heartbeat):
                self.stop.set()

    def _db_heartbeat(self) -> bool:
        """Write the heartbeat; False when the run was ended or relaunched meanwhile."""
        Run.objects.filter(pk=self.run.pk, launch=self.launch).update(heartbeat_at=timezone.now())
        row = (
            Run.objects.filter(pk=self.run.pk)
            .values("status", "launch", "cancel_requested")
            .first()
        )
        return bool(
            row
            and row["launch"] == self.launch
            and row["status"] in Run.ACTIVE_STATUSES
            and not row["cancel_requested"]
        )


# ---- writing results ----------------------------------------------------------------------------
def write_results(
    run: Run,
    plugin: RunExecutor,
    ctx: Any,
    results: list[Result],
    stray_attempts: list[Attempt] | None = None,
) -> Progress:
    """Commit `results` in one transaction: the plug-in's rows (exactly once), the attempt logs
    per the run's logging mode, and the run's counters. Chunks and batch mode both write here."""
    with transaction.atomic():
        progress = plugin.persist(run, ctx, results) if results else Progress()
        logs = [a for r in results for a in r.attempts] + list(stray_attempts or [])
        write_logs(run, logs)
        # Good replies for the cache: a reply a judge could not score is a failed attempt by
        # now, and failures are never stored.
        cache.store([a.cache_entry for a in logs if a.ok and a.cache_entry is not None])
        run.add_progress(
            done=progress.done,
            failed=progress.failed,
            prompt_tokens=progress.prompt_tokens,
            completion_tokens=progress.completion_tokens,
            cost=progress.cost,
            cached=sum(a.cached for a in logs),
            sent=sum(a.sent for a in logs),
            saved=sum(a.saved for a in logs),
        )
    return progress


def write_logs(run: Run, attempts: list[Attempt]) -> None:
    if run.logging_mode == LoggingMode.NONE:
        return
    if run.logging_mode == LoggingMode.FAILED:
        attempts = [a for a in attempts if not a.ok]
    if attempts:
        AttemptLog.objects.bulk_create(
            [
                AttemptLog(
                    run_id=run.pk,
                    item_id=a.item_id or None,
                    unit=a.unit,
                    round=a.round,
                    epoch=a.epoch,
                    attempt=a.attempt,
                    ok=a.ok,
                    request_messages=a.request_messages,
                    raw_reply=a.raw_reply,
                    error_kind=a.error_kind,
                    error=a.error,
                    traceback=a.traceback,
                    latency_ms=a.latency_ms,
                    prompt_tokens=a.prompt_tokens,
                    completion_tokens=a.completion_tokens,
                    cost=a.cost,
                    cached=a.cached,
                )
                for a in attempts
                if a.item_id or a.unit is not None
            ]
        )
