"""Cost beside score (#32.4): each model's generation and judge cost in tokens and dollars,
batch and cache savings, cost per item, latency p50/p95, the score-vs-cost chart with its
Pareto front, and the same numbers in the CSV, the JSONL and the API. Numbers by hand."""

import csv
import io
import json
import re

import pytest
from django.urls import reverse

from apps.accounts.models import ApiToken
from apps.leaderboards import boards, costs, exports
from apps.leaderboards.boards import Params
from apps.runs.models import Endpoint, Response, Run
from tests import factories as f


@pytest.fixture
def priced(board_data, settings):
    """model-a: priced, its generation sent as a batch and partly cached, latencies by hand;
    model-b: a model without a price (its dollars unknown, never $0)."""
    settings.PRICE_TABLE = {"priced-model": [1.0, 2.0], "judge-model": [0.5, 0.5]}
    settings.BATCH_PRICE_FACTOR = 0.5
    priced = Endpoint.objects.create(name="priced", model="priced-model")
    unpriced = Endpoint.objects.create(name="unpriced", model="mystery-model")
    judge = Endpoint.objects.create(name="judge", model="judge-model")
    d = board_data
    Run.objects.filter(pk=d["gen_a"].pk).update(
        endpoint=priced,
        batch=True,
        prompt_tokens=1000,
        completion_tokens=500,
        cost=0.001,  # (1000 × $1 + 500 × $2) / 1M at the batch price, half
        cached_count=1,
        sent_count=5,
        saved_cost=0.0004,
    )
    Run.objects.filter(pk=d["gen_b"].pk).update(
        endpoint=unpriced, prompt_tokens=800, completion_tokens=400
    )
    for run in (d["run_a"], d["run_b"]):
        Run.objects.filter(pk=run.pk).update(
            endpoint=judge, prompt_tokens=2000, completion_tokens=200, cost=0.0011
        )
    # k5 came from the cache (no latency of its own); k3's answer failed and does not count.
    for key, ms in {"k0": 100, "k1": 200, "k2": 300, "k3": 900, "k4": 400, "k5": 0}.items():
        Response.objects.filter(run=d["gen_a"], item__key=key).update(latency_ms=ms)
    Response.objects.filter(run=d["gen_a"], item__key="k3").update(status="failed")
    return d


def row_cost(board, run):
    return board.costs[run.pk]


def test_generation_and_judge_cost_by_hand(priced):
    board = boards.build(priced["task"], Params())
    a = row_cost(board, priced["run_a"])
    assert (a.generation.prompt_tokens, a.generation.completion_tokens) == (1000, 500)
    assert a.generation.dollars == pytest.approx(0.001)
    # Batch mode billed half: the same tokens one by one would have cost $0.002.
    assert a.generation.batch_saved == pytest.approx(0.001)
    assert a.generation.cache_saved == pytest.approx(0.0004)
    assert (a.judge.prompt_tokens, a.judge.completion_tokens) == (2000, 200)
    assert a.judge.dollars == pytest.approx(0.0011) and a.judge.batch_saved == 0
    assert a.dollars == pytest.approx(0.0021) and a.tokens == 3700
    assert a.saved("batch") == pytest.approx(0.001) and a.saved("cache") == pytest.approx(0.0004)
    # Five items answered (k3 failed): $0.0021 / 5.
    assert a.items == 5 and a.per_item == pytest.approx(0.00042)
    # Timed answers 100, 200, 300, 400 (k5 was cached): numpy's linear percentiles.
    assert a.latency_n == 4
    assert a.latency_p50 == pytest.approx(250.0) and a.latency_p95 == pytest.approx(385.0)
    b = row_cost(board, priced["run_b"])
    # No price for mystery-model: unknown, not free, and so is the total and its per item.
    assert b.generation.dollars is None and b.generation.tokens == 1200
    assert b.dollars is None and b.per_item is None and b.items == 6
    assert b.latency_p50 is None and b.latency_n == 0


def test_a_response_column_costs_only_its_judge(db, settings):
    settings.PRICE_TABLE = {"judge-model": [1.0, 1.0]}
    dataset = f.make_review_dataset(f.make_task())
    items = [f.make_item(dataset, i) for i in range(4)]
    run = f.make_judge_run(dataset, label="from-file")
    for item in items:
        f.judge_item(run, item, [{"accuracy": 3, "clarity": 4}] * 2)
    judge = Endpoint.objects.create(name="j", model="judge-model")
    Run.objects.filter(pk=run.pk).update(endpoint=judge, cost=0.002, prompt_tokens=1500)
    board = boards.build(dataset.task, Params())
    found = board.costs[run.pk]
    assert found.generation is None and found.dollars == pytest.approx(0.002)
    assert found.items == 4 and found.per_item == pytest.approx(0.0005)


def test_pareto_front_by_hand():
    points = {
        1: (80.0, 0.010),  # best score: on the front
        2: (70.0, 0.002),  # cheaper, worse: on the front
        3: (60.0, 0.005),  # beaten by 2 on both
        4: (70.0, 0.004),  # as good as 2 but dearer: off
        5: (50.0, 0.001),  # cheapest: on
        6: (80.0, 0.010),  # the same point as 1: neither beats the other
    }
    assert costs.pareto_front(points) == {1, 2, 5, 6}
    assert costs.pareto_front({}) == set()


