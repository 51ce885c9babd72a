"""In Chromium (#15.3, with #15.2): an admin makes a perturbed copy from the dataset page; the
task evaluates every model on new data, so the copy is generated and judged by itself; the
board's robustness page shows the model's paired difference with its t-interval."""

import re

import pytest
from playwright.sync_api import expect

from apps.datasets.importing import import_dataset
from apps.datasets.models import Dataset
from apps.judges.models import Judge
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import Endpoint, PromptTemplate, Run
from tests.base import make_user, wait_for, work
from tests.factories import make_judge, make_task, set_judging

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CSV = (
    b"id,question,answer\n"
    b"q1,Capital of France?,Paris\n"
    b"q2,Capital of Italy?,Rome\n"
    b"q3,Capital of Spain?,Madrid\n"
    b"q4,Capital of Japan?,Tokyo\n"
)
MAPPING = {"id_column": "id", "input_columns": ["question"], "reference_column": "answer"}


def test_perturb_then_the_board_shows_the_delta(login, live_server, llm_server, workers):
    task = make_task("capitals")
    set_judging(task, default_judge=make_judge(task, Judge.Kind.METRIC))
    task.evaluate_new_data = True
    task.save()
    endpoint = Endpoint.objects.create(
        name="local", base_url=llm_server.base_url, model="test-model", api_key_secret="sk-x"
    )
    template = PromptTemplate.objects.create(task=task, name="qa", user_message="Q: {{ question }}")
    # The model knows three capitals as asked, and none once the question's casing changes.
    llm_server.configure(
        script=[
            {"match": "Capital of France?", "reply": "Paris"},
            {"match": "Capital of Italy?", "reply": "Rome"},
            {"match": "Capital of Spain?", "reply": "Madrid"},
        ]
    )
    original = import_dataset(task, "capitals", CSV, MAPPING, fmt="csv")
    create_generation_run(original, endpoint, template, label="echo-model")
    work()
    assert Run.objects.judging().get().status == Run.Status.COMPLETED

    workers()
    page = login(make_user("admin"), original.get_absolute_url())
    page.select_option("#id_perturbation", "casing")
    page.fill("#id_seed", "7")
    page.click("#perturb-button")
    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    copy = Dataset.objects.get(perturbation="casing")
    assert page.url.endswith(copy.get_absolute_url())
    expect(page.locator("h1")).to_contain_text("capitals · casing (seed 7)")
    expect(page.locator("#changed-count")).to_have_text("4")
    questions = sorted(copy.items.values_list("fields__question", flat=True))
    assert all(q in (q.lower(), q.upper()) for q in questions) and len(set(questions)) == 4

    # The copy is new data: the model runs on it and the default judge follows.
    generation = Run.objects.generation().get(dataset=copy)
    assert generation.label == "echo-model"
    wait_for(
        lambda: Run.objects.judging().filter(source_run=generation, status="completed").exists(),
        timeout=90,
        what="the copy's run to be judged",
    )

    page.goto(f"{live_server.url}/leaderboards/{task.slug}/")
    page.click("#robustness-link")
    section = page.locator(f"#copy-{copy.pk}")
    # Original 100, 100, 100, 0; perturbed 0 everywhere: differences −100, −100, −100, 0,
    # mean −75, sd 50, se 25, half-width t(0.975, 3) × 25 = 79.56: [−154.56, 4.56], cut to
    # the differences a 0–100 subject allows.
    row = section.locator('tr[data-model="echo-model"]')
    expect(row.locator('[data-subject="exact_match"][data-stat="delta"]')).to_have_text("-75.00")
    expect(row.locator('[data-subject="exact_match"][data-stat="ci"]')).to_have_text(
        "[-100.00, 4.56]"
    )
    expect(row.locator('[data-subject="exact_match"][data-stat="n"]')).to_have_text("4")
    expect(page.locator("#robustness-summary")).to_contain_text("-75.00")
    expect(section.locator('.robustness-tags tr[data-tag="perturbed:casing"]')).to_contain_text(
        "-75.00"
    )
