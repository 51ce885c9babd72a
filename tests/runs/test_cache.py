"""The response cache (#16.4): an identical request already answered is reused instead of sent.

Real Redis, RQ's jobs run in this process (tests.base.work_here: the cache is about what jobs
send, not about worker processes) and the real openai SDK against the loopback LLM server,
whose request counter says what was really sent. Prices: test-model at $2 / $8 per million
tokens; the loopback server counts a token per word."""

import pytest
from django.db import transaction

from apps.judges.launching import create_judge_run
from apps.judges.models import JudgeRound, Score
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import cache_key, chat_body
from apps.runs.models import AttemptLog, CachedReply, Response, Run
from tests.base import work_here
from tests.factories import make_answers_dataset, make_judge, rubric_reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PRICE = (2.0, 8.0)
# A generation request of the qa template: "Answer briefly." + "Q: What is i + i?" = 8 words
# in, "echo: Q: What is i + i?" = 7 words out.
PER_REQUEST = (8 * 2.0 + 7 * 8.0) / 1_000_000


@pytest.fixture(autouse=True)
def prices(settings):
    settings.PRICE_TABLE = {"test-model": list(PRICE)}


def generate(start, **kwargs) -> Run:
    with transaction.atomic():
        run = start(**kwargs)
    work_here()
    run.refresh_from_db()
    return run


def judge_run(judge, endpoint, dataset, **kwargs) -> Run:
    with transaction.atomic():
        run = create_judge_run(
            judge, endpoint=endpoint, dataset=dataset, source_column="response", **kwargs
        )
    work_here()
    run.refresh_from_db()
    return run


def test_a_judge_rerun_is_answered_from_the_cache_and_sends_nothing(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 6)
    judge = make_judge(task, n_iter=2)
    llm_server.configure(default_reply=rubric_reply(4, 3))
    first = judge_run(judge, endpoint, dataset)
    assert first.status == Run.Status.COMPLETED, first.error
    assert llm_server.stats()["requests"] == 12  # 6 items × 2 rounds
    assert (first.cached_count, first.sent_count, first.saved_cost) == (0, 12, 0.0)
    assert CachedReply.objects.count() == 12  # two rounds of one item are two samples
    log = llm_server.stats()["log"]
    paid = sum(
        sum(len(m["content"].split()) for m in entry["messages"]) * PRICE[0]
        + len(rubric_reply(4, 3).split()) * PRICE[1]
        for entry in log
    )
    assert first.cost == pytest.approx(paid / 1_000_000)

    llm_server.reset(stats_only=True)
    again = judge_run(judge, endpoint, dataset, logging_mode="all")
    assert again.status == Run.Status.COMPLETED, again.error
    assert llm_server.stats()["requests"] == 0
    assert (again.done, again.failed, again.total) == (6, 0, 6)
    assert Score.objects.filter(run=again, subject="accuracy").count() == 6
    assert JudgeRound.objects.filter(run=again).count() == 12
    assert set(Score.objects.filter(run=again).values_list("judge_value", flat=True)) == {4, 3}
    assert (again.cached_count, again.sent_count) == (12, 0)
    assert again.saved_cost == pytest.approx(first.cost)
    assert (again.cost, again.prompt_tokens, again.completion_tokens) == (0.0, 0, 0)
    assert again.cache_text == f"cached 12 / sent 0, saved ${first.cost:.4f}"
    logs = AttemptLog.objects.filter(run=again)
    assert logs.count() == 12 and all(log.cached and log.cost == 0 for log in logs)


def test_generation_saved_cost_is_what_the_first_run_paid(start, endpoint, llm_server):
    endpoint.temperature = 0  # sent explicitly: deterministic, so the cache is on
    endpoint.save()
    first = generate(start)
    assert first.use_cache and first.status == Run.Status.COMPLETED
    assert first.cost == pytest.approx(30 * PER_REQUEST)
    llm_server.reset(stats_only=True)
    again = generate(start)
    assert llm_server.stats()["requests"] == 0
    assert Response.objects.filter(run=again).count() == 30
    assert (again.cached_count, again.sent_count) == (30, 0)
    assert again.saved_cost == pytest.approx(30 * 72 / 1_000_000)
    texts = dict(Response.objects.filter(run=first).values_list("item_id", "text"))
    for item_id, text, attempts, cost in Response.objects.filter(run=again).values_list(
        "item_id", "text", "attempts", "cost"
    ):
        assert (text, attempts, cost) == (texts[item_id], 0, 0.0)


def test_sampling_generation_does_not_reuse_unless_asked(start, endpoint, llm_server):
    endpoint.temperature = 0.7
    endpoint.save()
    first = generate(start)
    assert not first.use_cache
    llm_server.reset(stats_only=True)
    default = generate(start)
    assert not default.use_cache
    assert llm_server.stats()["requests"] == 30
    assert (default.cached_count, default.sent_count) == (0, 30)
    llm_server.reset(stats_only=True)
    chosen = generate(start, use_cache=True)
    assert llm_server.stats()["requests"] == 0
    assert (chosen.cached_count, chosen.sent_count) == (30, 0)


