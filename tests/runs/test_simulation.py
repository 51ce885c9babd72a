"""Simulated-user conversations (#27.5): another endpoint plays the user with its own prompt
and goal, converses with the model up to K turns or until it says it is done; the transcript is
the response and judges score it. RQ jobs run in this process (tests.base.work_here), real
Redis and the loopback LLM server (the simulator is the same server under another model name,
so scripted replies tell them apart)."""

import itertools

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from apps.judges.launching import create_judge_run
from apps.judges.models import Score
from apps.runs.engine.chunk import run_chunk
from apps.runs.kinds.simulation import OPEN, create_simulation_run
from apps.runs.models import Endpoint, Response, Run, Turn
from tests.base import work_here
from tests.factories import make_dataset, make_judge, make_task

pytestmark = pytest.mark.django_db(transaction=True)

GOALS = [
    {"key": "refund", "fields": {"persona": "an angry customer", "goal": "a refund for order 17"}},
    {"key": "hours", "fields": {"persona": "a tourist", "goal": "the museum's opening hours"}},
]


@pytest.fixture
def goals(db):
    return make_dataset(make_task("support"), GOALS, name="goals", columns=["persona", "goal"])


@pytest.fixture
def simulator(endpoint) -> Endpoint:
    return Endpoint.objects.create(
        name="user-sim",
        base_url=endpoint.base_url,
        model="sim-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-simulator",
    )


INSTRUCTIONS = (
    "You are {{ persona }}. You want {{ goal }}. Talk to the assistant; say [DONE] once you "
    "have it."
)


def start(dataset, endpoint, simulator, **kwargs) -> Run:
    with transaction.atomic():
        return create_simulation_run(
            dataset, endpoint, simulator, instructions=INSTRUCTIONS, **kwargs
        )


def by_model(llm_server, model: str) -> list[list[dict]]:
    return [e["messages"] for e in llm_server.stats()["log"] if e["model"] == model]


def test_a_four_turn_simulated_conversation_runs_and_is_judged(
    goals, endpoint, simulator, llm_server
):
    llm_server.configure(
        default_reply="Model says: {last_user}",
        script=[
            # The refund customer never gets what it wants: it talks for all four turns.
            {"model": "sim-model", "regex": "refund", "scope": "any", "reply": "User line {n}"},
            # The tourist has its answer after two turns and says so.
            {
                "model": "sim-model",
                "match": "Model says: Tourist asks again",
                "reply": "Thanks! [DONE]",
            },
            {
                "model": "sim-model",
                "match": "Model says: Tourist asks",
                "reply": "Tourist asks again",
            },
            {"model": "sim-model", "reply": "Tourist asks"},
            # The judge: a rubric reply per dialogue.
            {
                "model": "judge-model",
                "match": "User line",
                "scope": "any",
                "reply": '{"accuracy": 2, "clarity": 4, "reason": "no refund"}',
            },
            {"model": "judge-model", "reply": '{"accuracy": 5, "clarity": 5, "reason": "fine"}'},
        ],
    )
    run = start(goals, endpoint, simulator, system_message="You help {{ persona }}s.")
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 2, 0)
    refund = Response.objects.get(run=run, item__key="refund")
    turns = refund.turns()
    assert [t.number for t in turns] == [1, 2, 3, 4]  # K = 4, and no [DONE]
    assert refund.details["simulation"] == {
        "turns": 4,
        "ended_by": "max_turns",
        "closing": "",
        "max_turns": 4,
    }
    for turn in turns:
        assert turn.asked.startswith("User line ") and turn.text == f"Model says: {turn.asked}"
    # The simulator was told who it is and saw the conversation from its side.
    sims = [m for m in by_model(llm_server, "sim-model") if "refund" in m[0]["content"]]
    assert len(sims) == 4
    assert sims[0] == [
        {
            "role": "system",
            "content": INSTRUCTIONS.replace("{{ persona }}", "an angry customer").replace(
                "{{ goal }}", "a refund for order 17"
            ),
        },
        {"role": "user", "content": OPEN},
    ]
    assert sims[1][2:] == [
        {"role": "assistant", "content": turns[0].asked},
        {"role": "user", "content": turns[0].text},
    ]
    # The model saw its own system message and the simulator's lines as the user's.
    last = next(m for m in by_model(llm_server, "test-model") if m[-1]["content"] == turns[3].asked)
    assert last[0] == {"role": "system", "content": "You help an angry customers."}
    assert (
        last[1:]
        == [
            m
            for t in turns
            for m in (
                {"role": "user", "content": t.asked},
                {"role": "assistant", "content": t.text},
            )
        ][:-1]
    )
    # The whole transcript is the response; tokens are the model's turns'.
    assert refund.text.startswith(f"User: {turns[0].asked}\n\nAssistant: {turns[0].text}")
    assert refund.text.endswith(f"Assistant: {turns[3].text}")
    assert len(refund.transcript()) == 8
    assert refund.prompt_tokens == sum(t.prompt_tokens for t in turns) > 0

    hours = Response.objects.get(run=run, item__key="hours")
    assert [t.asked for t in hours.turns()] == ["Tourist asks", "Tourist asks again"]
    assert hours.details["simulation"]["ended_by"] == "simulator"
    assert hours.details["simulation"]["closing"] == "Thanks! [DONE]"
    assert "[DONE]" not in hours.text

    # Judged: a rubric judge reads each whole dialogue.
    judge_endpoint = Endpoint.objects.create(
        name="judge", base_url=endpoint.base_url, model="judge-model", api_key_secret="sk-j-1234"
    )
    judge = make_judge(
        goals.task, name="helpful", user_prompt="Rate this dialogue:\n{{ response }}"
    )
    with transaction.atomic():
        judged = create_judge_run(judge, endpoint=judge_endpoint, source_run=run)
    work_here()
    judged.refresh_from_db()
    assert (judged.status, judged.done) == (Run.Status.COMPLETED, 2)
    values = {(s.item.key, s.subject): s.judge_value for s in Score.objects.filter(run=judged)}
    assert values == {
        ("refund", "accuracy"): 2,
        ("refund", "clarity"): 4,
        ("hours", "accuracy"): 5,
        ("hours", "clarity"): 5,
    }
    asked = by_model(llm_server, "judge-model")
    assert any(refund.text in m[-1]["content"] for m in asked)


