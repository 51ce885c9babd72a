"""In Chromium: the start form prices the run before it starts (and again as choices change),
and a rerun answered from the cache shows "cached 5 / sent 0" with what it saved.

Estimate per request of the qa template: 20 prompt tokens (characters / 4 + 4 a message + 3)
and 256 for the reply (no max_tokens): (20 × 2 + 256 × 8) / 1e6 = $0.002088 at $2 / $8."""

import json

import pytest
from playwright.sync_api import expect

from apps.runs.models import Run
from tests.factories import make_qa_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PRICES = {"test-model": [2.0, 8.0]}


def test_the_form_prices_the_run_and_a_cached_rerun_sends_nothing(
    login, live_server, reviewer_user, task, endpoint, template, llm_server, workers, settings
):
    settings.PRICE_TABLE = PRICES
    endpoint.temperature = 0  # deterministic as sent: generation reuses the cache by default
    endpoint.save()
    workers(EVALSITE_PRICE_TABLE=json.dumps(PRICES))
    dataset = make_qa_dataset(task, 5, name="priced")
    page = login(reviewer_user, f"/runs/new/generation/?dataset={dataset.pk}")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.select_option("select[name=template]", str(template.pk))
    table = page.locator("#estimate-table")
    expect(table.locator("tr[data-row='1']")).to_contain_text("$0.0104")  # 5 × 0.002088
    expect(table.locator("tr[data-row='2']")).to_contain_text("$0.0052")  # batch: half
    expect(table.locator("tr[data-row='1']")).to_contain_text("100 + 1,280")
    expect(page.locator("#estimate-notes")).to_contain_text("0 of 5 requests already in the cache")
    page.fill("input[name=epochs]", "2")
    page.locator("input[name=epochs]").dispatch_event("change")
    expect(table.locator("tr[data-row='1']")).to_contain_text("$0.0209")
    page.fill("input[name=epochs]", "1")
    page.locator("input[name=epochs]").dispatch_event("change")
    expect(table.locator("tr[data-row='1']")).to_contain_text("$0.0104")
    page.click("#start-run")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=120_000)
    expect(page.locator("#run-cache")).to_contain_text("cached 0 / sent 5")
    assert llm_server.stats()["requests"] == 5

    page.goto(f"{live_server.url}/runs/new/generation/?dataset={dataset.pk}")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.select_option("select[name=template]", str(template.pk))
    expect(page.locator("#estimate-notes")).to_contain_text("5 of 5 requests already in the cache")
    expect(table.locator("tr[data-row='3']")).to_contain_text("$0.00")
    page.click("#start-run")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=120_000)
    # 8 words in, 7 out a request at the loopback server: 5 × (8 × 2 + 7 × 8) / 1e6 saved.
    expect(page.locator("#run-cache")).to_contain_text("cached 5 / sent 0, saved $0.0004")
    assert llm_server.stats()["requests"] == 5
    rerun = Run.objects.order_by("-pk").first()
    assert (rerun.done, rerun.cached_count, rerun.sent_count) == (5, 5, 0)
    page.goto(f"{live_server.url}/runs/")
    expect(page.locator(f"#run-table tr:has(a[href='/runs/{rerun.pk}/']) .run-cache")).to_have_text(
        "5 / 0"
    )
