"""Real model servers that are not vLLM (#26.5): choice scoring and structured output against
the loopback server's `llama_cpp` mode, which answers as llama-cpp-python's server does (a list
of prompts: 500 with an empty message; every text_offset after the first one character late;
max_tokens 0 read as "no limit"; a json_schema response format refused with a 500 that quotes
its validation error).
bench/bench_llama_cpp.py checks those quirks, and the picks, against the real server built from
PyPI. The offset checks themselves are pinned on hand-made echoes at the end."""

import asyncio

import pytest

from apps.judges.launching import create_judge_run
from apps.judges.models import Score
from apps.runs.engine.chunk import run_chunk
from apps.runs.engine.llm import LLM, Attempt, PromptLogprobs
from apps.runs.kinds.choices import (
    ChoiceRunError,
    ScoringError,
    continuation_logprob,
    create_choice_run,
    offset_shift,
)
from apps.runs.models import AttemptLog, ChoiceSetup, PromptTemplate, Response, Run
from tests.factories import (
    CHOICE_LOGPROBS,
    make_answers_dataset,
    make_choice_dataset,
    make_judge,
    rubric_reply,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def choice_template(task) -> PromptTemplate:
    return PromptTemplate.objects.create(
        task=task, name="mc", user_message="Q: {{ question }}\nAnswer:"
    )


def run_all(run: Run) -> Run:
    run.refresh_from_db()
    run_chunk(run.pk, run.launch, 0)
    run.refresh_from_db()
    return run


def completions(llm_server) -> list[dict]:
    return [e for e in llm_server.stats()["log"] if e.get("api") == "completions"]


def test_a_llama_cpp_server_is_asked_one_option_at_a_time_and_scored_right(
    task, endpoint, choice_template, llm_server
):
    llm_server.configure(llama_cpp=True, word_logprobs=CHOICE_LOGPROBS)
    run = create_choice_run(
        make_choice_dataset(task), endpoint, choice_template, logging_mode="all"
    )
    setup = ChoiceSetup.objects.get(run=run)
    assert (setup.one_prompt_per_request, setup.max_tokens) == (True, 1)
    run = run_all(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 2, 0)

    # The values worked by hand for a server whose offsets are right (tests/factories.py
    # CHOICE_LOGPROBS): the late offsets were corrected, not read as they came (read as they
    # came, " Carbon dioxide" would have lost " dioxide" and gained "\nAnswer:").
    c1 = Response.objects.get(run=run, item__key="c1")
    assert (c1.details["pick"], c1.details["pick_norm"]) == ("A", "B")
    assert [o["logprob"] for o in c1.details["options"]] == [-2.0, -2.5, -3.0]
    assert [o["tokens"] for o in c1.details["options"]] == [1, 2, 1]
    c2 = Response.objects.get(run=run, item__key="c2")
    assert (c2.details["pick"], c2.details["pick_norm"]) == ("A", "A")
    assert [o["logprob"] for o in c2.details["options"]] == [-0.5, -2.5, -4.0]

    # The probe's list got the 500 with nothing in it; then every request held one prompt and
    # asked for one token (max_tokens 0 would have made this server generate 21 of them).
    sent = completions(llm_server)
    refused, *alone = sent
    assert (refused["status"], len(refused["prompt"])) == (500, 3)
    assert len(alone) == 3 + 2 * 3  # the probe's first item, then both items of the run
    assert all(e["status"] == 200 and len(e["prompt"]) == 1 for e in alone)
    assert {e["params"]["max_tokens"] for e in alone} == {1}
    assert c2.completion_tokens == 3 and c2.attempts == 3
    logs = AttemptLog.objects.filter(run=run, item__key="c2")
    assert logs.count() == 3 and all(log.ok for log in logs)

    # The run's page says how the endpoint is asked.
    from django.test import Client

    from tests.base import make_user

    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(run.get_absolute_url()).content.decode()
    assert "each option in a request of its own" in page


def test_offsets_that_do_not_point_at_the_tokens_are_refused_with_the_cause(
    task, endpoint, choice_template, llm_server
):
    dataset = make_choice_dataset(task)
    llm_server.configure(text_offset_shift=3, word_logprobs=CHOICE_LOGPROBS)
    with pytest.raises(ChoiceRunError) as refused:
        create_choice_run(dataset, endpoint, choice_template)
    assert str(refused.value).startswith(
        "Endpoint local cannot score choices by log-likelihood: item c1: Option A: the token "
        "offsets do not point at the tokens' text (token 1 ' Which' is said to start at 5, "
        "where the text reads 'ich ga')."
    )
    assert not Run.objects.exists() and not ChoiceSetup.objects.exists()

    # Offsets that go wrong after the probe fail each item with the cause; none is scored.
    llm_server.configure(text_offset_shift=0)
    run = create_choice_run(dataset, endpoint, choice_template)
    llm_server.configure(text_offset_shift=3)
    run = run_all(run)
    assert (run.done, run.failed) == (0, 2)
    errors = set(Response.objects.filter(run=run).values_list("error", flat=True))
    assert all("the token offsets do not point at the tokens' text" in e for e in errors)


def test_a_list_refused_for_another_reason_is_refused_with_both_causes(
    task, endpoint, choice_template, llm_server
):
    """Where one prompt alone fails too, the endpoint is refused, saying what each answered."""
    llm_server.configure(script=[{"match": "Answer:", "status": 400}])
    with pytest.raises(ChoiceRunError, match=r"a list of 3 prompts was refused \(the request "
                       r"was refused \(400\).*and one prompt alone too: the request was "
                       r"refused \(400\)"):  # fmt: skip
        create_choice_run(make_choice_dataset(task), endpoint, choice_template)
    assert not Run.objects.exists()


def test_a_server_that_generates_when_asked_for_nothing_is_sent_max_tokens_1(
    task, endpoint, choice_template, llm_server
):
    """A server that takes lists but reads max_tokens 0 as "no limit": the probe sees the
    tokens it made, the run asks for 1, and no made token is scored."""
    llm_server.configure(llama_cpp=["max_tokens"], word_logprobs=CHOICE_LOGPROBS)
    run = create_choice_run(make_choice_dataset(task), endpoint, choice_template)
    setup = ChoiceSetup.objects.get(run=run)
    assert (setup.one_prompt_per_request, setup.max_tokens) == (False, 1)
    run = run_all(run)
    probe, *items = completions(llm_server)
    assert probe["params"]["max_tokens"] == 0 and len(probe["reply"][0].split(" ok")) == 22
    assert [len(e["prompt"]) for e in items] == [3, 3]
    assert {e["params"]["max_tokens"] for e in items} == {1}
    c1 = Response.objects.get(run=run, item__key="c1")
    assert [o["logprob"] for o in c1.details["options"]] == [-2.0, -2.5, -3.0]
    assert c1.completion_tokens == 3  # one " ok" per prompt, made and not scored


# ---- structured output --------------------------------------------------------------------------
def test_json_schema_falls_back_to_json_object_where_only_that_is_served(endpoint, llm_server):
    llm_server.configure(llama_cpp=True, default_reply=rubric_reply(4, 5))
    schema = {"type": "object", "properties": {"accuracy": {"type": "number"}}}
    response_format = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}

    async def ask_twice() -> list[Attempt]:
        llm = LLM(endpoint, slots=None, rate=None, stop=asyncio.Event(), connections=1)
        log: list[Attempt] = []
        try:
            for item_id in (1, 2):
                reply = await llm.chat(
                    [{"role": "user", "content": "Score it as JSON."}],
                    log=log,
                    item_id=item_id,
                    response_format=response_format,
                )
                assert reply.text == rubric_reply(4, 5)
        finally:
            await llm.close()
        return log

    log = asyncio.run(ask_twice())
    # The first request's json_schema got the 500 (not retried: its message names the format);
    # it and every later one went as json_object with the same schema, which this server
    # enforces.
    assert [(a.item_id, a.ok) for a in log] == [(1, False), (1, True), (2, True)]
    assert log[0].error.startswith("the server failed (500): 1 validation error:")
    assert "Input should be 'text' or 'json_object'" in log[0].error
    sent = llm_server.stats()["log"]
    assert [e["status"] for e in sent] == [500, 200, 200]
    assert [e["params"]["response_format"] for e in sent[1:]] == [
        {"type": "json_object", "schema": schema}
    ] * 2


