"""Receivers of the earlier apps' signals: each event becomes a notice and its deliveries.

They run where the event happened (a worker settling a run, a request saving a review, the
gate's command) and only write rows and enqueue jobs: the sending is the workers' (jobs.py).
"""

from typing import TYPE_CHECKING, Any

from django.utils import timezone

from apps.judges.models import Score, ScoreEvent
from apps.leaderboards.models import BoardSettings
from apps.notifications import jobs, notices
from apps.notifications.models import EmailAlert, Event, Webhook
from apps.runs.models import Run

if TYPE_CHECKING:  # the gate's module brings scipy: not at every process's start
    from apps.leaderboards.gate import Gate


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    jobs.start(notices.run_finished(run))


def on_run_stopped(sender: Any, run: Run, **kwargs: Any) -> None:
    jobs.start(notices.run_stopped(run))


def on_gate_decided(sender: Any, gate: "Gate", **kwargs: Any) -> None:
    jobs.start(notices.gate_result(gate, timezone.now().isoformat()))


def on_score_event(sender: Any, instance: ScoreEvent, created: bool, **kwargs: Any) -> None:
    """People reviewed a score (a reviewer, an adjudicator, or several reviewers' consensus):
    the task's agreement may have fallen below its threshold."""
    if not created or instance.kind == ScoreEvent.Kind.REJUDGE:
        return
    found = Score.objects.filter(pk=instance.score_id).values_list(
        "run__task_id", "run__task__project_id"
    )
    for task_id, project_id in found:
        if _watched(task_id, project_id):
            jobs.check_agreement_soon(task_id)


def on_board_settings(sender: Any, instance: BoardSettings, **kwargs: Any) -> None:
    """A threshold set or raised may already be crossed."""
    if instance.alignment_threshold is not None:
        task_id = instance.task_id
        project_id = instance.task.project_id
        if _watched(task_id, project_id):
            jobs.check_agreement_soon(task_id)


def _watched(task_id: int, project_id: int) -> bool:
    """Whether anyone hears of the task's agreement alarms: a threshold, and a destination."""
    if not BoardSettings.objects.filter(
        task_id=task_id, alignment_threshold__isnull=False
    ).exists():
        return False
    for model in (Webhook, EmailAlert):
        for destination in model.objects.filter(project_id=project_id, active=True):
            if destination.wants(Event.AGREEMENT):
                return True
    return False
