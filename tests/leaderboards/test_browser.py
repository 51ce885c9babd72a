"""In Chromium: the board switches to human-corrected values after an override, and weights
re-weight the overall score, both over HTMX."""

import pytest
from playwright.sync_api import expect

from tests import factories as f
from tests.base import make_user


def cell(page, run, subject, mode, stat="mean"):
    return page.locator(
        f'td[data-run="{run.pk}"][data-subject="{subject}"][data-mode="{mode}"][data-stat="{stat}"]'
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_switch_to_human_corrected_after_an_override(board_data, login, live_server):
    run = board_data["run_a"]
    page = login(make_user("viewer"), "/leaderboards/demo/?values=judge")
    expect(cell(page, run, "accuracy", "judge")).to_have_text("3.80")
    expect(cell(page, run, "accuracy", "human")).to_have_count(0)

    f.score(run, "k0", "accuracy").override(1, make_user("reviewer"), "the answer is wrong")

    page.click("#values-human")
    # (1 + 4 + 3 + 5 + 2) / 5: the override replaces the judge's 5.
    expect(cell(page, run, "accuracy", "human")).to_have_text("3.00")
    expect(cell(page, run, "accuracy", "human", "overridden")).to_have_text("1")
    expect(cell(page, run, "accuracy", "judge")).to_have_count(0)
    assert "values=human" in page.url  # the view is in the address, so it can be shared

    page.click("#values-judge")
    expect(cell(page, run, "accuracy", "judge")).to_have_text("3.80")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_weights_update_the_overall_score(board_data, login, live_server):
    run = board_data["run_a"]
    page = login(make_user("viewer"), "/leaderboards/demo/")
    overall = page.locator(f'td[data-run="{run.pk}"][data-stat="overall"]')
    expect(overall).to_have_text("72.50")
    page.fill('input[name="w.clarity"]', "0")
    page.locator('input[name="w.clarity"]').dispatch_event("change")
    # Accuracy alone: (3.8 - 1) / 4 on 0–100.
    expect(overall).to_have_text("70.00")
    assert "w.clarity=0" in page.url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sorting_by_a_column_header(board_data, login, live_server):
    page = login(make_user("viewer"), "/leaderboards/demo/?values=human")
    rows = page.locator("#leaderboard tbody tr")
    expect(rows.first).to_have_attribute("data-run", str(board_data["run_a"].pk))
    page.locator('#leaderboard thead a[href*="sort=mean%3Aclarity"]').click()
    # Clarity: model-b 5.0 beats model-a 4.0, best first.
    expect(rows.first).to_have_attribute("data-run", str(board_data["run_b"].pk))
    assert "sort=mean%3Aclarity" in page.url
    page.locator('#leaderboard thead a[href*="sort=mean%3Aclarity"]').click()
    expect(rows.first).to_have_attribute("data-run", str(board_data["run_a"].pk))  # flipped
