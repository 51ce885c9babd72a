"""Scripts run as a person runs them from a terminal: bin/run and bin/test in their own
session, their output collected, every process they started found and, after a failure, killed."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.base import ROOT, free_port

START_TIMEOUT = 180  # a cold start installs packages; a warm one takes seconds


def script_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that points at the test run's services."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in {
            "DATABASE_URL",
            "REDIS_URL",
            "TEST_REDIS_URL",
            "EVALSITE_TESTING",
            "DJANGO_SETTINGS_MODULE",
            "PORT",
            "EVALSITE_REDIS_PORT",
            "EVALSITE_DATA_DIR",
            "PYTEST_CURRENT_TEST",
        }
    }
    env.update(EVALSITE_ENV_FILE="", PYTHONUNBUFFERED="1", **extra)
    return env


class Script:
    """A script started in its own session, as from a terminal; its output is collected."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            # A shell cannot trap a signal it was started with ignored, and a job that a script
            # puts in the background starts with SIGINT ignored: give the script a terminal's.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: list[str] = []
        self.seen: dict[int, str] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(
        self, pattern: str, timeout: float = START_TIMEOUT, *, after_exit: bool = False
    ) -> re.Match:
        """Wait for output matching `pattern`; fail early if the script exits first, unless
        `after_exit` (its last lines may still be on their way through the pipe)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if match := re.search(pattern, self.output):
                return match
            if not after_exit and self.proc.poll() is not None:
                pytest.fail(f"exited {self.proc.returncode} before {pattern!r}:\n{self.output}")
            time.sleep(0.1)
        pytest.fail(f"no {pattern!r} within {timeout} s:\n{self.output}")

    def descendants(self) -> dict[int, str]:
        """Every live process below the script (pid: command line); remembered in `seen`."""
        ps = subprocess.run(
            ["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True
        ).stdout
        children: dict[int, list[tuple[int, str]]] = {}
        for line in ps.splitlines():
            pid, ppid, args = line.strip().split(None, 2)
            children.setdefault(int(ppid), []).append((int(pid), args))
        found: dict[int, str] = {}
        stack = [self.proc.pid]
        while stack:
            for pid, args in children.get(stack.pop(), []):
                found[pid] = args
                stack.append(pid)
        self.seen.update(found)
        return found

    def kill_leftovers(self) -> None:
        """After a failed test: leave nothing behind for the next one."""
        for pid in [self.proc.pid, *self.seen]:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)


def alive(pid: int) -> bool:
    """True for a running process; a zombie nobody reaped yet counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until_gone(pids: list[int], ports: list[int], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(pid) for pid in pids) and not any(port_open(p) for p in ports):
            return
        time.sleep(0.1)
    left = [pid for pid in pids if alive(pid)]
    open_ports = [p for p in ports if port_open(p)]
    pytest.fail(f"left behind: processes {left}, open ports {open_ports}")


def server_processes(script: Script) -> dict[str, int]:
    """pid of the Redis, worker and web server below bin/run, by name."""
    found: dict[str, int] = {}
    for pid, args in script.descendants().items():
        for name in ("redis-server", "rqworker", "gunicorn"):
            if name in args and name not in found:
                found[name] = pid
    return found


@contextlib.contextmanager
def gunicorn(data_dir: Path, **extra_env: str) -> Iterator[int]:
    """The web server as bin/run starts it (evalsite/gunicorn_conf.py, one worker) on a free
    port, with a data directory of its own; yields the port, stops the server after."""
    port = free_port()
    env = script_env(
        EVALSITE_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="evalsite.settings", **extra_env
    )
    command = [str(Path(sys.executable).parent / "gunicorn"), "evalsite.wsgi:application"]
    command += ["--config", "python:evalsite.gunicorn_conf", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "1", "--graceful-timeout", "2"]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not port_open(port):
            assert process.poll() is None, "gunicorn exited"
            assert time.monotonic() < deadline, f"gunicorn did not listen on {port}"
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