def test_a_failed_simulator_fails_the_item_naming_the_turn(goals, endpoint, simulator, llm_server):
    llm_server.configure(
        default_reply="ok",
        script=[
            {"model": "sim-model", "match": "ok", "status": 400},
            {"model": "sim-model", "reply": "Hello"},
        ],
    )
    run = start(goals, endpoint, simulator, max_turns=3)
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (0, 2)
    response = Response.objects.get(run=run, item__key="refund")
    assert response.status == Response.Status.FAILED
    assert response.error.startswith("Turn 2 (the simulated user): the request was refused (400)")
    assert [t.asked for t in response.turns()] == ["Hello"]  # turn 1 kept, nothing after
    assert Turn.objects.filter(run=run).count() == 2


def test_bad_setups_are_refused_before_anything_runs(goals, endpoint, simulator, admin_client):
    with pytest.raises(ValueError, match="Max turns must be between 1 and 50"):
        start(goals, endpoint, simulator, max_turns=0)
    with pytest.raises(ValueError, match="has no column 'first'"):
        start(goals, endpoint, simulator, opening_column="first")
    with pytest.raises(ValueError, match="the simulator's instructions"), transaction.atomic():
        create_simulation_run(goals, endpoint, simulator, instructions="{% if %}")
    assert not Run.objects.filter(kind=Run.Kind.SIMULATION).exists()
    call_command(
        "start_run",
        "simulation",
        "--dataset",
        str(goals.pk),
        "--endpoint",
        endpoint.name,
        "--simulator",
        simulator.name,
        "--instructions",
        INSTRUCTIONS,
        "--max-turns",
        "4",
    )
    run = Run.objects.get(kind=Run.Kind.SIMULATION)
    assert run.simulator_setup.max_turns == 4 and run.total == 2
    page = admin_client.get(run.get_absolute_url()).content.decode()
    assert "A simulated user, endpoint user-sim (sim-model)" in page
    assert "up to 4 turns or until it says “[DONE]”" in page
    assert f"responses=run:{run.pk}" in page
    with pytest.raises(CommandError, match="No endpoint named 'nobody'"):
        call_command(
            "start_run",
            "simulation",
            "--dataset",
            str(goals.pk),
            "--endpoint",
            endpoint.name,
            "--simulator",
            "nobody",
            "--instructions",
            INSTRUCTIONS,
        )


# ---- the simulator's requests are the engine's like any other ----------------------------------
def run_here(run: Run) -> None:
    """The run's launch in this process (its one chunk takes the whole list), to its end."""
    run.refresh_from_db()
    run_chunk(run.pk, run.launch, 0)
    run.refresh_from_db()


