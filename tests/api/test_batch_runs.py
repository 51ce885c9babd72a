"""Batch mode through the API: the start forms' option, refused for an endpoint without it."""

import pytest

from apps.runs.models import PromptTemplate, Run
from tests.factories import make_answers_dataset, make_judge, make_qa_dataset, make_task

pytestmark = pytest.mark.django_db


def test_runs_start_in_batch_mode_only_on_endpoints_that_support_it(token_client, endpoint):
    reviewer = token_client("reviewer")
    task = make_task("qa")
    dataset = make_qa_dataset(task, 3)
    PromptTemplate.objects.create(task=task, name="qa", user_message="Q: {{ question }}")
    start = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": "qa"}

    refused = reviewer.post("/runs/generation/", {**start, "batch": True})
    assert refused.status_code == 400
    assert refused.json()["errors"]["batch"] == [
        "Endpoint “local” is not marked as supporting the Batch API: tick “Supports the Batch "
        "API” on the endpoint if its provider offers /v1/files and /v1/batches, or start the "
        "run without batch mode."
    ]
    assert not Run.objects.exists()

    endpoint.supports_batch = True
    endpoint.save()
    started = reviewer.post("/runs/generation/", {**start, "batch": True})
    assert started.status_code == 201 and started.json()["batch"] is True
    assert Run.objects.get(pk=started.json()["id"]).batch
    plain = reviewer.post("/runs/generation/", start)
    assert plain.json()["batch"] is False

    judged = reviewer.post(
        "/runs/judge/",
        {
            "judge": make_judge(task).pk,
            "responses": f"column:{make_answers_dataset(task, 2).pk}:response",
            "endpoint": "local",
            "batch": True,
        },
    )
    assert judged.status_code == 201, judged.json()
    assert Run.objects.get(pk=judged.json()["id"]).batch
