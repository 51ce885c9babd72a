"""Health endpoints for a load balancer or an orchestrator, answered without login.

/health/live says the web process answers. /health/ready says whether it can do its work: the
database answers a query, Redis a ping, and an RQ worker has sent a heartbeat recently. Each
answers a word per check and nothing else (no versions, hosts, counts or error text): they are
open to anyone who can reach the server.
"""

import logging
from datetime import timedelta

import django_rq
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from redis import Redis
from rq import Worker

logger = logging.getLogger(__name__)


@login_not_required
@never_cache
@require_safe
def live(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_safe
def ready(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database(), "redis": "down", "worker": "unknown"}
    try:
        redis = django_rq.get_connection("default")
        redis.ping()
        checks["redis"] = "ok"
        checks["worker"] = _worker(redis)
    except Exception:
        logger.warning("/health/ready: Redis does not answer", exc_info=True)
    ok = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", **checks}, status=200 if ok else 503
    )


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception:
        logger.warning("/health/ready: the database does not answer", exc_info=True)
        return "down"


def _worker(redis: Redis) -> str:
    since = timezone.now() - timedelta(seconds=settings.HEALTH_WORKER_SILENCE)
    workers = Worker.all(connection=redis)
    beats = [w.last_heartbeat for w in workers if w.last_heartbeat is not None]
    if not beats:
        return "none"
    return "ok" if max(beats) >= since else "silent"
