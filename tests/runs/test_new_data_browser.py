"""In Chromium (#15.2): an admin turns on "evaluate every model on new data", uploads a corrected
file, and the model that ran on the first version runs on the new one, is judged by the
default judge, and the board shows the new version; the same file again starts nothing."""

import re

import pytest
from django.test import Client
from playwright.sync_api import expect

from apps.datasets.importing import import_dataset
from apps.judges.models import Judge
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import Run
from tests.base import make_user, wait_for, work
from tests.factories import make_judge, set_judging

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MAPPING = {"id_column": "id", "input_columns": ["question"], "reference_column": "answer"}
FIRST = b"id,question,answer\nq1,What is 1 + 1?,2\nq2,What is 2 + 2?,4\n"
SECOND = b"id,question,answer\nq1,What is 1 + 1?,2\nq2,What is 2 + 2?,4\nq3,What is 3 + 3?,6\n"


def upload(page, dataset_url: str, body: bytes) -> None:
    """The dataset page's "Upload corrected file", keeping the mapping offered."""
    page.goto(dataset_url)
    page.click("#upload-corrected")
    page.set_input_files(
        "input[name=file]", files=[{"name": "sums.csv", "mimeType": "text/csv", "buffer": body}]
    )
    page.click("text=Upload and preview")
    page.click("#import-button")
    page.wait_for_url(re.compile(r"/datasets/\d+/$"))


def test_new_version_runs_every_model_and_shows_on_the_board(
    login, live_server, task, endpoint, template, llm_server, workers
):
    set_judging(task, default_judge=make_judge(task, Judge.Kind.METRIC))
    llm_server.configure(script=[{"match": "What is 3 + 3?", "reply": "6"}])
    v1 = import_dataset(task, "sums", FIRST, MAPPING, fmt="csv")
    create_generation_run(v1, endpoint, template, label="echo-model")
    work()

    admin = make_user("admin")
    page = login(admin, f"/tasks/{task.slug}/")
    expect(page.locator("#evaluate-new-data")).not_to_be_checked()
    page.check("#evaluate-new-data")
    page.click("#save-new-data")
    expect(page.locator(".msg")).to_contain_text("Evaluate every model on new data: on")
    task.refresh_from_db()
    assert task.evaluate_new_data

    workers()
    upload(page, f"{live_server.url}{v1.get_absolute_url()}", SECOND)
    expect(page.locator("h1")).to_contain_text("v2")
    v2 = task.datasets.get(version=2)
    generation = Run.objects.generation().get(dataset=v2)
    assert generation.label == "echo-model"
    # The upload's message names the run it started (#28.6).
    expect(page.locator(".msg-info")).to_contain_text(f"Started on the new items: {generation}.")
    wait_for(
        lambda: Run.objects.judging().filter(source_run=generation, status="completed").exists(),
        timeout=90,
        what="the default judge to judge the new run",
    )

    page.goto(f"{live_server.url}/leaderboards/{task.slug}/")
    options = page.locator("#board-controls select[name=dataset] option")
    expect(options).to_have_text(["all", "sums v1", "sums v2"])
    page.select_option("#board-controls select[name=dataset]", str(v2.pk))
    rows = page.locator("#leaderboard tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("echo-model")
    expect(rows.first).to_contain_text("sums v2")
    expect(page.locator('td[data-stat="mean"][data-mode="judge"]').first).to_have_text("33.33")

    # The same file again: a version with the same items, and nothing started for it.
    upload(page, f"{live_server.url}{v2.get_absolute_url()}", SECOND)
    expect(page.locator(".msg-info")).to_contain_text("has the same items as sums v2")
    expect(page.locator("#unchanged-note")).to_contain_text("sums v2")
    v3 = task.datasets.get(version=3)
    assert not Run.objects.filter(dataset=v3).exists()


def test_only_admins_switch_the_option(task):
    for role in ("reviewer", "viewer"):
        client = Client()
        client.force_login(make_user(role, f"{role}-x"))
        url = f"/tasks/{task.slug}/new-data/"
        assert client.post(url, {"evaluate_new_data": "on"}).status_code == 403
        page = client.get(f"/tasks/{task.slug}/").content.decode()
        assert 'id="new-data-form"' not in page and 'id="new-data-state"' in page
    task.refresh_from_db()
    assert not task.evaluate_new_data
    admin = Client()
    admin.force_login(make_user("admin", "admin-x"))
    assert (
        admin.post(f"/tasks/{task.slug}/new-data/", {"evaluate_new_data": "on"}).status_code == 302
    )
    task.refresh_from_db()
    assert task.evaluate_new_data
    admin.post(f"/tasks/{task.slug}/new-data/", {})
    task.refresh_from_db()
    assert not task.evaluate_new_data
