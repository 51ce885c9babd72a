"""A chunk job: take units from the launch's list, perform them on `lanes` coroutines within
the endpoint's shared limits, commit their results in the background, and keep in touch
(its lease, the run's heartbeat, stop signals). See apps.runs.engine."""

import asyncio
import contextlib
import functools
import logging
import math
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connection
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from apps.runs.engine import cache
from apps.runs.engine.budget import RunBudget
from apps.runs.engine.contract import Call, Result, RunExecutor, executor_for
from apps.runs.engine.errors import LLMError, OverBudget, Stopped
from apps.runs.engine.lifecycle import fail, finalize
from apps.runs.engine.limits import (
    EndpointSemaphore,
    RateLimiter,
    async_redis,
    lower_limit,
    provider_limits,
)
from apps.runs.engine.llm import LLM, Attempt, CacheLookup, run_async
from apps.runs.engine.redis_keys import (
    JOIN,
    LEAVE,
    LIVE_KEY,
    RENEW,
    TAKE,
    again_key,
    held_key,
    job_id,
    jobs_key,
    launch_key,
    live_field,
    redis_connection,
    seq_key,
    stop_key,
    todo_key,
)
from apps.runs.engine.slots import SlotPool
from apps.runs.engine.tuning import (
    CANCEL_GRACE,
    CHUNK_BUDGET_SHARE,
    CHUNK_JOBS_MAX,
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
    RATE_POLL,
    RATE_PROMPT_TOKENS_GUESS,
    TAKE_BATCH_MAX,
    TAKE_BATCH_MIN,
    UNIT_SECONDS_WITHOUT_ENDPOINT,
    WRITER_TICK,
)
from apps.runs.engine.writer import write_results
from apps.runs.models import Endpoint, ErrorKind, Run
from evalsite.enqueue import enqueue_now

logger = logging.getLogger(__name__)

# Redis is gone (killed, restarting, loading its dump, the network): not the run's fault. A chunk
# that meets one of these stops, commits what it has answered and leaves its units where the
# watchdog finds them (apps.runs.engine.reaper, apps.runs.engine.recovery); the run goes on
# once Redis is back. (BusyLoadingError, Redis reading its dump, is a ConnectionError.)
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError)


# ---- the chunk job ------------------------------------------------------------------------------
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
        told_rpm, told_tpm = provider_limits([endpoint])[endpoint.pk]
        rpm = lower_limit(endpoint.rpm_limit, told_rpm)
        tpm = lower_limit(endpoint.tpm_limit, told_tpm)
        paced = units * max(60.0 / rpm if rpm else 0.0, 60.0 * tokens / tpm if tpm else 0.0)
    waves = math.ceil(max(run.chunk_size, 1) / max(lanes, 1))
    limit = max(waves * per_unit, paced) * CHUNK_TIMEOUT_MARGIN + CHUNK_TIMEOUT_SLACK
    return int(min(max(CHUNK_TIMEOUT_MIN, limit), CHUNK_TIMEOUT_MAX))


def chunk_jobs(units: int, chunk_size: int) -> int:
    """How many chunk jobs a launch of `units` enqueues: one per `chunk_size`, at most
    `CHUNK_JOBS_MAX` (a chunk that stops for its time with work left enqueues its successor)."""
    return min(math.ceil(units / max(chunk_size, 1)), CHUNK_JOBS_MAX)


def chunk_job(run_id: int, launch: int, n: int) -> str:
    """The RQ job of one chunk. If the job itself crashes (a bug, the database gone, RQ's time
    limit), the run is marked failed with the traceback and every other chunk of it stops; RQ
    still records the job as failed. Redis going away is not a crash of the run: the chunk
    stops and its units are handed on once Redis is back (see `REDIS_DOWN`)."""
    try:
        return run_chunk(run_id, launch, n)
    except REDIS_DOWN:
        logger.warning("run %s launch %s: chunk %s stopped: Redis went away", run_id, launch, n)
        raise
    except BaseException:
        fail(run_id, traceback.format_exc())
        raise


