"""A budget cap per run (#16.5): the engine stops sending before a request could take the run's
cost past its budget; the run ends cancelled with the reason, keeps every finished result, and
resume with a larger budget does exactly the rest.

Prices: test-model at $2 / $8 per million tokens. A request of the qa template is 8 words in
and 7 out at the loopback server (a token per word): $0.000072. Before sending, the engine
reserves the estimate: "Answer briefly." (15 characters: ceil(15/4) + 4 = 8 tokens) and
"Q: What is i + i?" (17–19 characters: 5 + 4 = 9) + 3 for the reply's priming = 20 prompt
tokens, and the reply at its max_tokens of 10: (20 × 2 + 10 × 8) / 1e6 = $0.000120."""

import io

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse

from apps.runs.engine.launch import LaunchError, launch
from apps.runs.models import Response, Run
from tests.base import make_user, work_here

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PER_REQUEST = 72e-6
RESERVED = 120e-6


@pytest.fixture(autouse=True)
def prices(settings, endpoint):
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}
    endpoint.max_tokens = 10
    endpoint.concurrency_limit = 1  # one request at a time: the stopping point is exact
    endpoint.save()


def test_the_budget_stops_the_run_and_resume_finishes_exactly_the_rest(start, llm_server):
    with transaction.atomic():
        run = start(budget_usd="0.001", use_cache=False)
    work_here()
    run.refresh_from_db()
    # Request k+1 goes while k × 72 + 120 ≤ 1000 (micro-dollars): k = 0 … 12, 13 requests.
    assert llm_server.stats()["requests"] == 13
    assert run.status == Run.Status.CANCELLED
    assert (run.done, run.failed, run.remaining) == (13, 0, 17)
    assert run.cost == pytest.approx(13 * PER_REQUEST) and run.cost <= 0.001
    assert (
        run.stop_reason
        == "budget of $0.0010 reached: $0.0009 spent, and the next request could cost more "
        "than the $0.0001 left"
    )
    assert Response.objects.filter(run=run).count() == 13

    page = Client()
    page.force_login(make_user("reviewer", "rev"))
    html = page.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'id="run-stop-reason"' in html and "budget of $0.0010 reached" in html
    assert "17 items left" in html

    # Resuming at the same budget cannot afford one more request: it stops again at once.
    llm_server.reset(stats_only=True)
    launch(run, Run.Mode.RESUME)
    work_here()
    run.refresh_from_db()
    assert llm_server.stats()["requests"] == 0
    assert (run.status, run.done, run.remaining) == (Run.Status.CANCELLED, 13, 17)
    assert run.stop_reason.startswith("budget of $0.0010 reached")
    response = page.post(reverse("runs:resume", args=[run.pk]), {"budget_usd": "0.01"})
    assert response.status_code == 302
    work_here()
    run.refresh_from_db()
    assert llm_server.stats()["requests"] == 17
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 30, 0)
    assert float(run.budget_usd) == 0.01 and run.stop_reason == ""
    assert run.cost == pytest.approx(30 * PER_REQUEST)
    rows = Response.objects.filter(run=run)
    assert rows.count() == 30 and rows.values("item_id").distinct().count() == 30


def test_requests_in_flight_wait_their_turn_and_the_cost_never_passes_the_budget(
    start, endpoint, llm_server
):
    endpoint.concurrency_limit = 4
    endpoint.save()
    llm_server.configure(latency=0.05)
    with transaction.atomic():
        run = start(budget_usd="0.001", use_cache=False)
    work_here()
    run.refresh_from_db()
    # A request that does not fit beside those in flight waits for them; the run stops only
    # once spent + one request would pass the budget: 13 requests, as one at a time.
    assert llm_server.stats()["requests"] == 13
    assert (run.status, run.done) == (Run.Status.CANCELLED, 13)
    assert run.cost == pytest.approx(13 * PER_REQUEST) and run.cost <= 0.001
    assert (
        run.stop_reason
        == "budget of $0.0010 reached: $0.0009 spent, and the next request could cost more "
        "than the $0.0001 left"
    )


def test_the_command_line_sets_and_raises_a_budget(dataset, template, llm_server):
    out = io.StringIO()
    call_command(
        "start_run",
        "generation",
        "--dataset", str(dataset.pk),
        "--endpoint", "local",
        "--template", "qa",
        "--no-cache",
        "--budget", "0.0005",
        stdout=out,
    )  # fmt: skip
    run = Run.objects.get()
    assert float(run.budget_usd) == 0.0005 and not run.use_cache
    work_here()
    run.refresh_from_db()
    # k × 72 + 120 ≤ 500: k = 0 … 5, six requests.
    assert (run.status, run.done, llm_server.stats()["requests"]) == ("cancelled", 6, 6)
    call_command("start_run", "resume", str(run.pk), "--budget", "1", stdout=out)
    work_here()
    run.refresh_from_db()
    assert (run.status, run.done, llm_server.stats()["requests"]) == ("completed", 30, 30)


def test_a_spent_budget_is_refused_before_launching(start, llm_server):
    with transaction.atomic():
        run = start(budget_usd="0.001", use_cache=False)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, cost=0.001)
    run.refresh_from_db()
    with pytest.raises(LaunchError, match=r"spent \$0.0010 of its \$0.0010 budget: raise"):
        launch(run, Run.Mode.RESUME)


def test_a_budget_needs_a_price(start, settings):
    settings.PRICE_TABLE = {}
    with pytest.raises(ValueError, match="A budget needs a price"):
        start(budget_usd="1")
    with pytest.raises(ValueError, match="more than \\$0"):
        start(budget_usd="0")
