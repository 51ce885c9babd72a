"""The start form's cost estimate (#16.5), pinned by hand.

The qa template sends "Answer briefly." (15 characters: ceil(15 / 4) + 4 = 8 tokens) and
"Q: What is i + i?" (17 characters for one digit: 5 + 4 = 9), + 3 for the reply's priming: 20
prompt tokens a request. With no max_tokens a reply counts 256 tokens. test-model costs $2 / $8
per million tokens."""

import pytest
from django.db import transaction
from django.urls import reverse

from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, JudgeRun
from apps.runs.engine.llm import cache_key, chat_body, estimate_prompt_tokens
from apps.runs.estimate import estimate, evenly_spaced
from apps.runs.models import CachedReply, Run
from tests.base import work_here
from tests.factories import make_answers_dataset, make_judge, make_qa_dataset, rubric_reply


@pytest.fixture(autouse=True)
def prices(settings):
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}


def unsaved(dataset, endpoint, template, **fields) -> Run:
    return Run(
        task=dataset.task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        endpoint=endpoint,
        template=template,
        **fields,
    )


def test_prompt_tokens_are_characters_over_four_plus_four_a_message_plus_three() -> None:
    assert estimate_prompt_tokens([]) == 3
    assert estimate_prompt_tokens([{"role": "user", "content": ""}]) == 7
    assert estimate_prompt_tokens([{"role": "user", "content": "abcd"}]) == 8
    assert estimate_prompt_tokens([{"role": "user", "content": "abcde"}]) == 9
    two = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "x" * 17}]
    assert estimate_prompt_tokens(two) == 8 + 9 + 3


@pytest.mark.django_db
def test_three_items_priced_by_hand_with_batch_and_cache(task, endpoint, template) -> None:
    dataset = make_qa_dataset(task, 3, name="three")
    found = estimate(unsaved(dataset, endpoint, template))
    assert (found.units, found.sampled, found.requests) == (3, 3, 3)
    assert (found.prompt_tokens, found.completion_tokens) == (60, 768)
    # (60 × 2 + 768 × 8) / 1e6
    assert found.price() == pytest.approx(0.006264)
    assert found.price(batch=True) == pytest.approx(0.003132)
    assert found.cached_requests == 0 and found.price(cached=True) == pytest.approx(0.006264)

    # Item 0's request already answered: it costs nothing "with cache".
    first = dataset.items.get(position=0)
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": first.fields["question"].join(["Q: ", ""])},
    ]
    key = cache_key(endpoint, chat_body(endpoint, messages), epoch=0)
    CachedReply.objects.create(key=key, model="test-model", content="0")
    found = estimate(unsaved(dataset, endpoint, template))
    assert found.cached_requests == 1
    assert (found.uncached_prompt_tokens, found.uncached_completion_tokens) == (40, 512)
    assert found.price(cached=True) == pytest.approx((40 * 2 + 512 * 8) / 1e6)  # 0.004176
    assert found.price(batch=True, cached=True) == pytest.approx(0.002088)
    assert [row["requests"] for row in found.rows] == [3, 3, 2, 2]


@pytest.mark.django_db
def test_max_tokens_epochs_and_an_unknown_price(task, endpoint, template, settings) -> None:
    dataset = make_qa_dataset(task, 3, name="three")
    endpoint.max_tokens = 10
    found = estimate(unsaved(dataset, endpoint, template, epochs=2))
    assert (found.units, found.requests) == (6, 6)
    assert (found.prompt_tokens, found.completion_tokens) == (120, 60)
    assert not found.default_completion
    settings.PRICE_TABLE = {}
    found = estimate(unsaved(dataset, endpoint, template))
    assert not found.price_known and found.price() is None and found.prompt_tokens == 60


@pytest.mark.django_db
def test_a_big_dataset_is_sampled_evenly_and_scaled(task, endpoint, template) -> None:
    assert evenly_spaced(list(range(10)), 4) == [0, 2, 5, 7]
    assert evenly_spaced([1, 2], 4) == [1, 2]
    dataset = make_qa_dataset(task, 10, name="ten")
    found = estimate(unsaved(dataset, endpoint, template), sample=4)
    assert (found.units, found.sampled, found.scaled) == (10, 4, True)
    assert (found.requests, found.prompt_tokens, found.completion_tokens) == (10, 200, 2560)


