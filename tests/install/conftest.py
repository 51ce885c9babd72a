"""The users' install, running: bin/run as the README says, on free ports and a throwaway data
directory, with the venv it builds from requirements.txt alone. bin/test runs this folder once,
as its own stage, before the suites (the suites' runs leave it out: see tests/conftest.py)."""

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.base import ROOT, free_port
from tests.scripts import Script, script_env, server_processes, wait_until_gone

ADMIN = ("admin", "demo-admin")
REVIEWER = ("reviewer", "demo-reviewer")


@dataclass
class Install:
    url: str
    script: Script
    data_dir: Path


@pytest.fixture(scope="session")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """bin/run, started once for the stage; at the end Ctrl-C must stop all of it."""
    data_dir = tmp_path_factory.mktemp("install") / "data"
    web_port, redis_port = free_port(), free_port()
    env = script_env(
        PORT=str(web_port), EVALSITE_REDIS_PORT=str(redis_port), EVALSITE_DATA_DIR=str(data_dir)
    )
    script = Script([str(ROOT / "bin" / "run")], env)
    try:
        url = script.wait_for(r"evalsite is running at (http://\S+)").group(1)
        servers = server_processes(script)
        assert set(servers) == {"redis-server", "rqworker", "gunicorn"}, script.descendants()
        # The web server and the worker run in the users' venv, not the tests' one.
        users_venv = f"{ROOT / '.venv'}/bin/"
        for name in ("rqworker", "gunicorn"):
            assert users_venv in script.seen[servers[name]], script.seen[servers[name]]
        yield Install(url, script, data_dir)
        pids = list(script.descendants())
        os.killpg(script.proc.pid, signal.SIGINT)  # Ctrl-C in its terminal
        assert script.proc.wait(timeout=60) == 130, script.output[-3000:]
        wait_until_gone(pids, [web_port, redis_port])
    finally:
        script.kill_leftovers()
