"""The execution engine shared by generation runs and judge runs.

A run's work is a set of *units*, each named by a string key (a generation run: one key per
item, the item id; a judge run may use "item:round"). What a unit is and how it is done
belongs to the run's plug-in (a `RunPlugin`, one per `Run.Kind`); everything else is here and
the same for every run:

Launch (`launch(run, mode)`, inside the caller's transaction)
    A new launch starts (`Run.launch` + 1, status queued); the plug-in lists the pending keys for
    the mode (resume: units without a result; retry_failed: failed units; overwrite: all),
    they go to one Redis list for the launch, and `ceil(n / chunk_size)` chunk jobs
    `run-<id>-l<launch>-chunk-<n>` are enqueued on RQ after commit (at most `CHUNK_JOBS_MAX`:
    jobs beyond the busy workers would only find the list dry).

A chunk job (`chunk_job`: `run_chunk`, failing the run if the job itself crashes)
    registers a job lease, then takes keys from the launch's list in small batches (so every
    worker on every machine shares one run, and one worker keeps its lanes full from one
    chunk to the next instead of draining each chunk's tail). Taking moves the keys into the
    chunk's own *held* set in Redis (one Lua step), and a key leaves that set once its result
    is committed. It has taken at least `chunk_size` keys (or the list ran dry) before it may
    stop for its time budget, and one that stops so with work left enqueues its successor, so
    the jobs always cover the list. `lanes` coroutines
    perform units concurrently with one `LLM` (one AsyncOpenAI client) per chunk; every
    request takes a slot of the endpoint's concurrency limit and a turn of its rate limit,
    both in Redis (apps.runs.engine.limits). A writer task commits results in small batches, so lanes
    never wait for the database: when `FLUSH_EVERY` results wait (at most every `FLUSH_GAP`
    s, so a fast run writes bigger batches) and whenever the oldest has waited `FLUSH_AFTER`
    s. A thread renews the chunk's lease every second (`LeaseKeeper`); a heartbeat task
    writes `Run.heartbeat_at`, and notices cancel, a fatal endpoint error, a failed run or a
    newer launch within a second; lanes then stop asking.

A dead chunk (its work horse or whole worker SIGKILLed, its machine gone)
    loses what was in flight and at most the last second of answers, but not its units: they
    are in its held set. Every worker process runs a watchdog thread (apps.runs.engine.watchdog →
    `reap`) that gives the chunk up for dead as soon as RQ records its job as ended (a killed
    horse: at once) or its lease ran out (a killed worker process: `JOB_LEASE_SECONDS`); its
    held keys go to the launch's *again* list, which chunks take before the todo list
    (dropping keys the dead chunk had already committed), and a replacement chunk job is
    enqueued. So the run finishes by itself while any worker lives.
    The job that leaves last (no registered chunk, lists empty) finalizes the run with exact
    counts from the database; if units are still pending then (work lost some other way) the
    run is marked interrupted, shown as stalled, and resume finishes it. With no worker left
    at all, the run shows as stalled after `Run.STALL_AFTER` and resume finishes it too.

Redis going away (killed, restarted, unreachable)
    is not the run's failure. A chunk that meets it stops, commits the answers it has and
    leaves its units registered (`chunk.REDIS_DOWN`); workers wait for Redis and carry on
    (evalsite/worker.py). If Redis kept its state the reaper hands those units on as from any
    dead chunk. If it restarted empty (or the launch's jobs never reached it), the database
    still says the run is going: a recovery job the watchdog enqueues (apps.runs.engine.recovery)
    finds such runs once quiet for a while and opens the same launch again with the units
    that have no result yet. Either way the run finishes by itself, each result written once.

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
by every chunk's heartbeat), evalsite:endpoint:<id>:inflight, and per provider account (base URL,
model and key, hashed) evalsite:account:<hash>:rate, :tokens, :pause and :provider-limits
(apps.runs.engine.limits; the heartbeat reads :pause and :provider-limits too).

Modules, in the order they build on each other (none names a run kind's module):
    tuning        constants with their reasons        limits      endpoint slots and RPM/TPM pace
    budget        a run's spending cap in Redis        cache       the response cache
    errors        LLMError & co., `classify`           scrub       API keys out of every string
    slots         a chunk's share of the slots         llm         the LLM client (`LLM`)
    contract      RunExecutor, RunStarter, Call, Result; the registry lookup (settings.RUN_KINDS)
    redis_keys    the Redis keys above and the Lua steps that change them
    writer        committing results                   polls       when batches are polled
    lifecycle     cancel, fail, finalize               chunk       the chunk job (`ChunkRunner`)
    batch         batch mode (the Batch API)           reaper      dead chunks' units handed back
    launch        `launch`                             watchdog    the worker thread that reaps
    recovery      runs the database says are going and Redis does not know, put back
"""


def __getattr__(name: str) -> object:
    """`apps.runs.engine.chunk_job`, the chunk job's path before this package existed. RQ stores
    a job as the dotted path of its function and bin/run keeps Redis's dump across restarts, so
    jobs queued before an upgrade may still name it. Lazy (PEP 562): an import here at the top
    would load the whole engine, Django models included, for any module of the package (the
    rate limits' two-process test imports limits alone, without Django)."""
    if name == "chunk_job":
        from apps.runs.engine.chunk import chunk_job

        return chunk_job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
