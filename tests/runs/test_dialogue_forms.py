"""Start forms for memory-script and simulated-conversation runs (#27.8): what `start_run
script` / `simulation` and the API take, from the browser; refusals that need the items (a row
that is not a script, a template that does not compile) show on the form, nothing created.
In process: the runs are created, not launched (no commit in these tests)."""

import pytest
from django.urls import reverse

from apps.runs.models import Endpoint, Run
from tests.base import make_user
from tests.factories import make_dataset, make_task

pytestmark = pytest.mark.django_db

ROWS = [
    {"key": "cat", "fields": {"facts": ["My cat is Miso."], "question": "Cat's name?"}},
    {"key": "car", "fields": {"facts": ["My car is blue."], "question": "Car's colour?"}},
]


@pytest.fixture
def world():
    task = make_task("memory")
    dataset = make_dataset(task, ROWS, name="recall", columns=["facts", "question"])
    endpoint = Endpoint.objects.create(name="local", base_url="http://127.0.0.1:9/v1", model="m")
    simulator = Endpoint.objects.create(name="sim", base_url="http://127.0.0.1:9/v1", model="s")
    return task, dataset, endpoint, simulator


def post(client, kind: str, world, **fields):
    task, dataset, endpoint, simulator = world
    data = {"task": task.slug, "dataset": dataset.pk, "endpoint": endpoint.pk, "epochs": 1}
    data |= {"logging_mode": "failed", "simulator": simulator.pk} | fields
    return client.post(reverse(f"runs:{kind}-start"), data)


def test_a_memory_script_run_starts_from_its_form(reviewer_client, world):
    dataset = world[1]
    page = reviewer_client.get(reverse("runs:script-new"), {"dataset": dataset.pk})
    assert page.status_code == 200 and 'id="script-form"' in page.content.decode()
    refused = post(reviewer_client, "script", world, statements_column="nope", question_column="question", gap_tokens=0, filler_seed=0)  # fmt: skip
    html = refused.content.decode()
    assert refused.status_code == 200 and 'id="script-refused"' in html
    assert "row 1: the item has no column &#x27;nope&#x27;" in html
    assert not Run.objects.exists()
    started = post(reviewer_client, "script", world, statements_column="facts", question_column="question", gap_tokens=2000, filler_seed=7, label="recall-a")  # fmt: skip
    run = Run.objects.get()
    assert started.status_code == 302 and started["Location"] == run.get_absolute_url()
    assert (run.kind, run.multi_turn, run.label, run.total) == (
        Run.Kind.SCRIPT,
        True,
        "recall-a",
        2,
    )
    setup = run.script_setup
    assert (setup.statements_column, setup.gap_tokens, setup.filler_seed) == ("facts", 2000, 7)


def test_a_simulated_conversation_run_starts_from_its_form(reviewer_client, world):
    task = world[0]
    page = reviewer_client.get(reverse("runs:simulation-new"), {"task": task.slug})
    assert page.status_code == 200 and 'id="simulation-form"' in page.content.decode()
    refused = post(reviewer_client, "simulation", world, instructions="{% if %}", max_turns=3, done_marker="[DONE]")  # fmt: skip
    assert "the simulator&#x27;s instructions" in refused.content.decode()
    too_many = post(reviewer_client, "simulation", world, instructions="Hi", max_turns=51, done_marker="[DONE]")  # fmt: skip
    assert too_many.status_code == 200 and not Run.objects.exists()
    post(reviewer_client, "simulation", world, instructions="You want {{ question }}", max_turns=3, done_marker="<END>")  # fmt: skip
    run = Run.objects.get()
    assert run.kind == Run.Kind.SIMULATION and run.simulator_setup.simulator == world[3]
    assert (run.simulator_setup.max_turns, run.simulator_setup.done_marker) == (3, "<END>")


def test_the_forms_are_for_reviewers_and_linked_from_the_dataset_and_task(client, world):
    task, dataset = world[0], world[1]
    client.force_login(make_user("viewer"))
    assert client.get(reverse("runs:script-new"), {"dataset": dataset.pk}).status_code == 403
    assert post(client, "simulation", world, instructions="x").status_code == 403
    client.force_login(make_user("reviewer", "rita"))
    detail = client.get(dataset.get_absolute_url()).content.decode()
    assert f"{reverse('runs:script-new')}?dataset={dataset.pk}" in detail
    assert f"{reverse('runs:simulation-new')}?dataset={dataset.pk}" in detail
    task_page = client.get(task.get_absolute_url()).content.decode()
    assert 'id="task-run-scripts"' in task_page and 'id="task-simulate-user"' in task_page
    picked = client.get(reverse("runs:script-new")).content.decode()  # no task: pick one
    assert f"{reverse('runs:script-new')}?task={task.slug}" in picked


def test_both_forms_show_the_cost_estimate_and_start_nothing(reviewer_client, world, settings):
    """As the generation form: changing a choice returns the estimate's partial (HTMX), the
    "Estimate cost" button the form with it, and no run is made. Memory scripts pinned by
    hand (gap 0: per item its statement, then the question after the statement and an answer
    as long as a reply is counted); the simulation's estimate equals the one of the run the
    same choices start (tests/runs/test_simulation.py pins that one by hand)."""
    from apps.runs.engine.llm import estimate_prompt_tokens
    from apps.runs.estimate import estimate
    from apps.runs.models import usd

    settings.PRICE_TABLE = {"m": [1.0, 2.0], "s": [10.0, 20.0]}
    answer = {"role": "assistant", "content": "x" * 1024}  # 256 tokens, the allowance
    prompt = 0
    for row in ROWS:
        told = {"role": "user", "content": row["fields"]["facts"][0]}
        asked = {"role": "user", "content": row["fields"]["question"]}
        prompt += estimate_prompt_tokens([told]) + estimate_prompt_tokens([told, answer, asked])
    script = {"statements_column": "facts", "question_column": "question", "gap_tokens": 0}
    script |= {"filler_seed": 0, "estimate": "1"}
    full = post(reviewer_client, "script", world, **script).content.decode()
    assert 'id="script-form"' in full and 'id="estimate-table"' in full
    assert usd((prompt * 1.0 + 4 * 256 * 2.0) / 1e6) in full

    simulation = {"instructions": "You want {{ question }}", "max_turns": 2}
    simulation |= {"done_marker": "[DONE]"}
    part = reviewer_client.post(
        reverse("runs:simulation-start"),
        {**post_data(world), **simulation},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="cost-estimate",
    ).content.decode()
    assert part.lstrip().startswith('<section id="cost-estimate"') and "<html" not in part
    assert "Includes 4 requests to sim, at its own price." in part
    assert not Run.objects.exists()
    post(reviewer_client, "simulation", world, **simulation)
    started = estimate(Run.objects.get())
    assert started.requests == 8 and usd(started.price()) in part

    # Choices that make no run yet (no instructions): the form says to choose, nothing fails.
    empty = post(reviewer_client, "simulation", world, estimate="1").content.decode()
    assert "Choose what to run to see its tokens and price." in empty


def post_data(world) -> dict:
    task, dataset, endpoint, simulator = world
    return {
        "task": task.slug,
        "dataset": dataset.pk,
        "endpoint": endpoint.pk,
        "epochs": 1,
        "logging_mode": "failed",
        "simulator": simulator.pk,
    }
