"""#11.15: the System page's "Check worker" shows the worker's answer by itself."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from apps.runs.models import WorkerCheck
from evalsite.enqueue import enqueue_now
from tests.base import make_user


@pytest.mark.django_db
def test_a_waiting_check_keeps_the_section_asking_until_a_minute_has_passed(admin_client):
    page = admin_client.get(reverse("runs:system")).content.decode()
    assert 'id="worker-round-trip"' in page and "hx-trigger" not in page  # nothing to wait for

    check = WorkerCheck.objects.create()
    partial = admin_client.get(
        reverse("runs:system"), headers={"HX-Request": "true", "HX-Target": "worker-round-trip"}
    ).content.decode()
    assert partial.lstrip().startswith('<section class="card" id="worker-round-trip"')
    assert 'hx-trigger="every 1s"' in partial and "waiting…" in partial and "<html" not in partial

    WorkerCheck.objects.filter(pk=check.pk).update(
        requested_at=timezone.now() - timedelta(seconds=61)
    )
    page = admin_client.get(reverse("runs:system")).content.decode()
    assert "no answer within a minute: is a worker running?" in page
    assert "hx-trigger" not in page


@pytest.mark.django_db
def test_the_page_counts_the_jobs_waiting_in_each_queue_in_the_order_workers_serve_them(
    admin_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # django-rq enqueues on commit
        for n in range(3):
            enqueue_now("apps.runs.jobs.check_worker", 0, queue="runs", job_id=f"r{n}")
        enqueue_now("apps.runs.jobs.check_worker", 0, queue="imports", job_id="i")
    page = admin_client.get(reverse("runs:system")).content.decode()
    table = page.split('<table id="queues">')[1].split("</table>")[0]
    rows = [row.split("</tr>")[0] for row in table.split("<tr>")[2:]]
    assert [(r.split("<code>")[1].split("<")[0], r.split('"num">')[1].split("<")[0]) for r in rows] == [
        ("imports", "1"), ("polls", "0"), ("default", "0"), ("runs", "3")
    ]  # fmt: skip
    assert "<strong>4</strong> jobs waiting" in page
    assert "rqworker imports polls default runs</code>" in page  # no worker: how to start one


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_check_worker_shows_the_answer_without_a_reload(login, live_server, workers):
    workers()
    page = login(make_user("admin"), "/runs/system/")
    loads: list[str] = []
    page.on("load", lambda _: loads.append(page.url))
    page.click("#check-worker")
    expect(page.locator("main")).to_contain_text("its reply shows below")
    loads.clear()  # the form's own POST and redirect
    first = page.locator("#worker-checks tbody tr").first
    expect(first).to_contain_text(" ms)", timeout=120_000)
    check = WorkerCheck.objects.get()
    assert check.completed_at is not None and check.worker
    expect(first).to_contain_text(check.worker)
    assert loads == [], "the page was reloaded instead of updating itself"
