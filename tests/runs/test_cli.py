"""`manage.py start_run`: a real command process, a real worker process, exit codes."""

import subprocess
import sys

import pytest

from apps.datasets.models import Dataset
from apps.runs.models import Response, Run
from tests.base import ROOT, subprocess_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def start_run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "start_run", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def generate_and_wait(dataset: Dataset, *options: str) -> subprocess.CompletedProcess:
    """`start_run generation` on the fixtures' endpoint and template, following the run."""
    return start_run(
        "generation",
        *("--dataset", str(dataset.pk), "--endpoint", "local", "--template", "qa"),
        *options,
        *("--wait", "--poll", "0.3"),
    )


def test_wait_follows_the_run_and_exits_zero_when_all_answered(
    dataset, endpoint, template, workers
):
    workers()
    result = generate_and_wait(dataset)
    assert result.returncode == 0, result.stdout + result.stderr
    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED and Response.objects.filter(run=run).count() == 30
    lines = result.stdout.splitlines()
    assert lines[0] == f"Started run #{run.pk} ({run.label}): 30 items."
    assert lines[-1].startswith(f"run #{run.pk} completed: 30 done, 0 failed of 30")


def test_wait_exits_non_zero_when_items_failed_and_retry_failed_fixes_it(
    dataset, endpoint, template, workers, llm_server
):
    llm_server.configure(script=[{"match": "What is 4 + 4?", "status": 400, "times": 1}])
    workers()
    result = generate_and_wait(dataset, "--logging", "all")
    assert result.returncode == 1, result.stdout + result.stderr
    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES and run.failed == 1
    assert "completed_with_failures: 29 done, 1 failed of 30" in result.stdout
    again = start_run("retry-failed", str(run.pk), "--wait", "--poll", "0.3")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[0] == f"Run #{run.pk}: 1 items to do."
    run.refresh_from_db()
    assert (run.done, run.failed, run.launch) == (30, 0, 2)


def test_bad_names_are_said_plainly(dataset, endpoint, template):
    result = start_run(
        "generation", "--dataset", str(dataset.pk), "--endpoint", "nope", "--template", "qa"
    )
    assert (
        result.returncode != 0 and "No endpoint named 'nope' (there are: local)." in result.stderr
    )
    result = start_run(
        "generation", "--dataset", str(dataset.pk), "--endpoint", "local", "--template", "zz"
    )
    assert result.returncode != 0 and "No template 'zz' in task qa." in result.stderr
    result = start_run("generation", "--dataset", "999", "--endpoint", "local", "--template", "qa")
    assert "No dataset with id 999." in result.stderr
    assert not Run.objects.exists()