def test_the_simulators_replies_are_cached_like_the_models(goals, endpoint, simulator, llm_server):
    llm_server.configure(
        default_reply="Answer {n}.",
        script=[{"model": "sim-model", "reply": "Question {n}?"}],
    )
    first = start(goals, endpoint, simulator, max_turns=2, use_cache=True)
    run_here(first)
    assert (first.status, first.done) == (Run.Status.COMPLETED, 2)
    assert len(by_model(llm_server, "sim-model")) == len(by_model(llm_server, "test-model")) == 4
    llm_server.reset(stats_only=True)
    again = start(goals, endpoint, simulator, max_turns=2, use_cache=True)
    run_here(again)
    assert (again.status, again.done) == (Run.Status.COMPLETED, 2)
    assert llm_server.stats()["requests"] == 0  # both sides answered from the cache
    assert again.cached_count == 8 and again.cost == 0
    for key in ("refund", "hours"):
        was, now = (Response.objects.get(run=r, item__key=key) for r in (first, again))
        assert now.text == was.text and "Question" in now.text


def test_the_simulator_keeps_to_its_endpoints_concurrency_limit(
    goals, endpoint, simulator, llm_server
):
    """Two conversations at once, the simulator's endpoint allowing one request at a time: its
    requests never overlap at the server (each holds the slot from before it is sent until
    its answer is read), while the model's endpoint allows four."""
    simulator.concurrency_limit = 1
    simulator.save()
    llm_server.configure(
        default_reply="ok",
        script=[{"model": "sim-model", "reply": "Hello {n}", "latency": 0.2}],
    )
    run = start(goals, endpoint, simulator, max_turns=2)
    run_here(run)
    assert (run.status, run.done) == (Run.Status.COMPLETED, 2)
    spans = sorted(
        (e["time"], e["end"]) for e in llm_server.stats()["log"] if e["model"] == "sim-model"
    )
    assert len(spans) == 4
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))


def test_the_simulators_price_counts_against_the_runs_budget(
    goals, endpoint, simulator, llm_server, settings
):
    """The simulated user opens each conversation; its first request could cost more than the
    budget (its price is high), so the run stops before anything is sent."""
    settings.PRICE_TABLE = {"test-model": [0.1, 0.1], "sim-model": [500.0, 500.0]}
    with pytest.raises(ValueError, match="A budget needs a price for the simulated user too"):
        start(goals, endpoint, Endpoint.objects.create(name="free", model="x"), budget_usd=1)
    run = start(goals, endpoint, simulator, max_turns=2, budget_usd="0.05")
    run_here(run)
    assert run.status == Run.Status.CANCELLED
    assert "budget of $0.0500 reached: $0.00 spent" in run.error
    assert llm_server.stats()["requests"] == 0
    assert not Response.objects.filter(run=run).exists()


def test_the_estimate_counts_the_simulators_requests_at_its_price(
    goals, endpoint, simulator, settings
):
    """Two turns, no opening column: per item the simulator opens and answers once, the model
    answers twice; each side's tokens at its own endpoint's price (replies at the 256-token
    allowance, the model's answers in later contexts as long)."""
    from apps.runs.engine.llm import estimate_prompt_tokens
    from apps.runs.estimate import estimate

    settings.PRICE_TABLE = {"test-model": [1.0, 2.0], "sim-model": [10.0, 20.0]}
    run = start(goals, endpoint, simulator, max_turns=2)
    answer = "x" * 1024  # 256 tokens, as a reply is counted
    model_in = sim_in = 0
    for goal in GOALS:
        persona, wants = goal["fields"]["persona"], goal["fields"]["goal"]
        instructions = (
            f"You are {persona}. You want {wants}. Talk to the assistant; say [DONE] once you "
            "have it."
        )
        opening = [{"role": "system", "content": instructions}, {"role": "user", "content": OPEN}]
        sim_in += estimate_prompt_tokens(opening)
        sim_in += estimate_prompt_tokens(
            [*opening, {"role": "assistant", "content": OPEN}, {"role": "user", "content": answer}]
        )
        model_in += estimate_prompt_tokens([{"role": "user", "content": OPEN}])
        model_in += estimate_prompt_tokens(
            [
                {"role": "user", "content": OPEN},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": OPEN},
            ]
        )
    found = estimate(run)
    assert (found.requests, found.prompt_tokens, found.completion_tokens) == (
        8,
        model_in + sim_in,
        8 * 256,
    )
    [share] = found.others
    assert (share.endpoint, share.requests) == (simulator, 4)
    assert (share.prompt_tokens, share.completion_tokens) == (sim_in, 4 * 256)
    expected = (model_in * 1.0 + 4 * 256 * 2.0 + sim_in * 10.0 + 4 * 256 * 20.0) / 1e6
    assert found.price() == pytest.approx(expected)
    assert found.price(batch=True) == pytest.approx(expected * settings.BATCH_PRICE_FACTOR)

    # A simulator without a price leaves the whole price unknown, and says why.
    settings.PRICE_TABLE = {"test-model": [1.0, 2.0]}
    unpriced = estimate(run)
    assert unpriced.price() is None and unpriced.unpriced == simulator
