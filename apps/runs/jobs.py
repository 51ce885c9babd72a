"""Background jobs of the runs app besides the engine's chunk job (`engine.chunk_job`)."""

import socket

from django.utils import timezone

from apps.runs.models import WorkerCheck


def check_worker(check_id: int) -> None:
    WorkerCheck.objects.filter(pk=check_id, completed_at__isnull=True).update(
        completed_at=timezone.now(), worker=socket.gethostname()
    )
