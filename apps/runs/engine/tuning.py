"""The run engine's tuning constants, in one place with the reason for each value.

Change one only with `bench/run` before and after (the engine bench prints its ratio to a bare
SDK loop at 128 in flight) and the recovery tests in tests/runs/test_engine.py, which kill
workers mid-run. Everything here trades latency of a signal against load on Redis or the
database; none of it changes what a run computes.
"""

# ---- committing results (ChunkRunner.writer / flush) ---------------------------------------
# Lanes never wait for the database: results queue in memory and a writer task commits them.
# A commit costs about the same for 1 result as for 20 (one transaction, bulk inserts), so a
# fast run batches; but a slow run must not sit on answers, which a dead worker would lose.
FLUSH_EVERY = 20  # results waiting that make a commit due…
FLUSH_GAP = 0.2  # …but no more often than this (s): a fast run writes bigger batches
FLUSH_AFTER = 1.0  # the oldest waiting result is committed within this (s): at most ~1 s lost
WRITER_TICK = 0.05  # how often the writer looks (s); cheap, it only compares counters

# ---- staying in touch -----------------------------------------------------------------------
# Cancel, a fatal endpoint error and a newer launch are read from Redis by every chunk, so a
# run stops within about a second wherever its chunks run.
HEARTBEAT_EVERY = 1.0  # s between those reads and the endpoint slot renewals
# `Run.heartbeat_at` feeds the "stalled" display (Run.STALL_AFTER, a minute): a database write
# every 5 s is plenty for that, and keeps a 2-core SQLite install from writing every second.
DB_HEARTBEAT_EVERY = 5.0
# A chunk renews its job lease every HEARTBEAT_EVERY s from a thread of its own (LeaseKeeper),
# so only a dead or frozen process misses fifteen renewals in a row; then the watchdog hands its
# units to live workers. Shorter risks reaping a live chunk during a long GC or disk stall;
# longer makes a killed worker's run wait longer (the issue asks for ~30 s at most).
JOB_LEASE_SECONDS = 15
# An endpoint concurrency slot is a lease too (apps.runs.engine.limits): a dead process's slots come
# back within this, without anyone releasing them.
SLOT_LEASE_SECONDS = 15.0
# The watchdog looks for dead chunks every WATCHDOG_TICK s, once across all workers (a Redis
# lock), so a killed work horse (RQ records the job as ended at once) is replaced within ~2 s.
WATCHDOG_TICK = 2.0
# Runs the database says are going but Redis does not know (it restarted empty, or the jobs
# never reached it: apps.runs.engine.recovery) are looked for every RECOVER_EVERY s, by a job
# the watchdog enqueues (the watchdog itself never touches the database); one is put back once
# its last sign of life (Run.heartbeat_at) is RECOVER_AFTER old. Longer than a chunk's database
# heartbeat (DB_HEARTBEAT_EVERY) with room for a loaded machine, and than a chunk takes to stop
# after Redis comes back (CANCEL_GRACE), so nothing that still works is doubled.
RECOVER_EVERY = 10.0
RECOVER_AFTER = 20.0
# Once a chunk stops, units in flight get this long to finish before they are cut (they stay
# pending for resume); long enough for an answer already streaming back.
CANCEL_GRACE = 3.0
# Redis keys of a run outlive any sane run but not forever (a week).
KEY_TTL = 7 * 24 * 3600

# ---- claiming work ----------------------------------------------------------------------------
# Keys are taken from the run's Redis list in batches of about one per lane: few round trips,
# yet every worker on every machine keeps getting a share of one run.
TAKE_BATCH_MIN = 8
TAKE_BATCH_MAX = 256
# A chunk stops taking work after half of its RQ time limit once it has done its share, so it
# never meets RQ's limit mid-unit; it then enqueues its successor if work is left.
CHUNK_BUDGET_SHARE = 0.5
# A launch enqueues one chunk job per `chunk_size` units, but no more than this. Each job takes
# work until the list is dry (or its time is up), so jobs beyond the number of busy worker
# processes only start once the list is dry and find nothing: a work horse forked and a few
# queries for nothing, ~0.4 s of a worker each. At a million items (5,000 jobs of 200) that
# was minutes of every worker's time after the run, with the next run's jobs queued behind
# them (bench/bench_fleet.py). 64 is more workers than one evalsite installation runs.
CHUNK_JOBS_MAX = 64
# RQ's time limit for a chunk job: every unit of `chunk_size` may take its whole timeout on
# every retry, plus backoff; with margin, never under ten minutes nor over a day.
UNIT_SECONDS_WITHOUT_ENDPOINT = 60.0  # rule-based units: CPU only, generous
CHUNK_TIMEOUT_MARGIN = 1.5
CHUNK_TIMEOUT_SLACK = 120.0
CHUNK_TIMEOUT_MIN = 600.0
CHUNK_TIMEOUT_MAX = 24 * 3600.0
# Rule-based judges use no endpoint, so no concurrency limit sizes their lanes: a few lanes keep
# the database writes overlapped with the CPU work.
RULE_LANES = 8