def run_chunk(run_id: int, launch: int, n: int) -> str:
    """Do units of `run_id`'s launch until none are left (or the budget is spent)."""
    run = Run.objects.select_related("endpoint", "template", "dataset").filter(pk=run_id).first()
    if run is None or run.launch != launch or not run.is_active or run.cancel_requested:
        return "nothing to do"
    conn = redis_connection()
    me = job_id(run_id, launch, n)
    conn.register_script(JOIN)(
        keys=[jobs_key(run_id, launch), held_key(run_id, launch, me), again_key(run_id, launch)],
        args=[me, JOB_LEASE_SECONDS * 1000, KEY_TTL],
    )
    lease = LeaseKeeper(run_id, launch, me)
    processed = 0
    redis_lost = False
    runner: ChunkRunner | None = None
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
        redis_lost = runner.redis_lost
    except REDIS_DOWN:
        redis_lost = True
    except BaseException:
        # Fail the run before leaving, so the last one out does not call it complete.
        fail(run_id, traceback.format_exc())
        raise
    finally:
        lease.stop()
        close_old_connections()
        # Without Redis the chunk stays registered with its held units: the watchdog hands
        # them on (reaper), or rebuilds the launch from the database if Redis lost it too.
        if not redis_lost:
            relay = runner is not None and runner.out_of_time and not runner.stop.is_set()
            redis_lost = not _leave(conn, run_id, launch, me, relay)
    if redis_lost:
        logger.warning(
            "run %s launch %s: chunk %s stopped after %s units: Redis went away; the watchdog "
            "hands its units on once Redis is back",
            run_id,
            launch,
            me,
            processed,
        )
        return f"{processed} units, then Redis went away"
    return f"{processed} units"


def _leave(conn: Any, run_id: int, launch: int, me: str, relay: bool = False) -> bool:
    """Deregister the chunk; the last one out settles the run. False when Redis is gone.
    `relay`: the chunk stopped for its time, so work left in the lists gets a successor (a
    launch enqueues at most `CHUNK_JOBS_MAX` jobs, which need not outlast its work)."""
    try:
        remaining, todo, known = conn.register_script(LEAVE)(
            keys=[
                jobs_key(run_id, launch),
                todo_key(run_id, launch),
                again_key(run_id, launch),
                held_key(run_id, launch, me),
                LIVE_KEY,
            ],
            args=[me, live_field(run_id, launch)],
        )
        if relay and int(todo) > 0 and int(known):
            _enqueue_successor(conn, run_id, launch)
    except REDIS_DOWN:
        return False
    # A launch Redis no longer knows (it restarted empty meanwhile) is not over: its pending
    # units are rebuilt from the database by the watchdog's recovery, which settles it.
    if int(remaining) == 0 and int(todo) == 0 and int(known):
        finalize(run_id, launch)
    return True


