"""Cancel and resume from a script (#16.5 "resume continues", driven as #16.1 drives the rest):
the run page's buttons as API calls, with their refusals; the jobs run in this process
(tests.base.work_here).

Prices as in tests/runs/test_budget.py: a request is $0.000072 at the loopback server and
reserves $0.000120 before it is sent, so a $0.001 budget lets 13 of 30 items through."""

import pytest

from apps.runs.models import PromptTemplate, Response, Run
from tests.base import work_here
from tests.factories import make_qa_dataset, make_task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def start(settings, endpoint, token_client):
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}
    endpoint.max_tokens = 10
    endpoint.concurrency_limit = 1  # one request at a time: the budget's stopping point is exact
    endpoint.save()
    task = make_task("qa")
    dataset = make_qa_dataset(task, 30)
    PromptTemplate.objects.create(
        task=task, name="qa", system_message="Answer briefly.", user_message="Q: {{ question }}"
    )
    reviewer = token_client("reviewer")

    def _start(**options):
        body = {"task": "qa", "dataset": dataset.pk, "endpoint": "local", "template": "qa"}
        started = reviewer.post("/runs/generation/", {**body, "use_cache": False, **options})
        assert started.status_code == 201, started.content
        return started.json()["id"]

    return reviewer, _start


def test_a_run_its_budget_stopped_resumes_with_a_raised_budget(start, llm_server):
    reviewer, begin = start
    pk = begin(budget_usd=0.001)
    work_here()
    stopped = reviewer.get(f"/runs/{pk}/").json()
    assert (stopped["status"], stopped["done"], stopped["total"]) == ("cancelled", 13, 30)
    assert stopped["budget_usd"] == 0.001

    unknown = reviewer.post(f"/runs/{pk}/resume/", {"mode": "sideways"})
    assert unknown.status_code == 422
    assert unknown.json()["detail"] == (
        "mode: Input should be 'resume', 'retry_failed' or 'overwrite'"
    )
    unfit = reviewer.post(f"/runs/{pk}/resume/", {"budget_usd": "lots"})
    assert unfit.status_code == 422 and list(unfit.json()["errors"]) == ["budget_usd"]
    broken = reviewer.client.post(
        f"/api/v1/runs/{pk}/resume/", "{", content_type="application/json", headers=reviewer.headers
    )
    assert broken.status_code == 422 and broken.json()["detail"]
    refused = reviewer.post(f"/runs/{pk}/resume/", {"budget_usd": -1})
    assert refused.status_code == 400 and "budget" in refused.json()["detail"]

    resumed = reviewer.post(f"/runs/{pk}/resume/", {"budget_usd": 0.01})
    assert resumed.status_code == 200, resumed.content
    assert (resumed.json()["status"], resumed.json()["budget_usd"]) == ("queued", 0.01)
    llm_server.reset(stats_only=True)
    work_here()
    finished = reviewer.get(f"/runs/{pk}/").json()
    assert (finished["status"], finished["done"], finished["failed"]) == ("completed", 30, 0)
    assert llm_server.stats()["requests"] == 17  # exactly the rest
    rows = Response.objects.filter(run_id=pk)
    assert rows.count() == 30 and rows.values("item_id").distinct().count() == 30


def test_cancel_then_resume_with_no_body_finishes_the_run(start, token_client, llm_server):
    reviewer, begin = start
    pk = begin()
    viewer = token_client("viewer", "watcher")
    assert viewer.post(f"/runs/{pk}/cancel/").status_code == 403
    assert viewer.post(f"/runs/{pk}/resume/").status_code == 403

    cancelled = reviewer.post(f"/runs/{pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    work_here()
    assert Run.objects.get(pk=pk).done == 0 and llm_server.stats()["requests"] == 0
    # A script's bare POST (no JSON at all) resumes, as the page's button does.
    resumed = reviewer.client.generic(
        "POST", f"/api/v1/runs/{pk}/resume/", headers=reviewer.headers
    )
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["status"] == "queued"
    work_here()
    run = Run.objects.get(pk=pk)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 30, 0)
    assert Response.objects.filter(run=run).count() == 30
    # Cancelling a run that is over changes nothing; there is no run 999.
    again = reviewer.post(f"/runs/{pk}/cancel/")
    assert again.status_code == 200 and again.json()["status"] == "completed"
    assert reviewer.post("/runs/999/cancel/").status_code == 404
