"""In Chromium: start a generation run in batch mode from its form and see it finish."""

import pytest
from playwright.sync_api import expect

from apps.runs.models import Endpoint, Response, Run, RunBatch
from tests.factories import make_qa_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_batch_run_started_in_the_browser_finishes(
    login, reviewer_user, task, endpoint, template, llm_server, workers
):
    dataset = make_qa_dataset(task, 12, name="browser")
    plain = Endpoint.objects.create(
        name="no-batch", base_url=llm_server.base_url, model="test-model"
    )
    endpoint.supports_batch = True
    endpoint.save()
    # The batch stays in progress after 6 of its 12 lines until the test has seen it so.
    llm_server.batches(lines_per_second=50, hold_after=6)
    workers(EVALSITE_BATCH_POLL_SECONDS="0.2")
    page = login(reviewer_user, f"/runs/new/generation/?dataset={dataset.pk}")

    # An endpoint without the Batch API is refused on the form, with the reason.
    page.select_option("select[name=endpoint]", str(plain.pk))
    page.select_option("select[name=template]", str(template.pk))
    page.check("input[name=batch]")
    page.click("#start-run")
    expect(page.locator(".error")).to_contain_text(
        "Endpoint “no-batch” is not marked as supporting the Batch API"
    )
    assert not Run.objects.exists()

    page.select_option("select[name=endpoint]", str(endpoint.pk))
    expect(page.locator("input[name=batch]")).to_be_checked()
    page.fill("input[name=label]", "batched")
    page.click("#start-run")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get()
    assert run.batch
    expect(page.locator("#run-batch-mode")).to_have_text("batch mode")
    # While the provider works: the batch's own progress, nothing written yet.
    expect(page.locator("#batch-waiting")).to_contain_text("requests answered", timeout=120_000)
    expect(page.locator("#batch-table")).to_contain_text("in_progress", timeout=120_000)
    assert not Response.objects.filter(run=run).exists()
    llm_server.batches(hold_after=None)
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=90_000)
    assert page.locator("#run-done").inner_text() == "12"
    expect(page.locator("#batch-table")).to_contain_text("completed")
    expect(page.locator("#batch-table")).to_contain_text("written")
    expect(page.locator("#response-table")).to_contain_text("echo: Q: What is 0 + 0?")
    assert Response.objects.filter(run=run).count() == 12
    assert RunBatch.objects.get(run=run).requests == 12
