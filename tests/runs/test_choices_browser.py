"""In Chromium (#15.4): a choice-scoring run started from its form, scored by a real worker
against the loopback server's scripted log-probabilities, and both accuracies on the board;
a chat-only endpoint refused on the form with no run made."""

import pytest
from playwright.sync_api import expect

from apps.judges.models import CHOICE_JUDGE, Judge
from apps.runs.models import PromptTemplate, Run
from tests.factories import CHOICE_LOGPROBS, make_choice_dataset

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def choice_template(task) -> PromptTemplate:
    return PromptTemplate.objects.create(
        task=task, name="mc", user_message="Q: {{ question }}\nAnswer:"
    )


def test_choice_scoring_from_the_form_to_the_board(
    login, reviewer_user, task, endpoint, choice_template, llm_server, workers
):
    llm_server.configure(word_logprobs=CHOICE_LOGPROBS)
    dataset = make_choice_dataset(task)
    workers()
    page = login(reviewer_user, f"/datasets/{dataset.pk}/")
    page.click("#score-choices")
    page.wait_for_url("**/runs/new/choice/?dataset=*")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.select_option("select[name=template]", str(choice_template.pk))
    page.fill("input[name=label]", "ll model")
    page.click("#start-choice-run")
    page.wait_for_url("**/runs/*/")
    run = Run.objects.get(kind=Run.Kind.CHOICE)
    expect(page.locator("h1")).to_contain_text("ll model")
    page.wait_for_selector('#run-status[data-status="completed"]', timeout=60_000)
    table = page.locator("#response-table")
    expect(table).to_contain_text("A · per character B")  # c1: the picks differ
    # The choice judge follows the run (in the worker); its link leads to the board.
    link = page.locator("a.choice-board", has_text=CHOICE_JUDGE)
    for _ in range(60):
        if link.count():
            break
        page.wait_for_timeout(500)
        page.reload()
    link.first.click()
    page.wait_for_url("**/leaderboards/**")
    judge = Judge.objects.get(task=task, name=CHOICE_JUDGE)
    judge_run = Run.objects.get(kind=Run.Kind.JUDGE, judged_with__judge=judge, source_run=run)

    def cell(subject: str) -> object:
        return page.locator(
            f'td[data-run="{judge_run.pk}"][data-subject="{subject}"][data-stat="mean"]'
        ).first

    for _ in range(60):  # the judge run may still be finishing: reload until it has
        judge_run.refresh_from_db()
        if judge_run.status == Run.Status.COMPLETED:
            break
        page.wait_for_timeout(500)
    page.reload()
    expect(page.locator("#leaderboard")).to_contain_text("ll model")
    expect(cell("accuracy")).to_have_text("50.00")
    expect(cell("accuracy_norm")).to_have_text("100.00")
    expect(page.locator("#leaderboard thead")).to_contain_text("Accuracy (length-normalised)")


def test_a_chat_only_endpoint_is_refused_on_the_form(
    login, reviewer_user, task, endpoint, choice_template, llm_server
):
    llm_server.configure(completions="absent")
    dataset = make_choice_dataset(task)
    page = login(reviewer_user, f"/runs/new/choice/?dataset={dataset.pk}")
    page.select_option("select[name=endpoint]", str(endpoint.pk))
    page.select_option("select[name=template]", str(choice_template.pk))
    page.click("#start-choice-run")
    refused = page.locator("#choice-refused")
    expect(refused).to_contain_text("Endpoint local cannot score choices by log-likelihood")
    expect(refused).to_contain_text("no completions API")
    assert not Run.objects.exists()
