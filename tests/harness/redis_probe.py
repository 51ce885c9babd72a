"""Run only by tests/harness/test_redis_isolation.py, in inner pytest sessions with
--dist each: on every xdist worker, the test writes the Redis database its process got to
$EVALSITE_REDIS_PROBE_OUT, then waits until the workers of both sessions have written, so
that all of them hold their databases at once, as two stages of bin/test side by side do."""

import os
import time
from pathlib import Path

from tests.conftest import RedisClaim, xdist_worker_name

EXPECTED = int(os.environ.get("EVALSITE_REDIS_PROBE_EXPECTED", "1"))


def test_probe(redis_claim: RedisClaim) -> None:
    out = Path(os.environ["EVALSITE_REDIS_PROBE_OUT"])
    stage = os.environ["EVALSITE_REDIS_PROBE_STAGE"]
    with out.open("a") as handle:
        handle.write(f"{stage} {xdist_worker_name()} {redis_claim.url}\n")
    deadline = time.monotonic() + 120
    while len(out.read_text().splitlines()) < EXPECTED and time.monotonic() < deadline:
        time.sleep(0.1)
    redis_claim.check()