def test_a_judge_with_structured_output_scores_on_a_llama_cpp_server(task, endpoint, llm_server):
    llm_server.configure(llama_cpp=True, default_reply=rubric_reply(4, 5))
    endpoint.supports_structured_output = True
    endpoint.concurrency_limit = 1
    endpoint.save()
    dataset = make_answers_dataset(task, 3)
    run = create_judge_run(
        make_judge(task), endpoint=endpoint, dataset=dataset, source_column="response"
    )
    run = run_all(run)
    assert (run.done, run.failed) == (3, 0)
    assert Score.objects.filter(run=run, status=Score.Status.OK).count() == 6
    sent = llm_server.stats()["log"]
    assert [e["status"] for e in sent] == [500, 200, 200, 200]
    assert all(e["params"]["response_format"]["type"] == "json_object" for e in sent[1:])


# ---- the offset checks, on hand-made echoes -----------------------------------------------------
CONTEXT = "Q: Red?\nAnswer:"


def echo_of(tokens: list[str], offsets: list[int], text: str = CONTEXT + " Mars") -> PromptLogprobs:
    return PromptLogprobs(text, tokens, [None] + [-1.0] * (len(tokens) - 1), offsets)


def test_offsets_that_point_right_are_read_as_they_are():
    echoed = echo_of(["Q:", " Red?", "\nAnswer:", " Mars"], [0, 2, 7, 15])
    assert offset_shift(echoed) == 0
    assert continuation_logprob(echoed, CONTEXT + " Mars", CONTEXT) == (-1.0, 1)


