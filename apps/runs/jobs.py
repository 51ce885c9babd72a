"""Background jobs of the runs app: functions of ids, safe to run twice."""

import functools
import socket
import traceback
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from apps.runs import engine
from apps.runs.models import WorkerCheck


def guarded(job: Callable[..., Any]) -> Callable[..., Any]:
    """Every run job goes through this: if the job itself crashes (a bug, the database or
    Redis gone, RQ's time limit), the run is marked failed with the traceback and every
    other chunk of it stops; RQ still records the job as failed.

    The run id must be the job's first argument.
    """

    @functools.wraps(job)
    def wrapper(run_id: int, *args: Any, **kwargs: Any) -> Any:
        try:
            return job(run_id, *args, **kwargs)
        except BaseException:
            engine.fail(run_id, traceback.format_exc())
            raise

    return wrapper


@guarded
def run_chunk(run_id: int, epoch: int, n: int) -> str:
    """One chunk of a run of any kind (see apps.runs.engine)."""
    return engine.run_chunk(run_id, epoch, n)


def check_worker(check_id: int) -> None:
    WorkerCheck.objects.filter(pk=check_id, completed_at__isnull=True).update(
        completed_at=timezone.now(), worker=socket.gethostname()
    )
