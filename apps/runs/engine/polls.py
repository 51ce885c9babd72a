"""When a batch-mode launch's batches are next polled (the due set in Redis, read by the
watchdog through `batch.enqueue_due_batch_polls`)."""

from django.conf import settings

from apps.runs.engine.redis_keys import BATCH_DUE_KEY, live_field, redis_connection
from apps.runs.engine.tuning import BATCH_POLL_CLAIM_MIN


def poll_batches_in(run_id: int, launch: int, seconds: float) -> None:
    """Have the launch's batches polled in `seconds` (0: at the watchdog's next tick)."""
    conn = redis_connection()
    seconds_now, micros = conn.time()
    due = int(seconds_now) * 1000 + int(micros) // 1000 + int(seconds * 1000)
    conn.zadd(BATCH_DUE_KEY, {live_field(run_id, launch): due})


def batch_poll_claim() -> float:
    """Seconds a poll job holds its launch before another may be enqueued (it renews them)."""
    return max(BATCH_POLL_CLAIM_MIN, 3 * settings.BATCH_POLL_SECONDS)


def renew_batch_claim(run_id: int, launch: int) -> None:
    """The poll job of the launch is still at work: hold off another one."""
    poll_batches_in(run_id, launch, batch_poll_claim())


def forget_batch_polls(run_id: int, launch: int) -> None:
    redis_connection().zrem(BATCH_DUE_KEY, live_field(run_id, launch))