def _enqueue_successor(conn: Any, run_id: int, launch: int) -> None:
    """One more chunk job for the launch, numbered on from the last (`seq`, as the reaper's
    replacements are), with the launch's RQ time limit."""
    timeout = conn.hget(LIVE_KEY, live_field(run_id, launch))
    n = int(conn.incr(seq_key(run_id, launch)))
    conn.expire(seq_key(run_id, launch), KEY_TTL)
    enqueue_now(
        chunk_job,
        run_id,
        launch,
        n,
        queue="runs",
        job_id=job_id(run_id, launch, n),
        timeout=int(timeout) if timeout else int(CHUNK_TIMEOUT_MIN),
    )


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
        conn = redis_connection()
        renew = conn.register_script(RENEW)
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
        self.redis_lost = False
        # Stopped taking work for its time budget (not because the lists ran dry).
        self.out_of_time = False
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
        self.reply_cache: CacheLookup | None = None
        # Other endpoints' clients (a simulated user's), made on first use (`client_for`).
        self.others: dict[int, LLM] = {}
        self.other_semaphores: list[EndpointSemaphore] = []
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
                self.reply_cache = cache.ReplyCache(self.db).get if reuse else None
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
                    cache=self.reply_cache,
                    budget=self.budget_guard,
                )
            await self.share_slots()
            # Running from here on: set up (client, templates, pool) and about to send.
            await self.db(self.run.mark_running)
            if self.llm is not None and self.llm.rate is not None:
                # Just before the first request: what other chunks read from the provider's
                # headers meanwhile, and the pace (watch_rate reads them every RATE_POLL s).
                await self.llm.rate.sync()
            writer = asyncio.create_task(self.writer())
            helpers = [
                asyncio.create_task(self.heartbeat()),
                asyncio.create_task(self.watch_rate()),
                asyncio.create_task(self.db_heartbeat()),
                asyncio.create_task(self.feed()),
            ]
            lanes = [asyncio.create_task(self.lane()) for _ in range(self.lanes)]
            try:
                await self._wait_lanes(lanes, helpers, watched=[writer])
            except REDIS_DOWN:
                # What was answered is still committed below; the rest stays pending.
                self.lose_redis()
            finally:
                # The writer is never cut mid-commit: it finishes its batch, then we flush.
                self.closing = True
                await asyncio.gather(writer, return_exceptions=True)
            if writer.exception() is not None:
                raise writer.exception()  # type: ignore[misc]
            await self.flush(force=True)
        finally:
            for llm in [self.llm, *self.others.values()]:
                if llm is not None:
                    with contextlib.suppress(Exception):
                        await llm.slots.trim(everything=True)  # type: ignore[union-attr]
                        await llm.close()
            for semaphore in [self.semaphore, *self.other_semaphores]:
                if semaphore is not None:
                    with contextlib.suppress(Exception):
                        await semaphore.release_all()
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
        take = self.redis.register_script(TAKE)
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
                self.out_of_time = True
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

    async def client_for(self, endpoint: Endpoint) -> LLM:
        """Another endpoint's client for this chunk (a simulated user's, `Call.chat(...,
        endpoint=)`), held to what the run's own is: that endpoint's shared concurrency limit
        and its account's rate limits, the run's cache and budget, this chunk's stop."""
        llm = self.others.get(endpoint.pk)
        if llm is not None:
            return llm
        semaphore = EndpointSemaphore(self.redis, endpoint.pk, endpoint.concurrency_limit)
        llm = LLM(
            endpoint,
            slots=SlotPool(semaphore, self.stop),
            rate=RateLimiter.for_endpoint(self.redis, endpoint),
            stop=self.stop,
            connections=min(self.lanes, max(1, endpoint.concurrency_limit)),
            cache=self.reply_cache,
            budget=self.budget_guard,
        )
        self.others[endpoint.pk] = llm  # before any await: one per endpoint, whichever lane
        self.other_semaphores.append(semaphore)
        assert llm.rate is not None
        await llm.rate.sync()
        return llm

    async def perform(self, unit: Any) -> Result | None:
        item_id = getattr(unit, "item_id", 0)
        call = Call(
            self.llm,
            item_id,
            getattr(unit, "log_unit", None),
            sink=self._buffer,
            clients=self.client_for,
        )
        try:
            result = await self.plugin.perform(self.run, self.ctx, unit, call)
        except OverBudget:
            await self.over_budget()
            return None  # not done: resume with a larger budget does it
        except Stopped:
            return None  # not done: it stays pending for resume
        except REDIS_DOWN:
            # The shared limits live in Redis: without it nothing may be sent, and the unit
            # is not the endpoint's failure. It stays pending.
            self.lose_redis()
            return None
        except LLMError as exc:
            if exc.fatal:
                self.attempt_buffer.extend(call.rest())
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
        result.attempts = call.rest()
        return result

    def _buffer(self, part: Result) -> None:
        """A finished part of a unit still going (`Call.emit`): committed with the next flush."""
        self.buffer.append(part)
        if self.first_buffered is None:
            self.first_buffered = time.monotonic()

    def lose_redis(self) -> None:
        """Redis went away: stop taking and sending; answers in hand are still committed."""
        self.redis_lost = True
        self.stop.set()

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
                # between the commit and this, a key is handed back and dropped as settled;
                # so is one whose removal Redis missed while it was away.)
                try:
                    if finished := {r.key for r in batch if not r.partial}:
                        await self.redis.srem(self.held, *finished)
                except REDIS_DOWN:
                    self.lose_redis()
            self.last_flush = time.monotonic()

    def _write(self, results: list[Result], stray_attempts: list[Attempt]) -> None:
        write_results(self.run, self.plugin, self.ctx, results, stray_attempts)

    # -- staying in touch -------------------------------------------------------------------
    async def heartbeat(self) -> None:
        """Every second: endpoint slot leases, and whether to stop (cancel, failure, a newer
        launch, or this chunk given up for dead). The chunk's own lease is LeaseKeeper's."""
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY)
            for semaphore in [self.semaphore, *self.other_semaphores]:
                if semaphore is not None:
                    await semaphore.renew()
            for llm in [self.llm, *self.others.values()]:
                if llm is not None and llm.slots is not None:
                    await llm.slots.trim()
            await self.share_slots()
            stop, launch = await self.redis.mget(stop_key(self.run.pk), launch_key(self.run.pk))
            if stop or (launch is not None and int(launch) != self.launch):
                self.stop.set()
            if self.lease is not None and self.lease.lost.is_set():
                self.stop.set()

    async def share_slots(self) -> None:
        """This chunk's part of the endpoint's limit: the limit over the launch's chunks, so a
        fleet's workers share a run's requests (and so its CPU) instead of one holding all."""
        if self.llm is None or self.llm.slots is None or self.semaphore is None:
            return
        chunks = int(await self.redis.zcard(jobs_key(self.run.pk, self.launch)))
        self.llm.slots.share = math.ceil(self.semaphore.limit / max(chunks, 1))

    async def watch_rate(self) -> None:
        """Every `RATE_POLL` s: the account's pause, for endpoints without RPM/TPM limits whose
        lanes ask no Redis, the limits another chunk read from the provider's headers, and the
        AIMD pace (RateLimiter.sync)."""
        while True:
            await asyncio.sleep(RATE_POLL)
            for llm in [self.llm, *self.others.values()]:
                if llm is not None and llm.rate is not None:
                    await llm.rate.sync()

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