def test_csv_jsonl_carry_the_cost_columns(priced):
    board = boards.build(priced["task"], Params())
    text = "".join(exports.board_csv(board)).lstrip("\ufeff")
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(text))}
    a, b = rows["model-a"], rows["model-b"]
    assert float(a["cost.generation.usd"]) == pytest.approx(0.001)
    assert float(a["cost.judging.usd"]) == pytest.approx(0.0011)
    assert float(a["cost.batch_saved_usd"]) == pytest.approx(0.001)
    assert float(a["cost.cache_saved_usd"]) == pytest.approx(0.0004)
    assert float(a["cost.usd_per_item"]) == pytest.approx(0.00042)
    assert (a["cost.generation.prompt_tokens"], a["cost.judging.completion_tokens"]) == (
        "1000",
        "200",
    )
    assert float(a["cost.latency_p50_ms"]) == 250.0 and float(a["cost.latency_p95_ms"]) == 385.0
    assert a["cost.pareto_front"] == "True"
    # Unknown dollars are blank cells, not 0; model-b has no known cost, so no place on the front.
    assert (b["cost.generation.usd"], b["cost.usd"], b["cost.usd_per_item"]) == ("", "", "")
    assert b["cost.pareto_front"] == "False" and b["cost.generation.prompt_tokens"] == "800"
    records = {r["model"]: r for r in map(json.loads, exports.board_jsonl(board))}
    cost = records["model-a"]["cost"]
    assert cost["generation"]["batch"] is True and cost["usd"] == pytest.approx(0.0021)
    assert records["model-b"]["cost"]["usd"] is None


def test_the_api_carries_the_cost(priced, viewer_user, client):
    _, raw = ApiToken.issue(viewer_user, "script")
    answer = client.get(
        f"/api/v1/leaderboards/{priced['task'].slug}/", headers={"Authorization": f"Bearer {raw}"}
    )
    assert answer.status_code == 200
    rows = {r["model"]: r for r in answer.json()["rows"]}
    cost = rows["model-a"]["cost"]
    assert cost["usd_per_item"] == pytest.approx(0.00042)
    assert cost["judging"]["usd"] == pytest.approx(0.0011)
    assert cost["latency_p95_ms"] == pytest.approx(385.0) and cost["pareto_front"] is True
    assert rows["model-b"]["cost"]["usd"] is None


def test_page_shows_the_table_and_the_chart_with_its_front(priced, viewer_client, settings):
    # Price model-b's generation too, so that both are on the chart; on accuracy alone
    # (clarity weighted 0) model-b scores lower and costs more per item: off the front.
    settings.PRICE_TABLE = {**settings.PRICE_TABLE, "mystery-model": [10.0, 10.0]}
    Run.objects.filter(pk=priced["gen_b"].pk).update(cost=0.012)
    Run.objects.filter(pk=priced["gen_b"].pk).update(label="<b>model-b</b>")
    url = reverse("leaderboards:task", args=[priced["task"].slug])
    page = viewer_client.get(url, {"w.clarity": "0"})
    html = page.content.decode()
    assert page.status_code == 200
    section = html[html.index('id="cost"') : html.index("</section>", html.index('id="cost"'))]
    a, b = priced["run_a"].pk, priced["run_b"].pk
    row_a = re.search(rf'<tr data-cost-run="{a}">(.*?)</tr>', section, re.S).group(1)
    assert 'data-stat="per-item">$0.0004<' in row_a and 'data-stat="p95">385 ms<' in row_a
    assert 'data-stat="batch-saved">$0.0010<' in row_a and "◆ front" in row_a
    row_b = re.search(rf'<tr data-cost-run="{b}">(.*?)</tr>', section, re.S).group(1)
    assert "◆ front" not in row_b and 'data-stat="usd">$0.0131<' in row_b
    # The chart is SVG written by the server: a dot per model, the front marked, names escaped.
    assert "<svg" in section and "<script" not in section
    assert f'<g class="dot" data-cost-run="{a}" data-front="1">' in section
    assert f'<g class="dot" data-cost-run="{b}">' in section
    assert "&lt;b&gt;model-b&lt;/b&gt;" in section and "<b>model-b</b>" not in section
    # Model-a costs $0.00042 per item, model-b ($0.0131 over 6) the most: the right end.
    dot_b = re.search(rf'data-cost-run="{b}">\s*<circle cx="([\d.]+)" cy="([\d.]+)"', section)
    dot_a = re.search(
        rf'data-cost-run="{a}" data-front="1">\s*<circle cx="([\d.]+)" cy="([\d.]+)"', section
    )
    assert float(dot_b.group(1)) == costs.WIDTH - costs.RIGHT
    assert float(dot_a.group(1)) < float(dot_b.group(1))
    assert float(dot_a.group(2)) < float(dot_b.group(2))  # higher score: nearer the top


def test_no_chart_when_nothing_cost_anything(board_data, viewer_client):
    """Rule-based judges over answers nobody paid for: the table says $0, no empty chart."""
    page = viewer_client.get(reverse("leaderboards:task", args=[board_data["task"].slug]))
    html = page.content.decode()
    assert 'id="cost-table"' in html and 'id="cost-chart-none"' in html
    start = html.index('id="cost"')
    assert "<svg" not in html[start : html.index("</section>", start)]
