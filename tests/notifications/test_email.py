"""Email alerts (#32.3): the same events, mailed through Django's mail settings; a mail server
that refuses is retried like a webhook; an alert tells only the events it chose, and only of
its own project."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from apps.accounts.models import Project
from apps.datasets.models import Task
from apps.notifications import jobs
from apps.notifications.models import RETRY_DELAYS, Delivery, EmailAlert, Event
from apps.runs.engine.lifecycle import fail, finalize
from tests import factories as f
from tests.base import free_port
from tests.notifications.test_webhooks import running_run, work_all

pytestmark = pytest.mark.django_db


def test_an_alert_mails_the_events_it_chose_of_its_own_project(
    task, project, settings, django_capture_on_commit_callbacks
):
    settings.EVALSITE_URL = "https://evals.example.com"
    settings.DEFAULT_FROM_EMAIL = "evalsite@example.com"
    EmailAlert.objects.create(
        project=project,
        name="on call",
        addresses="a@example.com, b@example.com",
        events=[Event.RUN_FAILED],
    )
    elsewhere = Project.objects.create(slug="team-b", name="Team B")
    other = Task.objects.create(slug="other", name="Other", project=elsewhere)
    dataset, theirs = f.make_qa_dataset(task, 3), f.make_qa_dataset(other, 3)
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(dataset, answered=3).pk, 1)  # finished: not chosen
        failing = running_run(dataset, answered=1, label="model-f")
        fail(failing.pk, "Stopped: the endpoint refused the API key (401)")
        fail(running_run(theirs, answered=1).pk, "Stopped: team B's run")
    work_all(django_capture_on_commit_callbacks)

    (sent,) = mail.outbox
    assert sent.to == ["a@example.com", "b@example.com"]
    assert sent.from_email == "evalsite@example.com"
    assert sent.subject == f"[evalsite] Generation run #{failing.pk} (model-f) failed"
    assert "failed: the endpoint refused the API key (401). 1 of 3 done" in sent.body
    assert f"https://evals.example.com/runs/{failing.pk}/" in sent.body
    assert "Project team-a, task qa." in sent.body
    delivery = Delivery.objects.get()
    assert (delivery.email.name, delivery.state, delivery.attempts) == ("on call", "delivered", 1)


def test_a_mail_server_that_refuses_is_retried(
    task, project, settings, django_capture_on_commit_callbacks
):
    locmem = settings.MAILERS
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": free_port(), "timeout": 10},  # nobody listens
        }
    }
    EmailAlert.objects.create(
        project=project, name="team", addresses="team@example.com", events=[Event.RUN_FINISHED]
    )
    with django_capture_on_commit_callbacks(execute=True):
        finalize(running_run(f.make_qa_dataset(task, 2), answered=2).pk, 1)
    work_all(django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts) == ("pending", 1)
    assert delivery.error.startswith("ConnectionRefusedError")
    assert delivery.next_attempt_at == delivery.last_attempt_at + timedelta(seconds=RETRY_DELAYS[0])

    settings.MAILERS = locmem  # the server is up
    assert jobs.deliver_due(timezone.now() + timedelta(minutes=1)) == ["delivered"]
    (sent,) = mail.outbox
    assert sent.to == ["team@example.com"] and "finished" in sent.subject
