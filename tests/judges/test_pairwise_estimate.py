"""The pairwise start form's cost estimate (#16.5), pinned by hand.

The judge sends "Pick one." (9 characters: ceil(9 / 4) + 4 = 7 tokens) and "aaaa or bbbb"
(12 characters: 3 + 4 = 7), + 3 for the reply's priming: 17 prompt tokens a request, and the
endpoint's max_tokens 10 for the reply. Each pair of an item is asked in both orders. The
model costs $2 / $8 per million tokens."""

import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import Judge, PairwiseSetup
from apps.judges.pairwise import estimate_pairwise_run
from apps.runs.models import Endpoint, Run
from tests.base import make_user
from tests.factories import make_dataset, make_judge, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(settings):
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}
    task = make_task("duel")
    rows = [
        {"key": f"q{i}", "fields": {"q": f"q{i}", "x": "aaaa", "y": "bbbb", "z": "cccc"}}
        for i in range(3)
    ]
    mapping = {"input_columns": ["q"], "response_columns": ["x", "y", "z"]}
    dataset = make_dataset(task, rows, name="answers", mapping=mapping)
    judge = make_judge(
        task,
        Judge.Kind.PAIRWISE,
        name="which",
        subjects=[],
        system_prompt="Pick one.",
        user_prompt="{{ response_a }} or {{ response_b }}",
    )
    endpoint = Endpoint.objects.create(name="local", model="test-model", max_tokens=10)
    sets = [f"column:{dataset.pk}:{column}" for column in "xyz"]
    return judge, endpoint, sets


def test_every_pair_in_both_orders_priced_by_hand(setup) -> None:
    judge, endpoint, sets = setup
    found = estimate_pairwise_run(judge, sets, endpoint=endpoint)
    # 3 items × 3 pairs × 2 orders.
    assert (found.units, found.requests) == (9, 18)
    assert (found.prompt_tokens, found.completion_tokens) == (18 * 17, 18 * 10)
    assert found.price() == pytest.approx((306 * 2 + 180 * 8) / 1e6)  # 0.002052
    assert found.price(batch=True) == pytest.approx(0.001026)
    # Against a baseline: two pairs.
    against = estimate_pairwise_run(judge, sets, sets[0], endpoint=endpoint)
    assert (against.units, against.requests, against.prompt_tokens) == (6, 12, 12 * 17)
    # Nothing is made: neither the run nor the response columns read for it.
    assert not Run.objects.exists() and not PairwiseSetup.objects.exists()


def test_the_pairwise_form_shows_the_estimate_and_starts_nothing(setup) -> None:
    judge, endpoint, sets = setup
    client = Client()
    client.force_login(make_user("reviewer"))
    start = reverse("judges:start", args=[judge.pk])
    data = {"responses": sets, "endpoint": endpoint.pk, "logging_mode": "failed"}
    part = client.post(start, data, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="cost-estimate")
    text = part.content.decode()
    assert text.lstrip().startswith("<section") and "<html" not in text
    assert "$0.0021" in text and "$0.0010" in text
    full = client.post(start, {**data, "estimate": "1"}).content.decode()
    assert 'id="judge-run-form"' in full and "$0.0021" in full
    assert not Run.objects.exists()
    started = client.post(start, data)
    assert started.status_code == 302
    assert Run.objects.filter(kind=Run.Kind.PAIRWISE).get().total == 9
