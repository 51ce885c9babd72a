"""Fixtures for judge runs: a task and an endpoint on the loopback LLM server (rows come from
tests/factories.py)."""

import pytest

from apps.datasets.models import Task
from apps.runs.models import Endpoint


@pytest.fixture
def task(db) -> Task:
    return Task.objects.create(slug="qa", name="QA")


@pytest.fixture
def endpoint(db, llm_server) -> Endpoint:
    return Endpoint.objects.create(
        name="judge-llm",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-judge-0000",
    )
