"""In Chromium: start a run from its form and watch the progress bar reach the end."""

import pytest
from playwright.sync_api import expect

from apps.runs.models import Response, Run
from tests.factories import make_qa_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_run_started_in_the_browser_is_watched_to_completion(
    login, reviewer_user, task, endpoint, template, llm_server, workers
):
    dataset = make_qa_dataset(task, 80, name="browser")
    llm_server.configure(latency=0.15)
    endpoint.concurrency_limit = 4
    endpoint.save()
    workers()
    page = login(reviewer_user, f"/runs/new/generation/?dataset={dataset.pk}")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.select_option("select[name=template]", str(template.pk))
    page.fill("input[name=label]", "echo model")
    page.click("#start-run")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get()
    assert page.locator("h1").inner_text().endswith("echo model")

    # The bar moves while the run is active (seen at least once between 0 and 100)...
    seen = set()
    for _ in range(200):
        value = int(page.locator("#run-bar").get_attribute("aria-valuenow"))
        seen.add(value)
        if value == 100:
            break
        page.wait_for_timeout(250)
    assert any(0 < v < 100 for v in seen), seen
    # ...and ends full, completed, with the responses listed.
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=60_000)
    assert page.locator("#run-bar").get_attribute("aria-valuenow") == "100"
    assert page.locator("#run-done").inner_text() == "80"
    page.wait_for_selector("#response-table")
    assert "echo: Q: What is 0 + 0?" in page.locator("#response-table").inner_text()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED


def test_the_responses_table_fills_while_the_run_moves(login, reviewer_user, start):
    """#11.11: the table said "No responses yet." while 106 of 240 were done. No worker here:
    the run stays running, and responses written meanwhile must show without a reload."""
    run = start()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    page = login(reviewer_user, run.get_absolute_url())
    expect(page.locator("#response-table")).to_contain_text("No responses yet.")
    loads: list[str] = []
    page.on("load", lambda _: loads.append(page.url))

    items = list(run.dataset.items.order_by("position")[:2])
    for item in items:
        Response.objects.create(
            run=run, item=item, status=Response.Status.OK, text=f"answer to {item.key}"
        )
    Run.objects.filter(pk=run.pk).update(done=2)

    rows = page.locator("#response-table tr.response-ok")
    expect(rows).to_have_count(2, timeout=60_000)
    expect(rows.first).to_contain_text(f"answer to {items[0].key}")
    expect(page.locator("#run-done")).to_have_text("2")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "running")
    assert loads == [], "the page reloaded instead of updating in place"
