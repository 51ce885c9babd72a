"""What each event tells: a Notice (title, plain text, the webhook JSON's data) and a Delivery
for every destination of its project that wants the event (`tell`).

Names in the words (run labels, subjects, model names) come from people and models: the JSON
carries them as strings, Slack's text escapes them (delivery.slack_text), email is plain text.
"""

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse

from apps.datasets.models import Task
from apps.leaderboards.alignment import Alarm
from apps.leaderboards.boards import model_label
from apps.notifications.models import Delivery, Destination, EmailAlert, Event, Notice, Webhook
from apps.runs.models import Run, usd

if TYPE_CHECKING:  # the gate's module brings scipy: not at every process's start
    from apps.leaderboards.gate import Gate


def link(path: str) -> str:
    return f"{settings.EVALSITE_URL}{path}"


def tell(
    task: Task, event: str, key: str, title: str, text: str, data: dict[str, Any]
) -> list[Delivery]:
    """Record the notice in the task's project and a delivery to every destination there that
    wants `event`; [] when nobody wants it or the same occurrence (`key`) was told before."""
    webhooks = [w for w in Webhook.objects.filter(project_id=task.project_id) if w.wants(event)]
    emails = [e for e in EmailAlert.objects.filter(project_id=task.project_id) if e.wants(event)]
    if not webhooks and not emails:
        return []
    try:
        with transaction.atomic():
            notice = Notice.objects.create(
                project_id=task.project_id,
                task=task,
                event=event,
                key=key,
                title=title[:300],
                text=text,
                data={"project": task.project.slug, "task": task.slug, **data},
            )
    except IntegrityError:
        return []  # told already (a job run twice, a signal sent again)
    made = [Delivery(notice=notice, webhook=w) for w in webhooks]
    made += [Delivery(notice=notice, email=e) for e in emails]
    for delivery in made:
        delivery.save()
    return made


# ---- runs -------------------------------------------------------------------------------------
def run_data(run: Run) -> dict[str, Any]:
    return {
        "run": {
            "id": run.pk,
            "kind": run.kind,
            "label": run.label or "",
            "model": model_label(run),
            "status": run.status,
            "total": run.total,
            "done": run.done,
            "failed": run.failed,
            "cost_usd": round(run.cost, 6),
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "url": link(run.get_absolute_url()),
        }
    }


def run_finished(run: Run) -> list[Delivery]:
    name = f"{run.get_kind_display()} run #{run.pk} ({model_label(run)})"
    failed = f", {run.failed} failed" if run.failed else ""
    text = (
        f"{name} of task {run.task.slug} finished: {run.done} of {run.total} done{failed}, "
        f"{usd(run.cost)} spent.\n{link(run.get_absolute_url())}"
    )
    return tell(
        run.task,
        Event.RUN_FINISHED,
        f"run.finished:{run.pk}:{run.launch}",
        f"{name} finished ({run.get_status_display().lower()})",
        text,
        run_data(run),
    )


def run_stopped(run: Run) -> list[Delivery]:
    """A run that failed as a whole, or that its budget stopped (a person's cancel tells no one)."""
    name = f"{run.get_kind_display()} run #{run.pk} ({model_label(run)})"
    if run.status == Run.Status.FAILED:
        event, why, words = Event.RUN_FAILED, run.failure_cause, "failed"
    elif run.stopped_by_budget:
        event, why, words = Event.RUN_BUDGET, run.stop_reason, "was stopped by its budget"
    else:
        return []
    data = run_data(run)
    data["run"]["reason"] = why
    text = (
        f"{name} of task {run.task.slug} {words}: {why}. {run.done} of {run.total} done; "
        f"resume finishes the rest.\n{link(run.get_absolute_url())}"
    )
    return tell(run.task, event, f"{event}:{run.pk}:{run.launch}", f"{name} {words}", text, data)


# ---- agreement --------------------------------------------------------------------------------
def agreement_alarm(task: Task, alarm: Alarm) -> list[Delivery]:
    """The default judge's agreement with people fell below the task's threshold in a week:
    told once per judge version, subject and week."""
    week = alarm.week
    judge = alarm.judge
    title = (
        f"{judge} agrees with people on {alarm.subject} {week.agreement:.0%} of the time in the "
        f"week of {week.label}, below the task's {alarm.threshold:.0%}"
    )
    url = link(reverse("leaderboards:judge-alignment", args=[judge.pk]))
    text = f"{title} ({week.n} reviews), task {task.slug}.\n{url}"
    data = {
        "judge": {"id": judge.pk, "name": judge.name, "version": judge.version},
        "subject": alarm.subject,
        "week": week.label,
        "reviews": week.n,
        "agreement": round(week.agreement, 6),
        "threshold": alarm.threshold,
        "url": url,
    }
    key = f"{Event.AGREEMENT}:{judge.pk}:{alarm.subject}:{week.label}"
    return tell(task, Event.AGREEMENT, key, title, text, data)


# ---- the release gate -------------------------------------------------------------------------
def gate_result(gate: "Gate", told_at: str) -> list[Delivery]:
    """Every verdict of the gate is told (each is its own occurrence, `told_at`)."""
    title = f"Gate {gate.verdict} (exit {gate.exit_code}): {gate.candidate_label} against {gate.baseline_label}"
    subjects = [
        {
            "subject": s.subject,
            "n": s.n,
            "baseline": s.mean_baseline,
            "candidate": s.mean_candidate,
            "change": s.mean_change,
            "p_adjusted": s.p_adjusted,
            "needed": s.needed,
            "verdict": s.verdict,
        }
        for s in gate.subjects
    ]
    lines = [f"{s['subject']}: {s['verdict']} (n = {s['n']})" for s in subjects]
    text = f"{gate.headline}\n" + "\n".join(lines) + f"\nTask {gate.task.slug}, judge {gate.judge}."
    data = {
        "verdict": gate.verdict,
        "exit_code": gate.exit_code,
        "headline": gate.headline,
        "judge": {"id": gate.judge.pk, "name": gate.judge.name, "version": gate.judge.version},
        "baseline": {"run": gate.baseline.pk, "model": gate.baseline_label},
        "candidate": {"run": gate.candidate.pk, "model": gate.candidate_label},
        "margin": gate.margin,
        "alpha": gate.alpha,
        "subjects": subjects,
    }
    key = f"{Event.GATE}:{gate.baseline.pk}:{gate.candidate.pk}:{told_at}"
    return tell(gate.task, Event.GATE, key, title, text, data)


# ---- a test message ---------------------------------------------------------------------------
def test_message(destination: Destination, user: Any) -> Delivery:
    """A message to one destination, sent from the page to see that it arrives (and, for a
    webhook, that the receiver's signature check passes)."""
    project = destination.project
    notice = Notice.objects.create(
        project=project,
        event=Event.TEST,
        key=f"test:{uuid.uuid4().hex}",
        title=f"Test message to {destination.name}",
        text=f"{user} sent this from the notifications page of project {project.slug}.\n"
        + link(reverse("notifications:project", args=[project.slug])),
        data={"project": project.slug, "sent_by": str(user)},
    )
    made = Delivery(notice=notice, **{_field(destination): destination})
    made.save()
    return made


def _field(destination: Destination) -> str:
    return "webhook" if isinstance(destination, Webhook) else "email"
