"""Memory-script and simulated-conversation runs through the API (#27.4, #27.5, #27.8)."""

import pytest

from apps.runs.models import Endpoint, Run
from tests.factories import make_dataset, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(db):
    rows = [
        {"key": "a", "fields": {"fact": "My cat is Miso.", "q": "Cat?", "goal": "a refund"}},
        {"key": "b", "fields": {"fact": "I am 40.", "q": "Age?", "goal": "the hours"}},
    ]
    return make_dataset(make_task("ltm"), rows, name="scripts")


def test_a_reviewer_starts_a_memory_script_run(token_client, endpoint, dataset):
    body = {
        "dataset": dataset.pk,
        "endpoint": "local",
        "statements_column": "fact",
        "question_column": "q",
        "gap_tokens": 2000,
        "label": "recall",
    }
    assert token_client("viewer").post("/runs/script/", body).status_code == 403
    reviewer = token_client("reviewer")
    started = reviewer.post("/runs/script/", body)
    assert started.status_code == 201, started.json()
    run = Run.objects.get(pk=started.json()["id"])
    assert (run.kind, run.label, run.total, run.multi_turn) == ("script", "recall", 2, True)
    assert run.script_setup.gap_tokens == 2000
    refused = reviewer.post("/runs/script/", {**body, "question_column": "nope"})
    assert refused.status_code == 400
    assert "row 1: the item has no column 'nope'" in refused.json()["detail"]
    unknown = reviewer.post("/runs/script/", {**body, "endpoint": "ghost"})
    assert unknown.status_code == 400 and unknown.json()["errors"]["endpoint"]
    assert Run.objects.count() == 1


def test_a_reviewer_starts_a_simulated_conversation_run(token_client, endpoint, dataset):
    Endpoint.objects.create(name="sim", base_url=endpoint.base_url, model="sim-model")
    body = {
        "dataset": dataset.pk,
        "endpoint": "local",
        "simulator": "sim",
        "instructions": "You want {{ goal }}. Say [DONE] when you have it.",
        "max_turns": 4,
    }
    reviewer = token_client("reviewer")
    started = reviewer.post("/runs/simulation/", body)
    assert started.status_code == 201, started.json()
    run = Run.objects.get(pk=started.json()["id"])
    assert run.kind == "simulation" and run.simulator_setup.simulator.name == "sim"
    assert run.simulator_setup.max_turns == 4
    refused = reviewer.post("/runs/simulation/", {**body, "max_turns": 99})
    assert (
        refused.status_code == 400
        and "Max turns must be between 1 and 50" in refused.json()["detail"]
    )
    assert Run.objects.count() == 1
