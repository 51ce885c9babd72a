"""In Chromium: start a run from its form and watch the progress bar reach the end."""

import pytest

from apps.runs.models import Run
from tests.runs.conftest import make_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_run_started_in_the_browser_is_watched_to_completion(
    login, reviewer_user, task, endpoint, template, llm_server, workers
):
    dataset = make_dataset(task, 80, name="browser")
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
