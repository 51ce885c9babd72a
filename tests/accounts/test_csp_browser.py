"""The Content-Security-Policy in real Chromium: the main pages, as admin, report no violation,
and the confirmations that used to be inline handlers still ask before anything happens."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from apps.datasets.models import Dataset
from apps.runs.models import Run
from tests import factories as f
from tests.base import make_user

# Runs in every document before its own scripts (Playwright injects it, outside the policy):
# every violation the browser reports lands in window.__csp.
COLLECT_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


@pytest.fixture
def board(db):
    task = f.make_task("demo")
    rows = [{"key": f"k{i}", "fields": {"question": f"q{i}"}, "tags": ["easy"]} for i in range(3)]
    dataset = f.make_dataset(task, rows, columns=["question"], name="set")
    judge = f.make_judge(task, name="quality")
    generation = f.make_generation_run(dataset, {f"k{i}": "A" for i in range(3)}, label="model-a")
    judged = f.make_judge_run(dataset, judge, source_run=generation)
    f.add_scores(judged, {f"k{i}": {"accuracy": 4, "clarity": 3} for i in range(3)})
    unused = f.make_dataset(task, rows, name="unused", columns=["question"])
    return {"dataset": dataset, "unused": unused, "generation": generation, "judged": judged}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_main_pages_report_no_csp_violation(board, login, live_server, page):
    console: list[str] = []
    page.on(
        "console",
        lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(COLLECT_VIOLATIONS)
    login(make_user("admin"))
    judged = board["judged"]
    item = judged.dataset.items.order_by("position").first()

    pages = [
        reverse("datasets:task-list"),
        board["dataset"].get_absolute_url(),
        board["unused"].get_absolute_url(),
        board["generation"].get_absolute_url(),
        judged.get_absolute_url(),
        reverse("review:index"),
        reverse("review:run", args=[judged.pk]),
        reverse("review:item", args=[judged.pk, item.pk]),
        reverse("leaderboards:task", args=["demo"]),
        reverse("admin:index"),
        "/django-rq/queues/0/",  # django-rq's inline script, allowed by its hash
    ]
    for path in pages:
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__csp") == [], path
        assert console == [], path

    # An HTMX swap on the leaderboard (htmx adds its indicator styles and swaps markup in).
    page.goto(f"{live_server.url}{reverse('leaderboards:task', args=['demo'])}")
    page.click("#values-human")
    expect(page.locator('td[data-mode="human"]').first).to_be_visible()
    assert page.evaluate("window.__csp") == []
    assert console == []

    # The collector does see a violation: an inline script injected now is refused.
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1';"
        " document.body.append(s); }"
    )
    page.wait_for_function("window.__csp.length > 0")
    assert page.evaluate("window.__ran") is None
    assert "script-src" in page.evaluate("window.__csp")[0]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_confirmations_still_ask_under_the_policy(board, login, live_server, page):
    """They were onsubmit="return confirm(…)", which the policy refuses to run: the form would
    then be sent without asking. Now a data-confirm attribute, asked by static/js/evalsite.js."""
    asked: list[str] = []
    answer = {"accept": False}

    def on_dialog(dialog):
        asked.append(dialog.message)
        dialog.accept() if answer["accept"] else dialog.dismiss()

    page.on("dialog", on_dialog)
    unused = board["unused"]
    delete = f'form[action="{reverse("datasets:dataset-delete", args=[unused.pk])}"] button'
    page = login(make_user("admin"), unused.get_absolute_url())
    page.click(delete)
    assert asked == [f"Delete {unused} and its items?"]
    page.wait_for_load_state("networkidle")
    assert Dataset.objects.filter(pk=unused.pk).exists()  # dismissed: nothing happened

    answer["accept"] = True
    page.click(delete)
    page.wait_for_url(lambda url: url != f"{live_server.url}{unused.get_absolute_url()}")
    assert not Dataset.objects.filter(pk=unused.pk).exists()

    answer["accept"] = False
    run = board["generation"]
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.click("#overwrite-run")
    assert asked[-1] == "Run every item again? Earlier attempts stay in the logs."
    page.wait_for_load_state("networkidle")
    assert Run.objects.get(pk=run.pk).status == "completed"
