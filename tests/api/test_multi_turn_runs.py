"""Multi-turn generation runs through the API: the start form's option, with its refusals."""

import pytest

from apps.runs.models import PromptTemplate, Run
from tests.factories import make_conversation_dataset, make_qa_dataset, make_task

pytestmark = pytest.mark.django_db


def test_a_multi_turn_run_starts_over_conversations_and_says_why_not_otherwise(
    token_client, endpoint
):
    reviewer = token_client("reviewer")
    task = make_task("mt")
    dialogues = make_conversation_dataset(task, [["Hi?", "And then?"]])
    plain = make_qa_dataset(task, 2)
    PromptTemplate.objects.create(task=task, name="chat", messages=[{"role": "conversation"}])
    start = {"task": "mt", "dataset": dialogues.pk, "endpoint": "local", "template": "chat"}

    refused = reviewer.post("/runs/generation/", {**start, "dataset": plain.pk, "multi_turn": True})
    assert refused.status_code == 400
    assert "has no conversation column" in refused.json()["errors"]["multi_turn"][0]
    assert not Run.objects.exists()

    started = reviewer.post("/runs/generation/", {**start, "multi_turn": True})
    assert started.status_code == 201, started.json()
    assert started.json()["multi_turn"] is True and Run.objects.get().multi_turn
    single = reviewer.post("/runs/generation/", start)
    assert single.status_code == 201 and single.json()["multi_turn"] is False
