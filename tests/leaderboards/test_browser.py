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
    # Strict: the failed k3 counts at the worst value, 1: (5 + 4 + 3 + 1 + 5 + 2) / 6.
    expect(cell(page, run, "accuracy", "judge")).to_have_text("3.33")
    expect(cell(page, run, "accuracy", "human")).to_have_count(0)

    f.score(run, "k0", "accuracy").override(1, make_user("reviewer"), "the answer is wrong")

    page.click("#values-human")
    # (1 + 4 + 3 + 1 + 5 + 2) / 6: the override replaces the judge's 5.
    expect(cell(page, run, "accuracy", "human")).to_have_text("2.67")
    expect(cell(page, run, "accuracy", "human", "overridden")).to_have_text("1")
    expect(cell(page, run, "accuracy", "judge")).to_have_count(0)
    assert "values=human" in page.url  # the view is in the address, so it can be shared

    page.click("#scoring-answered")
    # Answered items only: (1 + 4 + 3 + 5 + 2) / 5, k3 left out; the choice is in the URL.
    expect(cell(page, run, "accuracy", "human")).to_have_text("3.00")
    assert "scoring=answered" in page.url and "values=human" in page.url

    page.click("#values-judge")
    expect(cell(page, run, "accuracy", "judge")).to_have_text("3.80")
    assert "scoring=answered" in page.url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_weights_update_the_overall_score(board_data, login, live_server):
    run = board_data["run_a"]
    page = login(make_user("viewer"), "/leaderboards/demo/")
    overall = page.locator(f'td[data-run="{run.pk}"][data-stat="overall"]')
    # Strict: accuracy 20/6 and clarity 21/6 (k5 missing at 1), rescaled from 1–5 and averaged.
    expect(overall).to_have_text("60.42")
    page.fill('input[name="w.clarity"]', "0")
    page.locator('input[name="w.clarity"]').dispatch_event("change")
    # Accuracy alone: (20/6 - 1) / 4 on 0–100.
    expect(overall).to_have_text("58.33")
    assert "w.clarity=0" in page.url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sorting_by_a_column_header(board_data, login, live_server):
    page = login(make_user("viewer"), "/leaderboards/demo/?values=human&scoring=answered")
    rows = page.locator("#leaderboard tbody tr")
    expect(rows.first).to_have_attribute("data-run", str(board_data["run_a"].pk))
    page.locator('#leaderboard thead a[href*="sort=mean%3Aclarity"]').click()
    # Clarity: model-b 5.0 beats model-a 4.0, best first.
    expect(rows.first).to_have_attribute("data-run", str(board_data["run_b"].pk))
    assert "sort=mean%3Aclarity" in page.url
    page.locator('#leaderboard thead a[href*="sort=mean%3Aclarity"]').click()
    expect(rows.first).to_have_attribute("data-run", str(board_data["run_a"].pk))  # flipped
