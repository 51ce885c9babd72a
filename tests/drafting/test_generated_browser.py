"""In Chromium, end to end: an admin writes a generator, a reviewer generates a draft with a
real worker against the loopback server, approves, edits and rejects its items (by mouse and
by keyboard), publishes it, and starts a generation run on the published dataset."""

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Dataset
from apps.drafting.models import DraftItem
from apps.runs.models import PromptTemplate, Run
from tests.drafting.test_generated_datasets import EXPECTED, SCRIPT

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_generate_review_publish_and_use_a_draft_in_the_browser(
    login, admin_user, reviewer_user, task, endpoint, llm_server, workers, page, live_server
):
    llm_server.configure(script=SCRIPT[:2] + SCRIPT[3:5] + SCRIPT[6:])
    PromptTemplate.objects.create(
        task=task, name="qa", user_message="{{ content }}\n\nQ: {{ question }}"
    )
    workers()

    # An admin writes the generator's three prompts.
    login(admin_user, f"/runs/generators/new/?task={task.slug}")
    page.fill("input[name=name]", "world-facts")
    page.fill("textarea[name=content_prompt]", "Invent facts about world {{ unit }}.")
    page.fill("textarea[name=questions_prompt]", "Ask about these facts:\n{{ content }}")
    page.fill(
        "textarea[name=answers_prompt]",
        "Answer each question:\n{{ questions }}\nFacts:\n{{ content }}",
    )
    page.click("#generator-form button[type=submit]")
    page.wait_for_url("**/runs/generators/*/")
    expect(page.locator("h1")).to_contain_text("world-facts v1")
    generator_url = page.url
    page.click("#account-menu summary")
    page.click("#menu-log-out")

    # A reviewer generates two units into a draft and follows the run to its end.
    login(reviewer_user, generator_url.removeprefix(live_server.url))
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.fill("input[name=count]", "2")
    page.click("#generate-button")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=90_000)
    page.click("#draft-review-link")
    page.wait_for_url("**/runs/drafts/*/")
    dataset = Dataset.objects.get(status=Dataset.Status.DRAFT)
    expect(page.locator("#count-pending")).to_have_text("4")
    expect(page.locator("#publish")).to_be_disabled()
    items = {(d.unit.index, d.number): d for d in DraftItem.objects.select_related("unit").all()}
    assert sorted((k[0], k[1], d.content, d.question, d.reference) for k, d in items.items()) == (
        EXPECTED
    )

    # Mouse: approve the first item (htmx swaps the card and the counts).
    first = page.locator(f"#draft-item-{items[(0, 0)].pk}")
    first.locator("[data-action=approve]").click()
    expect(first.locator("[data-decision]")).to_have_text("Approved")
    expect(page.locator("#count-pending")).to_have_text("3")
    # Keyboard: the focus moved on to the second item; r rejects it.
    page.keyboard.press("r")
    second = page.locator(f"#draft-item-{items[(0, 1)].pk}")
    expect(second.locator("[data-decision]")).to_have_text("Rejected")
    # e opens the third item's editor; Ctrl+Enter saves the edit.
    page.keyboard.press("e")
    third = page.locator(f"#draft-item-{items[(1, 0)].pk}")
    question = third.locator("textarea[name=question]")
    expect(question).to_be_focused()
    question.fill("How many moons does Vell have?")
    page.keyboard.press("Control+Enter")
    expect(third.locator("[data-decision]")).to_have_text("Edited")
    expect(third.locator(".draft-question")).to_have_text("How many moons does Vell have?")
    page.keyboard.press("a")
    fourth = page.locator(f"#draft-item-{items[(1, 1)].pk}")
    expect(fourth.locator("[data-decision]")).to_have_text("Approved")
    expect(page.locator("#count-pending")).to_have_text("0")
    expect(page.locator("#count-rejected")).to_have_text("1")

    # Publish (the button is live once the counts say every item is decided).
    page.reload()
    expect(page.locator("#publish")).to_be_enabled()
    page.click("#publish")
    page.wait_for_url(f"**{dataset.get_absolute_url()}")
    expect(page.locator("#dataset-status")).to_have_text("Ready")
    expect(page.locator("#row-count")).to_have_text("3")
    dataset.refresh_from_db()
    assert list(dataset.items.order_by("position").values_list("key", "fields__question")) == [
        ("1-1", "Who rules Quix?"),
        ("2-1", "How many moons does Vell have?"),
        ("2-2", "What colour is its sea?"),
    ]

    # The generator's page counts the decisions of its version.
    page.goto(generator_url)
    row = page.locator("#rates-v1")
    expect(row).to_contain_text("2 (50%)")
    expect(row).to_contain_text("1 (25%)")
    expect(row.locator("td").last).to_have_text("75%")

    # The published dataset starts a generation run like an uploaded one.
    page.click(f"a[href='{dataset.get_absolute_url()}']")
    page.click("#generate-responses")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.click("#start-run")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(kind=Run.Kind.GENERATION)
    assert run.dataset_id == dataset.pk and run.total == 3
