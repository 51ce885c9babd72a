"""run_finished: sent once when a run completes, in the process that settles it; a receiver
that breaks never fails the finished run (later apps hang their work on it)."""

import pytest

from apps.runs.engine.lifecycle import finalize
from apps.runs.models import Response, Run
from apps.runs.signals import run_finished


def settled_run(dataset, endpoint, template, answered: int) -> Run:
    run = Run.objects.create(
        task=dataset.task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        endpoint=endpoint,
        template=template,
        status=Run.Status.RUNNING,
        launch=1,
        total=dataset.items.count(),
    )
    items = list(dataset.items.order_by("position"))[:answered]
    Response.objects.bulk_create(
        Response(run=run, item=item, status=Response.Status.OK, text="x", launch=1)
        for item in items
    )
    return run


@pytest.fixture
def received():
    calls: list[tuple[int, str]] = []

    def receiver(sender, run, **kwargs):
        calls.append((run.pk, run.status))

    run_finished.connect(receiver, dispatch_uid="test-received")
    yield calls
    run_finished.disconnect(dispatch_uid="test-received")


@pytest.mark.django_db
def test_sent_once_when_a_run_completes(dataset, endpoint, template, received):
    run = settled_run(dataset, endpoint, template, answered=dataset.items.count())
    finalize(run.pk, 1)
    finalize(run.pk, 1)  # a second finalize (two chunks leaving last) sends nothing
    assert received == [(run.pk, Run.Status.COMPLETED)]


@pytest.mark.django_db
def test_not_sent_when_units_are_still_pending(dataset, endpoint, template, received):
    run = settled_run(dataset, endpoint, template, answered=3)
    finalize(run.pk, 1)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.interrupted_at is not None
    assert received == []


@pytest.mark.django_db
def test_a_broken_receiver_does_not_fail_the_run(dataset, endpoint, template, received, caplog):
    def broken(sender, run, **kwargs):
        raise RuntimeError("receiver bug")

    run_finished.connect(broken, dispatch_uid="test-broken")
    try:
        run = settled_run(dataset, endpoint, template, answered=dataset.items.count())
        finalize(run.pk, 1)
    finally:
        run_finished.disconnect(dispatch_uid="test-broken")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.error == ""
    assert received == [(run.pk, Run.Status.COMPLETED)]  # the others still heard it
    assert "receiver bug" in caplog.text