def test_llama_cpp_offsets_are_corrected_by_one():
    # llama-cpp-python: the first token shows the space prefix, every later offset is one late.
    echoed = echo_of([" Q", ":", " Red", "?", "\n", "Answer", ":", " Mars"],
                     [0, 2, 3, 7, 8, 9, 15, 16])  # fmt: skip
    assert offset_shift(echoed) == 1
    assert continuation_logprob(echoed, CONTEXT + " Mars", CONTEXT) == (-1.0, 1)


def test_byte_pieces_are_not_looked_for_in_the_text():
    text = CONTEXT + " Mär"
    echoed = echo_of(["Q:", " Red?", "\nAnswer:", " M", "bytes:\\xc3", "bytes:\\xa4", "r"],
                     [0, 2, 7, 15, 17, 17, 18], text)  # fmt: skip
    assert offset_shift(echoed) == 0
    assert continuation_logprob(echoed, text, CONTEXT) == (-4.0, 4)


def test_tokens_that_do_not_spell_the_option_fail_it():
    # Offsets that fit, but the option's last token missing (as llama-cpp-python's offsets,
    # read as they come, drop it).
    echoed = echo_of(["Q:", " Red?", "\nAnswer:", " Ma"], [0, 2, 7, 15])
    with pytest.raises(ScoringError, match="spell ' Ma', not its continuation ' Mars'"):
        continuation_logprob(echoed, CONTEXT + " Mars", CONTEXT)
    # A token across the context's end and the option's start: no sum is the option's alone.
    echoed = echo_of(["Q:", " Red?", "\nAnswer", ": M", "ars"], [0, 2, 7, 14, 17])
    with pytest.raises(ScoringError, match="the token ': M' spans the context's end"):
        continuation_logprob(echoed, CONTEXT + " Mars", CONTEXT)


def test_a_reply_that_does_not_echo_the_prompt_is_not_scored():
    echoed = echo_of(["Q:", " Red?"], [0, 2], "Q: Red?")
    with pytest.raises(ScoringError, match="did not echo the prompt"):
        continuation_logprob(echoed, CONTEXT + " Mars", CONTEXT)
