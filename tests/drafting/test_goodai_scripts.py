"""A generated GoodAI dataset runs as memory scripts (#27.4): each published item's content is
said first, then filler up to the gap, then its question, in turns, not one prompt."""

import pytest
from django.db import transaction

from apps.drafting.drafts import publish
from apps.runs.kinds.scripts import create_script_run
from apps.runs.models import Endpoint, Response, Run
from tests.base import work
from tests.factories import make_draft, make_generator, make_task

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_published_goodai_draft_runs_as_scripts(llm_server):
    task = make_task("goodai")
    generator = make_generator(task)
    draft = make_draft(
        generator,
        [[("What colour is the sky of world 1?", "green")], [("Who rules world 2?", "Queen Ada")]],
        content="World {n}: the sky is green and Queen Ada rules.",
        decisions=["approved", "approved"],
    )
    dataset = publish(draft)
    endpoint = Endpoint.objects.create(
        name="local", base_url=llm_server.base_url, model="test-model", api_key_secret="sk-t-123"
    )
    llm_server.configure(default_reply="Noted.", script={"sky of world": "green"})
    with transaction.atomic():
        run = create_script_run(
            dataset,
            endpoint,
            statements_column="content",
            question_column="question",
            gap_tokens=250,
        )
    work()
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.COMPLETED, 2)
    for response in Response.objects.filter(run=run).select_related("item"):
        turns = response.turns()
        item = response.item
        assert turns[0].asked == item.fields["content"]  # the content first, on its own
        assert all(item.fields["question"] not in t.asked for t in turns[:-1])
        assert turns[-1].asked == item.fields["question"]  # the question last, on its own
        assert len(turns) >= 3 and response.details["script"]["gap_tokens"] >= 250
    assert Response.objects.get(run=run, item__key="1-1").text == "green"
