"""Judge prompts typed in a browser arrive with CRLF line breaks: new judge versions store LF
and send LF to the endpoint; older versions keep what they recorded."""

import pytest
from django.db import transaction
from django.urls import reverse

from apps.judges.launching import create_judge_run
from apps.judges.models import Judge
from apps.runs.models import Run
from tests.base import work_here
from tests.factories import make_answers_dataset, make_judge, rubric_reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_judge_typed_in_a_browser_is_stored_and_sent_with_lf(
    task, reviewer_client, endpoint, llm_server
):
    dataset = make_answers_dataset(task, 4)
    v1 = make_judge(task, system_prompt="Judge.\r\nStrictly.", user_prompt="{{ response }}\r\n")
    response = reviewer_client.post(
        reverse("judges:edit", args=[v1.pk]),
        {
            "name": v1.name,
            "kind": "rubric",
            "subjects_text": "accuracy 1 5\r\nclarity 1 5",
            "label_type": "upper",
            "label_count": "4",
            "n_iter": "1",
            "aggregation": "mean",
            "system_prompt": "Judge the answer.\r\nBe strict.\rReply in JSON.",
            "user_prompt": "<q>\r\n{{ question }}\r\n</q>\r\n<a>\r\n{{ response }}\r\n</a>",
        },
    )
    assert response.status_code == 302, response.content.decode()
    v2 = Judge.objects.get(name=v1.name, version=2)
    assert v2.system_prompt == "Judge the answer.\nBe strict.\nReply in JSON."
    assert v2.user_prompt == "<q>\n{{ question }}\n</q>\n<a>\n{{ response }}\n</a>"
    v1.refresh_from_db()
    assert (v1.system_prompt, v1.user_prompt) == ("Judge.\r\nStrictly.", "{{ response }}\r\n")

    llm_server.configure(default_reply=rubric_reply(4, 4))
    with transaction.atomic():
        run = create_judge_run(v2, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    sent = [m["content"] for entry in llm_server.stats()["log"] for m in entry["messages"]]
    assert len(sent) == 8 and not any("\r" in text for text in sent)
    assert any(text.startswith("Judge the answer.\nBe strict.\nReply in JSON.") for text in sent)
    assert "<q>\nQuestion 2?\n</q>\n<a>\nanswer number 2\n</a>" in sent
