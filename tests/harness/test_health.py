"""#32.6: health endpoints for a load balancer, open without login and saying nothing but a
word per check: /health/live (the process answers), /health/ready (database, Redis, a worker's
recent heartbeat)."""

from datetime import timedelta

import django_rq
import pytest
from django.test import Client
from django.utils import timezone
from rq import Queue, Worker

from tests.base import free_port

READY_KEYS = {"status", "database", "redis", "worker"}


def _worker(heartbeat_age: timedelta) -> Worker:
    connection = django_rq.get_connection("default")
    worker = Worker([Queue("default", connection=connection)], connection=connection)
    worker.register_birth()
    worker.last_heartbeat = timezone.now() - heartbeat_age
    connection.hset(
        worker.key, "last_heartbeat", worker.last_heartbeat.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    )
    return worker


@pytest.mark.django_db
def test_live_answers_anyone():
    response = Client().get("/health/live")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "no-cache" in response["Cache-Control"]
    form = "application/x-www-form-urlencoded"
    assert Client().post("/health/live", "a=1", content_type=form).status_code == 405


@pytest.mark.django_db
def test_ready_needs_a_worker_that_beats(settings):
    client = Client()
    answer = client.get("/health/ready")
    assert answer.status_code == 503
    assert answer.json() == {
        "status": "unavailable",
        "database": "ok",
        "redis": "ok",
        "worker": "none",
    }

    settings.HEALTH_WORKER_SILENCE = 600
    worker = _worker(timedelta(seconds=900))
    answer = client.get("/health/ready")
    assert (answer.status_code, answer.json()["worker"]) == (503, "silent")

    _worker(timedelta(seconds=5))
    answer = client.get("/health/ready")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok", "redis": "ok", "worker": "ok"}
    worker.register_death()


@pytest.mark.django_db
def test_ready_says_redis_is_down_and_nothing_more(settings):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings.RQ_QUEUES = {name: {"URL": dead, "DEFAULT_TIMEOUT": 60} for name in settings.RQ_QUEUES}
    answer = Client().get("/health/ready")
    assert answer.status_code == 503
    assert answer.json() == {
        "status": "unavailable",
        "database": "ok",
        "redis": "down",
        "worker": "unknown",
    }
    assert set(answer.json()) == READY_KEYS
