"""Each test process has a Redis database of its own. Two stages of bin/test once shared one
redis-server, and xdist worker gwN of each took database N + 1: each stage's RQ workers took the
other's jobs and ~80 tests saw runs stay "queued" (each stage passed alone)."""

import os
import subprocess
import sys

import pytest

from tests.base import ROOT
from tests.conftest import REDIS_CLAIM_KEY, RedisClaim, shared_redis_url
from tests.scripts import script_env

# Two xdist workers, each running the probe (--dist each).
PROBE_SESSION = ["-n", "2", "--dist", "each", "tests/harness/redis_probe.py"]


def test_xdist_workers_take_distinct_databases_of_a_shared_redis() -> None:
    base = "redis://127.0.0.1:6390/0"
    urls = [shared_redis_url(base, name) for name in ("main", "gw0", "gw1", "gw2")]
    assert urls == [
        "redis://127.0.0.1:6390/0",
        "redis://127.0.0.1:6390/1",
        "redis://127.0.0.1:6390/2",
        "redis://127.0.0.1:6390/3",
    ]


def test_a_second_process_on_this_database_fails_loudly(redis_claim: RedisClaim) -> None:
    other = RedisClaim(redis_claim.url)
    other.token = "elsewhere:1:gw0"
    try:
        other.client.set(REDIS_CLAIM_KEY, other.token)
        with pytest.raises(
            pytest.fail.Exception, match=r"used by another test process \(elsewhere:1:gw0"
        ):
            redis_claim.check()
        with pytest.raises(pytest.fail.Exception, match="used by another test process"):
            redis_claim.reset()
    finally:
        redis_claim.client.set(REDIS_CLAIM_KEY, redis_claim.token)


@pytest.mark.slow
def test_two_parallel_sessions_of_two_workers_hold_four_distinct_databases(tmp_path) -> None:
    """Two pytest sessions at once, as bin/test runs its stages, each with two xdist workers:
    every worker holds its database while all the others hold theirs. A Redis given to the
    tests by URL ($TEST_REDIS_URL) is handed on, as bin/test would hand it to both stages."""
    out = tmp_path / "probes.txt"
    out.touch()
    passed_on = {"TEST_REDIS_URL": url} if (url := os.environ.get("TEST_REDIS_URL")) else {}
    sessions = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PROBE_SESSION],
            cwd=ROOT,
            env=script_env(
                EVALSITE_TESTING="1",
                EVALSITE_REDIS_PROBE_OUT=str(out),
                EVALSITE_REDIS_PROBE_STAGE=stage,
                EVALSITE_REDIS_PROBE_EXPECTED="4",
                EVALSITE_DATA_DIR=str(tmp_path / stage),
                **passed_on,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for stage in ("sqlite", "postgres")
    ]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    for session, output in zip(sessions, outputs, strict=True):
        assert session.returncode == 0, output[-3000:]
    lines = out.read_text().splitlines()
    assert len(lines) == 4, lines
    processes = {tuple(line.split()[:2]) for line in lines}
    assert len(processes) == 4, lines  # sqlite/gw0, sqlite/gw1, postgres/gw0, postgres/gw1
    assert len({line.split()[2] for line in lines}) == 4, lines
