"""The engine's Redis keys, and the Lua steps that change them atomically (see
apps.runs.engine for what each holds)."""

import time
from typing import Any

from apps.runs.engine.limits import KEY_PREFIX


# ---- Redis keys -----------------------------------------------------------------------------------
def run_key(run_id: int, suffix: str) -> str:
    return f"{KEY_PREFIX}:run:{run_id}:{suffix}"


def todo_key(run_id: int, launch: int) -> str:
    return run_key(run_id, f"l{launch}:todo")


def jobs_key(run_id: int, launch: int) -> str:
    return run_key(run_id, f"l{launch}:jobs")


def held_key(run_id: int, launch: int, me: str) -> str:
    """The keys chunk `me` has taken and not yet committed (a set)."""
    return run_key(run_id, f"l{launch}:held:{me}")


def again_key(run_id: int, launch: int) -> str:
    """Keys handed back from dead chunks; taken before the todo list, checked against the DB."""
    return run_key(run_id, f"l{launch}:again")


def seq_key(run_id: int, launch: int) -> str:
    """The last chunk number used in the launch (replacement chunks count on from it)."""
    return run_key(run_id, f"l{launch}:seq")


def launch_key(run_id: int) -> str:
    return run_key(run_id, "launch")


def stop_key(run_id: int) -> str:
    return run_key(run_id, "stop")


# Every launch that may still have chunks: "<run id>:<launch>" -> RQ timeout of a chunk.
LIVE_KEY = f"{KEY_PREFIX}:runs:live"


def live_field(run_id: int, launch: int) -> str:
    return f"{run_id}:{launch}"


def job_id(run_id: int, launch: int, n: int) -> str:
    return f"run-{run_id}-l{launch}-chunk-{n}"


# Batch mode (apps.runs.engine.batch): "<run id>:<launch>" -> when its batches are next polled (ms).
# The watchdog enqueues the poll job of every launch that is due; a poll that dies mid-way is
# due again once its claim (BATCH_POLL_CLAIM) lapses. Nothing else keeps a batch run going.
BATCH_DUE_KEY = f"{KEY_PREFIX}:batches:due"


def batch_job_id(run_id: int, launch: int, what: str) -> str:
    return f"run-{run_id}-l{launch}-batch-{what}"


def batch_polls_key(run_id: int, launch: int) -> str:
    """How many poll jobs the launch has had (each gets its own job id)."""
    return run_key(run_id, f"l{launch}:batch-polls")


def batch_submitting_key(run_id: int, launch: int) -> str:
    """Set while the launch's submit job is queued or at work (it renews it): polls wait."""
    return run_key(run_id, f"l{launch}:batch-submitting")


def redis_connection() -> Any:
    import django_rq

    return django_rq.get_connection("default")


NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Lua's unpack() takes a few thousand values at most: a set goes to a list in slices.
MOVE = """
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
JOIN = (
    NOW
    + MOVE
    + """
local moved = move(KEYS[2], KEYS[3], tonumber(ARGV[3]))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return moved
"""
)

# KEYS jobs; ARGV me, lease ms, ttl. 0 when the watchdog has reaped us: we must not come back.
RENEW = (
    NOW
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
TAKE = """
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

# KEYS jobs, todo, again, held, live; ARGV me, live field. Registered chunks include dead ones
# not yet reaped: while one is there its units are not done, so nobody may call the run finished.
# The third value is whether Redis still knows the launch: after Redis restarted empty it does
# not, and what is pending is the recovery's to rebuild from the database (apps.runs.engine.recovery),
# not a reason to call the run interrupted.
LEAVE = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[4])
return {
  redis.call('ZCARD', KEYS[1]),
  redis.call('LLEN', KEYS[2]) + redis.call('LLEN', KEYS[3]),
  redis.call('HEXISTS', KEYS[5], ARGV[2])
}
"""

# KEYS live, todo, again, seq, launch, stop; ARGV field, chunk timeout, ttl, launch, n chunks,
# keys... Puts a launch the database says is going back into Redis, unless Redis knows it
# (then -1: a launch is opened once, however many recoveries race). Returns the number of the
# first of the n chunks to enqueue; numbers go on from what the launch used (`seq`), so a
# job id is never reused while RQ may still hold it.
OPEN = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return -1 end
local ttl = tonumber(ARGV[3])
local n = tonumber(ARGV[5])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[6])
for i = 6, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('EXPIRE', KEYS[2], ttl)
local last = redis.call('INCRBY', KEYS[4], n)
redis.call('EXPIRE', KEYS[4], ttl)
redis.call('SET', KEYS[5], ARGV[4], 'EX', ttl)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return last - n + 1
"""

# KEYS jobs, held, again, seq; ARGV me, "expired" | "ended", requeue (1/0), ttl.
# Atomically forgets a dead chunk and hands its held keys back; returns the number for a
# replacement chunk (0 when the launch is over: nothing to requeue), -1 when there was nothing
# to do (another watchdog was first, or the lease was renewed after all).
REAP = (
    NOW
    + MOVE
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
FORGET = """
if redis.call('ZCARD', KEYS[2]) + redis.call('LLEN', KEYS[3]) + redis.call('LLEN', KEYS[4]) == 0 then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


def live_jobs(run_id: int, launch: int) -> int:
    now_ms = int(time.time() * 1000)
    return int(redis_connection().zcount(jobs_key(run_id, launch), now_ms, "+inf"))


# KEYS due; ARGV now ms, claim ms. Claims every due launch for `claim` ms: its poll job renews
# the claim while it works and sets the next poll when done, so a poll whose worker died is due
# again once the claim lapses, and two watchdogs never enqueue one poll twice.
CLAIM_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), member)
end
return due
"""
