"""Prompt text typed in a browser arrives with CRLF line breaks (the HTML spec says a textarea
submits them so): new template versions store LF and send LF; older versions keep what they
recorded."""

import pytest
from django.urls import reverse

from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import PromptTemplate, Run
from tests.base import work_here

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_template_typed_in_a_browser_is_stored_and_sent_with_lf(
    reviewer_client, task, dataset, endpoint, llm_server
):
    recorded = "Q:\r\n{{ question }}\r\nA:"
    v1 = PromptTemplate.objects.create(
        task=task, name="qa", system_message="Be brief.\r\nBe kind.", user_message=recorded
    )
    response = reviewer_client.post(
        reverse("runs:template-edit", args=[v1.pk]),
        {
            "name": "qa",
            "system_message": "Be brief.\r\nBe kind.\rNo more.",  # a lone CR (old Macs) too
            "user_message": "Question:\r\n{{ question }}\r\n\r\nAnswer:",
            "fewshot_k": 1,
            "fewshot_seed": 7,
            "fewshot_format": "Q: {{ question }}\r\nA: {{ reference }}",
        },
    )
    assert response.status_code == 302, response.content.decode()
    v2 = PromptTemplate.objects.get(version=2)
    assert v2.system_message == "Be brief.\nBe kind.\nNo more."
    assert v2.user_message == "Question:\n{{ question }}\n\nAnswer:"
    assert v2.fewshot_format == "Q: {{ question }}\nA: {{ reference }}"
    v1.refresh_from_db()
    assert (v1.system_message, v1.user_message) == ("Be brief.\r\nBe kind.", recorded)

    run = create_generation_run(dataset, endpoint, v2)
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    sent = [m["content"] for entry in llm_server.stats()["log"] for m in entry["messages"]]
    assert len(sent) >= 60 and not any("\r" in text for text in sent)
    assert "Be brief.\nBe kind.\nNo more." in sent
    # The example (its format typed with CRLF too), then the item.
    assert any(
        text.startswith("Q: What is ") and text.endswith("\n\nQuestion:\nWhat is 3 + 3?\n\nAnswer:")
        for text in sent
    )
