"""Fixtures for runs: a task with datasets, an endpoint on the loopback LLM server, templates."""

import contextlib
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from apps.datasets.models import Dataset, Item, Task
from apps.runs.models import Endpoint, PromptTemplate, Run

SECRET = "sk-test-SECRET-5b1f0c9e7d"


def make_dataset(task: Task, n: int, name: str = "questions") -> Dataset:
    dataset = Dataset.objects.create(
        task=task,
        name=name,
        format=Dataset.Format.CSV,
        status=Dataset.Status.READY,
        columns=["id", "question", "answer"],
        mapping={"id_column": "id", "input_columns": ["question"], "reference_column": "answer"},
        row_count=n,
    )
    Item.objects.bulk_create(
        Item(
            dataset=dataset,
            position=i,
            key=f"q{i}",
            fields={"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)},
            reference=str(2 * i),
        )
        for i in range(n)
    )
    return dataset


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="qa", name="QA")


@pytest.fixture
def dataset(task: Task) -> Dataset:
    return make_dataset(task, 30)


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
    from apps.runs.generation import create_generation_run

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