# ---- retrying a request (apps.runs.engine.llm) -------------------------------------------------------
# Exponential backoff with jitter, as the OpenAI SDK and most gateways suggest: 0.5 s, 1 s, 2 s…
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0  # s: longer waits mean the endpoint is down, and retries are few anyway
# A Retry-After from the server is honoured up to two minutes (a longer one is cut to that):
# longer, and the run would look hung.
RETRY_AFTER_CAP = 120.0

# ---- provider rate limits (apps.runs.engine.limits) ------------------------------------------------
# A request without max_tokens reserves this many completion tokens of the TPM budget before it
# is sent; the reply's usage then settles the real number.
COMPLETION_TOKENS_GUESS = 256
# A chunk's RQ time limit under RPM/TPM limits counts each unit's request at this many prompt
# tokens (apps.runs.engine.chunk_timeout): bigger prompts and a chunk could meet RQ's limit
# mid-run; smaller only makes the limit more generous than needed.
RATE_PROMPT_TOKENS_GUESS = 2000
# A shared pause (a 429's Retry-After, or headers saying the budget is spent) stops every
# worker on the endpoint for at most this long at a time (s), like RETRY_AFTER_CAP.
RATE_PAUSE_CAP = 120.0
# Limits a provider states in its x-ratelimit-limit-* headers are shared through Redis, written
# again at most this often while replies keep stating them (s), and forgotten this long after
# the last write (s): a key moved to another tier is paced to its new limits within minutes.
LEARNED_REFRESH = 30.0
LEARNED_TTL = 600
# A provider that states no limits (no x-ratelimit-* headers, only a 429's retry-after) is paced
# by additive increase / multiplicative decrease (RateLimiter.cut): its first 429 paces every
# worker to what the provider admitted of ours over the last minute (for a run younger than
# that, over its age, plus the retry-after when the two make half a minute or more, so that a
# first burst that filled a minute's window in seconds is not taken for the pace the provider
# allows, nor one early 429 with a short retry-after for a minute's limit); each later 429 cuts the
# pace by AIMD_DECREASE, and the pace grows back linearly by what the cut took in AIMD_RAMP s
# and on. A gentle cut and a slow ramp keep the mean near the limit (about (1 + 0.9) / 2 of it
# at worst), with one 429 or two per cycle: ~110 requests a cycle at 120 RPM. The pace never
# grows past AIMD_TOP times the last cut (a run that does not use it must not earn a burst),
# and is forgotten AIMD_TTL s after the last 429.
AIMD_DECREASE = 0.9
AIMD_RAMP = 60.0
AIMD_TOP = 2.0
AIMD_TTL = 600
# How often a chunk reads the account's pause, learned limits and pace, and reports its
# answered requests (RateLimiter.sync): lanes without a pace ask no Redis per request, and a
# lane of another worker that learns of a 429 a second late sends a second's worth into it.
RATE_POLL = 0.1

# ---- batch mode (apps.runs.engine.batch) -------------------------------------------------------------
# A poll job holds its launch for max(this, 3 × EVALSITE_BATCH_POLL_SECONDS) and renews that
# while it reads results; a poll whose worker was killed is enqueued again once it lapses.
BATCH_POLL_CLAIM_MIN = 10.0
# RQ's limit for one poll job: reading and writing the results of a 50,000-request file.
BATCH_POLL_TIMEOUT = 3600
# The submit job renders, uploads and creates every file of a launch.
BATCH_SUBMIT_TIMEOUT = 3600
# Tries of one call to the provider's files/batches API before the job gives up for now.
BATCH_API_TRIES = 4