def test_a_run_that_says_no_sends_everything_again(start, llm_server):
    generate(start)
    llm_server.reset(stats_only=True)
    run = generate(start, use_cache=False)
    assert llm_server.stats()["requests"] == 30
    assert (run.cached_count, run.sent_count, run.saved_cost) == (0, 30, 0.0)


def test_changing_a_parameter_a_message_or_the_epoch_misses(start, endpoint, template, llm_server):
    endpoint.temperature = 0  # deterministic as sent: the cache is on by default
    endpoint.save()
    generate(start)
    # A parameter: max_tokens changes the request.
    endpoint.max_tokens = 50
    endpoint.save()
    llm_server.reset(stats_only=True)
    run = generate(start)
    assert llm_server.stats()["requests"] == 30 and run.cached_count == 0
    # A message: a new template version asks something else.
    template.pk = None
    template.version = 2
    template.user_message = "Question: {{ question }}"
    template.save()
    llm_server.reset(stats_only=True)
    run = generate(start, template=template)
    assert llm_server.stats()["requests"] == 30 and run.cached_count == 0
    # The epoch: the second sample of an item is not the first one again.
    llm_server.reset(stats_only=True)
    run = generate(start, template=template, epochs=2)
    assert llm_server.stats()["requests"] == 30  # epoch 0 cached, epoch 1 sent
    assert (run.cached_count, run.sent_count, run.done) == (30, 30, 60)


def test_the_key_names_the_provider_the_sample_and_never_the_key(endpoint) -> None:
    messages = [{"role": "user", "content": "hi"}]
    body = chat_body(endpoint, messages)
    key = cache_key(endpoint, body, epoch=0)
    assert key == cache_key(endpoint, chat_body(endpoint, messages), epoch=0)
    assert key != cache_key(endpoint, body, epoch=1)
    assert key != cache_key(endpoint, body, epoch=0, round=1)
    endpoint.api_key_secret = "sk-another-key-entirely"
    assert cache_key(endpoint, body, epoch=0) == key  # who pays does not change the answer
    endpoint.base_url = "http://other-provider.example/v1"
    assert cache_key(endpoint, body, epoch=0) != key


def test_failures_are_never_cached(start, task, endpoint, llm_server):
    llm_server.configure(error_rate={"500": 1.0})
    endpoint.max_retries = 0
    endpoint.save()
    failed = generate(start)
    assert failed.failed == 30 and CachedReply.objects.count() == 0
    assert (failed.cached_count, failed.sent_count) == (0, 30)
    # An answer a judge cannot score is the judge's failure: asked again next time.
    llm_server.configure(error_rate={}, default_reply="no scores here")
    dataset = make_answers_dataset(task, 3)
    judge = make_judge(task)
    bad = judge_run(judge, endpoint, dataset)
    assert bad.failed == 3 and CachedReply.objects.count() == 0
    llm_server.configure(default_reply=rubric_reply(5, 5))
    llm_server.reset(stats_only=True)
    with transaction.atomic():
        launch(bad, Run.Mode.RETRY_FAILED)
    work_here()
    bad.refresh_from_db()
    assert llm_server.stats()["requests"] == 3 and bad.done == 3


def test_overwrite_asks_again_and_replaces_the_stored_reply(start, llm_server):
    run = generate(start)
    llm_server.configure(default_reply="second: {last_user}")
    llm_server.reset(stats_only=True)
    with transaction.atomic():
        launch(run, Run.Mode.OVERWRITE)
    work_here()
    assert llm_server.stats()["requests"] == 30
    assert CachedReply.objects.count() == 30
    assert all(
        text.startswith("second:") for text in CachedReply.objects.values_list("content", flat=True)
    )


@pytest.mark.parametrize(
    ("temperature", "seed", "extra", "cached"),
    [
        (None, None, {}, False),  # unset: the provider samples at its default
        (0, None, {}, True),
        (0.7, None, {}, False),
        (None, 7, {}, True),
        (None, None, {"temperature": 0}, True),  # sent through extra parameters
        (0, None, {"temperature": 1.0}, False),  # extra parameters win, as sent
    ],
)
def test_generation_caches_by_what_is_sent(endpoint, temperature, seed, extra, cached) -> None:
    """A rerun returned cached copies while the request omitted temperature (#29.11)."""
    endpoint.temperature, endpoint.seed, endpoint.extra_params = temperature, seed, extra
    assert Run.default_use_cache(Run.Kind.GENERATION, endpoint) is cached
    assert Run.default_use_cache(Run.Kind.JUDGE, endpoint) is True