@pytest.mark.django_db
def test_the_form_shows_the_estimate_and_updates_it(task, endpoint, template, reviewer_client):
    dataset = make_qa_dataset(task, 3, name="three")
    page = reviewer_client.get(reverse("runs:generation-new") + f"?dataset={dataset.pk}")
    html = page.content.decode()
    assert 'id="cost-estimate"' in html and "$0.0063" in html and "$0.0031" in html
    data = {
        "task": task.slug,
        "dataset": dataset.pk,
        "endpoint": endpoint.pk,
        "template": template.pk,
        "epochs": 2,
        "logging_mode": "failed",
        "chunk_size": 200,
    }
    start = reverse("runs:generation-start")
    part = reviewer_client.post(start, data, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="cost-estimate")
    text = part.content.decode()
    assert text.lstrip().startswith("<section") and "<html" not in text
    assert "$0.0125" in text  # two epochs: 2 × 0.006264
    # Without JavaScript the "Estimate cost" button shows the whole form with it; no run starts.
    full = reviewer_client.post(start, {**data, "estimate": "1"}).content.decode()
    assert 'id="generation-form"' in full and "$0.0125" in full
    assert not Run.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_after_a_run_the_estimate_finds_every_request_in_the_cache(
    start, dataset, endpoint, template, llm_server
):
    with transaction.atomic():
        start()
    work_here()
    found = estimate(unsaved(dataset, endpoint, template, use_cache=True))
    assert (found.requests, found.cached_requests) == (30, 30)
    assert found.price(cached=True) == 0
    # A judge's requests too: the estimate computes the keys the engine stores.
    answers = make_answers_dataset(dataset.task, 4)
    judge = make_judge(dataset.task, n_iter=2)
    llm_server.configure(default_reply=rubric_reply(4, 4))
    with transaction.atomic():
        create_judge_run(judge, endpoint=endpoint, dataset=answers, source_column="response")
    work_here()
    judged = Run(
        task=answers.task,
        kind=Run.Kind.JUDGE,
        dataset=answers,
        endpoint=endpoint,
        source_column="response",
    )
    judged.judged_with = JudgeRun(run=judged, judge=judge)
    found = estimate(judged)
    assert (found.units, found.requests, found.cached_requests) == (4, 8, 4 * 2)
    assert Judge.objects.count() == 1


@pytest.mark.django_db
def test_a_multi_turn_run_counts_each_turns_growing_context(task, endpoint) -> None:
    """One item of two turns, "abcd" then "efgh", max_tokens 10. Turn 1 sends the first:
    ceil(4 / 4) + 4 + 3 = 8 tokens. Turn 2 sends it, the answer to it and the second; the answer
    is not known before the run, so it counts as long as a reply is counted (10 tokens):
    (1 + 4) + (10 + 4) + (1 + 4) + 3 = 27. Where turn 1 is cached, its reply "ijklmnop" (2
    tokens) is what turn 2 will hold: (1 + 4) + (2 + 4) + (1 + 4) + 3 = 19, a request known
    exactly, so its own cache entry counts too."""
    from apps.runs.models import PromptTemplate
    from tests.factories import make_conversation_dataset

    endpoint.max_tokens = 10
    endpoint.save()
    dataset = make_conversation_dataset(task, [["abcd", "efgh"]])
    template = PromptTemplate.objects.create(
        task=task, name="chat", messages=[{"role": "conversation"}]
    )
    run = unsaved(dataset, endpoint, template, multi_turn=True)
    found = estimate(run)
    assert (found.requests, found.prompt_tokens, found.completion_tokens) == (2, 8 + 27, 20)

    first = [{"role": "user", "content": "abcd"}]
    second = [
        *first,
        {"role": "assistant", "content": "ijklmnop"},
        {"role": "user", "content": "efgh"},
    ]
    for messages, reply in ((first, "ijklmnop"), (second, "done")):
        key = cache_key(endpoint, chat_body(endpoint, messages), epoch=0)
        CachedReply.objects.create(key=key, model="test-model", content=reply)
        found = estimate(run)
        assert (found.prompt_tokens, found.completion_tokens) == (8 + 19, 20)
    assert found.cached_requests == 2 and found.price(cached=True) == 0
