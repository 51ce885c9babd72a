"""A cost of $0 that only means "the model has no price" is shown as unknown ("—" and how to
set prices), never as free; a real $0.00 (a model priced at zero, a rule-based judge) stays."""

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.datasets.models import Dataset, Item, Task
from apps.runs.models import Endpoint, Response, Run

pytestmark = pytest.mark.django_db

HINT = "set EVALSITE_PRICE_TABLE in .env (see .env.example)"


@pytest.fixture
def prices(settings):
    settings.PRICE_TABLE = {"priced": [2.0, 8.0], "free-local": [0, 0]}


def make_run(model: str, cost: float = 0.0, tokens: int = 1000) -> Run:
    task, _ = Task.objects.get_or_create(slug="qa", defaults={"name": "QA"})
    dataset = Dataset.objects.create(
        task=task, name="d", version=Dataset.objects.count() + 1, status=Dataset.Status.READY
    )
    item = Item.objects.create(dataset=dataset, position=0, key="q0", fields={"q": "?"})
    endpoint, _ = Endpoint.objects.get_or_create(name=f"ep-{model}", defaults={"model": model})
    run = Run.objects.create(
        task=task,
        kind=Run.Kind.GENERATION,
        dataset=dataset,
        endpoint=endpoint,
        label=f"on-{model}",
        status=Run.Status.COMPLETED,
        total=1,
        done=1,
        prompt_tokens=tokens,
        completion_tokens=tokens,
        cost=cost,
    )
    Response.objects.create(
        run=run,
        item=item,
        status="ok",
        text="a",
        prompt_tokens=tokens,
        completion_tokens=tokens,
        cost=cost,
    )
    return run


def cost_cell(client, run: Run) -> str:
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    return page.split('id="run-cost">', 1)[1].split("</dd>", 1)[0]


def test_unknown_price_is_a_dash_with_a_hint_not_free(prices, viewer_client):
    unknown = make_run("nobody-priced-me")
    assert not unknown.cost_known
    cell = cost_cell(viewer_client, unknown)
    assert cell.startswith('<span class="cost-unknown">—</span>')
    assert "“nobody-priced-me” has no price" in cell and HINT in cell and "$0" not in cell


def test_real_costs_and_a_real_zero_are_amounts(prices, viewer_client):
    assert cost_cell(viewer_client, make_run("free-local")) == "$0.00"
    assert cost_cell(viewer_client, make_run("priced", cost=0.01)) == "$0.0100"
    # Tokens counted at $0 before the model got a price: unknown too, not free.
    late = make_run("priced", cost=0.0)
    assert "counted before “priced” had a price" in cost_cell(viewer_client, late)
    # No tokens yet on a priced model: nothing was spent. Unpriced, it is unknown from the start.
    assert cost_cell(viewer_client, make_run("priced", tokens=0)) == "$0.00"
    assert "cost-unknown" in cost_cell(viewer_client, make_run("nobody-priced-me", tokens=0))


def test_runs_list_and_response_page_say_unknown(prices, viewer_client):
    priced = make_run("priced", cost=1.5)
    assert 'id="cost-note"' not in viewer_client.get(reverse("runs:list")).content.decode()
    unknown = make_run("nobody-priced-me")
    page = viewer_client.get(reverse("runs:list")).content.decode()
    assert '<span class="cost-unknown" title="Cost unknown: “nobody-priced-me” has no price' in page
    assert "$1.50" in page
    assert 'id="cost-note"' in page and HINT.replace("set ", "Set prices in ") in page
    item = unknown.dataset.items.get()
    detail = viewer_client.get(reverse("runs:response-detail", args=[unknown.pk, item.pk]))
    assert "cost-unknown" in detail.content.decode() and "$0" not in detail.content.decode()
    item = priced.dataset.items.get()
    detail = viewer_client.get(reverse("runs:response-detail", args=[priced.pk, item.pk]))
    assert "$1.50" in detail.content.decode()


def test_start_run_wait_says_the_cost_is_unknown(prices, redis_conn):
    unknown = make_run("nobody-priced-me")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("start_run", "resume", str(unknown.pk), "--wait", stdout=out)
    assert exited.value.code == 0
    last = out.getvalue().splitlines()[-1]
    assert last.startswith(f"run #{unknown.pk} completed: 1 done, 0 failed of 1")
    assert f"cost unknown (“nobody-priced-me” has no price: {HINT})" in last
    priced = make_run("priced", cost=0.25)
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("start_run", "resume", str(priced.pk), "--wait", stdout=out)
    assert out.getvalue().splitlines()[-1].endswith("· cost $0.2500")


def test_batch_price_is_the_stated_share_of_the_listed_price(prices, settings) -> None:
    endpoint = Endpoint.objects.create(name="ep-batch", model="priced")
    # 1M prompt tokens at $2 + 0.5M completion tokens at $8 = $6; the Batch API bills half.
    assert endpoint.cost(1_000_000, 500_000) == pytest.approx(6.0)
    assert endpoint.cost(1_000_000, 500_000, batch=True) == pytest.approx(3.0)
    settings.BATCH_PRICE_FACTOR = 0.25
    assert endpoint.cost(1_000_000, 500_000, batch=True) == pytest.approx(1.5)
