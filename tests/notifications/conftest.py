"""Fixtures for notifications: a project with a task, a loopback receiver and its webhook."""

from collections.abc import Iterator

import pytest

from apps.accounts.models import Project
from apps.datasets.models import Task
from apps.notifications.models import CHOSEN_EVENTS, Webhook, new_secret
from tests.notifications.receiver import Receiver


@pytest.fixture
def project(db) -> Project:
    return Project.objects.create(slug="team-a", name="Team A")


@pytest.fixture
def task(project: Project) -> Task:
    return Task.objects.create(slug="qa", name="QA", project=project)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(secret=new_secret()).start()
    yield found
    found.stop()


@pytest.fixture
def webhook(project: Project, receiver: Receiver) -> Webhook:
    return Webhook.objects.create(
        project=project,
        name="ci",
        url=receiver.url,
        secret=receiver.secret,
        events=[event for event, _ in CHOSEN_EVENTS],
    )
