"""Multi-turn storage: a Turn per (run, item, epoch, turn), and what a Response stands for
(`Response.transcript()`, `Response.turn_answers()`), the contract judges and review read."""

import pytest
from django.db import IntegrityError, transaction

from apps.runs.models import PromptTemplate, Response, Run, Turn
from apps.runs.turns import dialogue, user_turns
from tests.factories import (
    make_conversation_dataset,
    make_generation_run,
    make_multi_turn_run,
    make_qa_dataset,
)

TOOL_CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
    {"role": "assistant", "content": "Cold: -3 C."},
    {"role": "system", "content": "Answer in French now."},
    {"role": "user", "content": "And tomorrow?"},
    {"role": "assistant", "content": "Recorded reply."},
]


def test_each_turn_is_asked_with_the_models_own_earlier_answers_in_place():
    assert user_turns(TOOL_CHAT) == ["Weather in Oslo?", "And tomorrow?"]
    # Turn 1: everything before the first user message, then it.
    assert dialogue(TOOL_CHAT, [], upto=1) == TOOL_CHAT[:2]
    # Turn 2: the recorded tool traffic and reply give way to the model's turn-1 answer; the
    # system message between the turns stays where it was.
    assert dialogue(TOOL_CHAT, ["It is cold."], upto=2) == [
        TOOL_CHAT[0],
        TOOL_CHAT[1],
        {"role": "assistant", "content": "It is cold."},
        TOOL_CHAT[5],
        TOOL_CHAT[6],
    ]
    # The transcript runs to the last answered turn.
    assert dialogue(TOOL_CHAT, ["It is cold.", "Encore froid."]) == [
        *dialogue(TOOL_CHAT, ["It is cold."], upto=2),
        {"role": "assistant", "content": "Encore froid."},
    ]
    assert dialogue(TOOL_CHAT, ["It is cold."]) == dialogue(TOOL_CHAT, ["It is cold."], upto=2)[:3]
    assert dialogue(TOOL_CHAT, []) == []  # nothing answered: no dialogue yet


@pytest.fixture
def mt_bench(db):
    from apps.datasets.models import Task

    task = Task.objects.create(slug="mt", name="MT")
    return make_conversation_dataset(
        task,
        [
            ["Write a haiku about rain.", "Now make it about snow."],
            ["What is 2 + 2?", "Times three?"],
        ],
        categories=["writing", "math"],
        references=[["", ""], ["4", "12"]],
    )


def test_a_multi_turn_response_is_its_dialogue(mt_bench):
    run = make_multi_turn_run(mt_bench, {"d0": ["Drops on leaves.", "Flakes on eaves."]})
    response = Response.objects.get(run=run)
    assert response.status == Response.Status.OK
    assert response.text == "Flakes on eaves."  # the whole item; its text the last answer
    assert response.turn_answers() == ["Drops on leaves.", "Flakes on eaves."]
    assert response.transcript() == [
        {"role": "user", "content": "Write a haiku about rain."},
        {"role": "assistant", "content": "Drops on leaves."},
        {"role": "user", "content": "Now make it about snow."},
        {"role": "assistant", "content": "Flakes on eaves."},
    ]
    turns = response.turns()
    assert [(t.number, t.asked) for t in turns] == [
        (1, "Write a haiku about rain."),
        (2, "Now make it about snow."),
    ]
    # The Response sums its turns (the factory gives turn n 10·n prompt tokens, 5 completion).
    assert (response.prompt_tokens, response.completion_tokens) == (30, 10)


def test_a_failed_turn_fails_the_item_naming_it_and_ends_the_dialogue(mt_bench):
    run = make_multi_turn_run(mt_bench, {"d1": ["4", None]})
    response = Response.objects.get(run=run)
    assert response.status == Response.Status.FAILED
    assert response.error == "Turn 2 of 2: the server failed (500): boom"
    assert response.turn_answers() == ["4"]
    assert response.transcript() == [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    assert [t.is_answered for t in Turn.objects.filter(run=run)] == [True, False]


def test_one_turn_row_per_run_item_epoch_and_number(mt_bench):
    run = make_multi_turn_run(mt_bench, {"d0": ["a", "b"]})
    turn = Turn.objects.filter(run=run).first()
    assert turn is not None
    turn.pk = None
    with pytest.raises(IntegrityError), transaction.atomic():
        turn.save()
    with pytest.raises(IntegrityError), transaction.atomic():
        Turn.objects.create(run=run, item=turn.item, epoch=1, number=0, asked="x")


def test_many_responses_read_their_turns_in_one_query(mt_bench, django_assert_num_queries):
    run = make_multi_turn_run(mt_bench, {"d0": ["a", "b"], "d1": ["4", "12"]})
    responses = list(Response.objects.filter(run=run).select_related("run", "item"))
    with django_assert_num_queries(1):
        turns = Turn.objects.by_response(responses)
        answers = [r.turn_answers(turns[(r.run_id, r.item_id, r.epoch)]) for r in responses]
    assert sorted(answers) == [["4", "12"], ["a", "b"]]


def test_a_single_turn_response_is_its_request_and_its_answer(mt_bench):
    run = make_generation_run(mt_bench, {"d1": "4"})
    response = Response.objects.get(run=run)
    assert response.turn_answers() == ["4"]
    # Over a conversation item, the request was the conversation as recorded.
    assert response.transcript() == [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "user", "content": "Times three?"},
        {"role": "assistant", "content": "4"},
    ]
    # Over a plain item, the template's user message (rendered again) is the question.
    plain = make_qa_dataset(mt_bench.task, 2)
    template = PromptTemplate.objects.create(
        task=mt_bench.task, name="qa", system_message="Be brief.", user_message="Q: {{ question }}"
    )
    run = make_generation_run(plain, {"q1": "2"})
    Run.objects.filter(pk=run.pk).update(template=template)
    response = Response.objects.get(run=run)
    assert response.transcript() == [
        {"role": "user", "content": "Q: What is 1 + 1?"},
        {"role": "assistant", "content": "2"},
    ]
    failed = make_generation_run(plain, {"q0": None}, label="b")
    assert Response.objects.get(run=failed).turn_answers() == []
