"""Fixtures for runs: a task with datasets, an endpoint on the loopback LLM server, templates."""

import contextlib
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from apps.datasets.models import Dataset, Task
from apps.runs.models import Endpoint, PromptTemplate, Run
from tests.factories import make_qa_dataset

SECRET = "sk-test-SECRET-5b1f0c9e7d"


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="qa", name="QA")


@pytest.fixture
def dataset(task: Task) -> Dataset:
    return make_qa_dataset(task, 30)


@pytest.fixture
def endpoint(db, llm_server) -> Endpoint:
    return Endpoint.objects.create(
        name="local",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=3,
        api_key_secret=SECRET,
    )


@pytest.fixture
def template(task: Task) -> PromptTemplate:
    return PromptTemplate.objects.create(
        task=task, name="qa", system_message="Answer briefly.", user_message="Q: {{ question }}"
    )


@pytest.fixture
def start(dataset, endpoint, template) -> Callable[..., Run]:
    from apps.runs.kinds.generation import create_generation_run

    def _start(**kwargs: Any) -> Run:
        return create_generation_run(
            kwargs.pop("dataset", dataset),
            kwargs.pop("endpoint", endpoint),
            kwargs.pop("template", template),
            **kwargs,
        )

    return _start


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (an RQ worker forks a work horse per job)."""
    import os

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_hard(proc: subprocess.Popen) -> None:
    """SIGKILL a worker and its work horse at once, as if the machine lost power."""
    import os
    import signal

    for pid in [proc.pid, *descendants(proc.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)
