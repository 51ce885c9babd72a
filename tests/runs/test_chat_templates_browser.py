"""In Chromium: write a template that sends the item's conversation, see it previewed, start a
multi-turn run from the start form and read an item's turns, at a wide and a narrow window."""

import pytest
from playwright.sync_api import expect

from apps.runs.models import PromptTemplate, Run
from tests.factories import make_conversation_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 800])
def test_a_conversation_template_and_a_multi_turn_run_in_the_browser(
    width, login, reviewer_user, task, endpoint, llm_server, workers
):
    dataset = make_conversation_dataset(task, [["Name a colour.", "Now a fruit of that colour."]])
    workers()
    page = login(reviewer_user, f"/runs/prompts/new/?task={task.slug}")
    page.set_viewport_size({"width": width, "height": 900})
    page.fill("input[name=name]", "dialogue")
    page.check("input[name=shape][value=conversation]")
    page.fill("textarea[name=system_message]", "Answer in one word.")
    page.click("#template-form button[type=submit]:not([name])")
    page.wait_for_url("**/runs/prompts/*/**")
    template = PromptTemplate.objects.get()
    assert template.sends_conversation
    expect(page.locator("#template-source")).to_contain_text("The item's conversation")
    expect(page.locator("#template-preview")).to_contain_text("Now a fruit of that colour.")

    page.goto(page.url.split("/runs/")[0] + f"/runs/new/generation/?dataset={dataset.pk}")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.select_option("select[name=template]", str(template.pk))
    page.check("input[name=multi_turn]")
    page.click("#start-run")
    page.wait_for_url("**/runs/*/")
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=120_000)
    expect(page.locator("#run-multi-turn")).to_be_visible()
    run = Run.objects.get()
    assert run.multi_turn
    item = dataset.items.get()
    page.goto(page.url.rstrip("/") + f"/items/{item.pk}/")
    expect(page.locator("#turn-0-2")).to_contain_text("Now a fruit of that colour.")
    expect(page.locator("#turn-0-2 .turn-answer")).to_contain_text("echo: Now a fruit")
