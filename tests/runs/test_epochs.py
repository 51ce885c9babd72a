"""Repeated generations: a run of K epochs answers every item K times through the engine,
each (item, epoch) exactly once, each epoch with its own seed; resume and retry failed work on
(item, epoch) units."""

from collections import Counter

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from apps.runs.engine.launch import launch
from apps.runs.kinds.generation import GenerationPlugin, parse_unit_key, unit_key
from apps.runs.models import AttemptLog, Response, Run
from tests.base import make_user, work_here
from tests.runs.test_cli import generate_and_wait, start_run


def test_unit_keys_name_the_item_and_the_epoch() -> None:
    assert unit_key(12, 0) == "12"  # a run of one epoch has the keys it always had
    assert unit_key(12, 2) == "12:2"
    assert parse_unit_key("12") == (12, 0) and parse_unit_key("12:2") == (12, 2)


@pytest.mark.django_db
def test_pending_units_per_mode_count_item_and_epoch(task, dataset, endpoint, template) -> None:
    run = Run.objects.create(
        task=task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        endpoint=endpoint,
        template=template,
        epochs=3,
        launch=1,
    )
    items = list(dataset.items.order_by("position")[:2])
    ok, failed = Response.Status.OK, Response.Status.FAILED
    Response.objects.bulk_create(
        [
            Response(run=run, item=items[0], epoch=0, status=ok, launch=1),
            Response(run=run, item=items[0], epoch=2, status=failed, launch=1),
            Response(run=run, item=items[1], epoch=1, status=ok, launch=1),
        ]
    )
    plugin = GenerationPlugin()
    assert plugin.total(run) == 90
    run.launch = 2
    resume = plugin.pending_keys(run, Run.Mode.RESUME)
    first, second = items[0].pk, items[1].pk
    assert resume[:4] == [
        f"{first}:1",
        str(second),
        f"{second}:2",
        str(dataset.items.get(position=2).pk),
    ]
    assert len(resume) == 87 == plugin.pending_count(run, Run.Mode.RESUME)
    assert plugin.pending_keys(run, Run.Mode.RETRY_FAILED) == [f"{first}:2"]
    assert plugin.pending_count(run, Run.Mode.RETRY_FAILED) == 1
    assert len(plugin.pending_keys(run, Run.Mode.OVERWRITE)) == 90
    assert plugin.settled_counts(run, Run.Mode.RESUME) == (2, 1)
    assert plugin.settled_counts(run, Run.Mode.RETRY_FAILED) == (2, 0)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_three_epochs_answer_every_item_three_times_each_with_its_own_seed(
    start, endpoint, llm_server
) -> None:
    endpoint.seed = 7
    endpoint.save()
    llm_server.configure(default_reply="seed {seed}: {last_user}")
    with transaction.atomic():
        run = start(epochs=3, logging_mode="all")
    assert run.total == 90
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed, run.total) == (Run.Status.COMPLETED, 90, 0, 90)
    rows = list(Response.objects.filter(run=run).values_list("item_id", "epoch", "text"))
    assert len(rows) == 90 and len({(item, epoch) for item, epoch, _ in rows}) == 90
    assert Counter(epoch for _, epoch, _ in rows) == {0: 30, 1: 30, 2: 30}
    for _, epoch, text in rows:
        assert text.startswith(f"seed {7 + epoch}: ")
    sent = [entry["params"].get("seed") for entry in llm_server.stats()["log"]]
    assert Counter(sent) == {7: 30, 8: 30, 9: 30}
    # The attempt log says which epoch each request was for.
    assert Counter(AttemptLog.objects.filter(run=run).values_list("epoch", flat=True)) == {
        0: 30,
        1: 30,
        2: 30,
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_retry_failed_asks_again_only_the_epoch_that_failed(start, llm_server) -> None:
    llm_server.configure(script=[{"match": "What is 4 + 4?", "status": 400, "times": 1}])
    with transaction.atomic():
        run = start(epochs=3)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED_WITH_FAILURES, 89, 1)
    broken = Response.objects.get(run=run, status=Response.Status.FAILED)
    assert broken.item.position == 4
    llm_server.reset()
    with transaction.atomic():
        assert launch(run, Run.Mode.RETRY_FAILED) == 1
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed, run.launch) == (Run.Status.COMPLETED, 90, 0, 2)
    assert llm_server.stats()["requests"] == 1
    item_four = Response.objects.filter(run=run, item=broken.item).order_by("epoch")
    assert [(r.epoch, r.status, r.launch == 2) for r in item_four] == [
        (e, Response.Status.OK, e == broken.epoch) for e in range(3)
    ]
    # Resume has nothing left; overwrite asks all 90 again.
    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_start_run_takes_epochs(dataset, endpoint, template, workers) -> None:
    bad = start_run(
        *("generation", "--dataset", str(dataset.pk), "--endpoint", "local"),
        *("--template", "qa", "--epochs", "0"),
    )
    assert bad.returncode != 0 and "--epochs must be between 1 and 100, not 0." in bad.stderr
    assert not Run.objects.exists()
    workers()
    result = generate_and_wait(dataset, "--epochs", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    run = Run.objects.get()
    assert result.stdout.splitlines()[0] == (
        f"Started run #{run.pk} ({run.label}): 30 items × 3 epochs = 90 responses."
    )
    assert "completed: 90 done, 0 failed of 90" in result.stdout
    assert run.epochs == 3 and Response.objects.filter(run=run).count() == 90


@pytest.mark.django_db
def test_the_start_form_takes_epochs(
    dataset, endpoint, template, django_capture_on_commit_callbacks
):
    client = Client()
    client.force_login(make_user("reviewer"))
    form = {
        "task": "qa",
        "dataset": dataset.pk,
        "endpoint": endpoint.pk,
        "template": template.pk,
        "logging_mode": "failed",
        "chunk_size": 200,
    }
    refused = client.post(reverse("runs:generation-start"), {**form, "epochs": 0})
    assert refused.status_code == 200 and "greater than or equal to 1" in refused.content.decode()
    assert not Run.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(reverse("runs:generation-start"), {**form, "epochs": 3}, follow=True)
    run = Run.objects.get()
    assert (run.epochs, run.total) == (3, 90)
    html = started.content.decode()
    assert "30 items × 3 epochs = 90 responses" in html and 'id="run-epochs"' in html
