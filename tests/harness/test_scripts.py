"""The README's commands as a person runs them: bin/run serves the demo and stops clean,
bin/test fails when a test fails or when no test ran."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.base import ROOT
from tests.scripts import Script, script_env


def test_descendants_reads_whole_command_lines_whatever_the_terminal_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CI sets COLUMNS=80, and plain `ps` then cut "…/.venv/bin/gunicorn" short in a long checkout.
    monkeypatch.setenv("COLUMNS", "40")
    marker = "gunicorn-" + "x" * 100
    child = f"{sys.executable} -c 'import time; time.sleep(90)' {marker}"
    script = Script(["bash", "-c", f"{child}; true"], dict(os.environ))
    try:
        deadline = time.monotonic() + 60
        # Until the child itself is there: at first only `bash -c` may have started.
        while time.monotonic() < deadline:
            found = script.descendants()
            if any(args.endswith(marker) for args in found.values()):
                break
            time.sleep(0.05)
        assert any(args.endswith(marker) for args in found.values()), found
    finally:
        script.kill_leftovers()


# ---- bin/test judges pytest's outcome ----------------------------------------------------
def run_bin_test(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "bin" / "test"), *args],
        cwd=ROOT,
        # One xdist worker: the counting goes through xdist's report as in a full run, without
        # starting three Django processes for a one-test file.
        env=script_env(
            EVALSITE_TEST_DBS="sqlite", EVALSITE_TEST_LINT="0", EVALSITE_TEST_WORKERS="1"
        ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def sample_tests(tmp_path: Path) -> Path:
    path = tmp_path / "test_sample.py"
    path.write_text("def test_passes():\n    assert 1 + 1 == 2\n")
    return path


@pytest.mark.slow
def test_bin_test_passes_and_counts_when_tests_pass(sample_tests):
    result = run_bin_test(str(sample_tests), "-q")  # counted at any verbosity
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "sqlite: 1 passed, 0 failed"


@pytest.mark.slow
def test_bin_test_fails_when_a_test_fails(sample_tests):
    with sample_tests.open("a") as handle:
        handle.write("\n\ndef test_fails():\n    assert 1 + 1 == 3\n")
    result = run_bin_test(str(sample_tests))
    assert result.returncode != 0
    assert result.stdout.splitlines()[-1] == "sqlite: 1 passed, 1 failed"


@pytest.mark.slow
def test_bin_test_fails_when_no_test_ran(sample_tests):
    result = run_bin_test(str(sample_tests), "-k", "no_such_test")
    assert result.returncode != 0
    assert "no test ran" in result.stderr
    assert result.stdout.splitlines()[-1] == "sqlite: 0 passed, 0 failed"


def test_wait_for_port_waits_for_a_server_that_has_not_made_its_group_yet() -> None:
    """`setsid cmd &` returns before the child has its own process group; on a loaded machine
    wait_for_port found the group empty and said "redis-server did not start" at once, with
    nothing in its log. A process that is alive, in whatever group, is still starting."""
    script = f"""
        source {ROOT / "bin" / "_setup.sh"}
        port="$(free_port)"
        sleep 30 & starting=$!      # alive, but no group of its own (no setsid)
        begun=$SECONDS
        wait_for_port "$port" 2 "$starting"; waited=$?
        echo "waited $waited after $((SECONDS - begun))"
        kill "$starting"
        (exit 3) & gone=$!; wait "$gone"  # dead and reaped: gives up at once
        begun=$SECONDS
        wait_for_port "$port" 20 "$gone"; echo "gone $? after $((SECONDS - begun))"
    """
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    lines = done.stdout.split("\n")
    assert lines[0] in ("waited 1 after 2", "waited 1 after 3"), done
    assert lines[1] == "gone 1 after 0", done
