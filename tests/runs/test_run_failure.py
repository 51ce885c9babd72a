"""A run that fails as a whole (a crashed job, a fatal endpoint error, a bad template): every
page that shows its status says why in one line, only admins receive the traceback (folded),
and the counters add up to the total ("not run" for what it never reached)."""

import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from django.urls import reverse

from apps.judges.models import Judge, JudgeRun
from apps.runs.engine.lifecycle import fail
from apps.runs.models import PromptTemplate, Run, failure_cause
from tests.base import ROOT, subprocess_env
from tests.factories import make_judge

# Where the crash below happens: a server path that only admins may see.
MISSING = ROOT / "data" / "no-such-dir" / "evalsite.sqlite3"
CAUSE = "FileNotFoundError: [Errno 2] No such file or directory: '…/evalsite.sqlite3'"


def crash_run(run: Run) -> Run:
    """Fail `run` the way apps.runs.jobs.guarded does when a job crashes before any item."""
    try:
        Path(MISSING).read_text()
    except OSError:
        fail(run.pk, traceback.format_exc())
    run.refresh_from_db()
    return run


def make_run(dataset, **fields) -> Run:
    fields = {"kind": Run.Kind.GENERATION, "status": Run.Status.RUNNING, **fields}
    return Run.objects.create(task=dataset.task, dataset=dataset, total=30, launch=1, **fields)


def run_page(client, user, run: Run) -> str:
    client.force_login(user)
    return client.get(run.get_absolute_url()).content.decode()


def number(page: str, cell_id: str) -> str:
    match = re.search(rf'id="{cell_id}">([^<]*)<', page)
    assert match, cell_id
    return match.group(1)


# ---- the one-line cause ------------------------------------------------------------------------
def test_the_cause_is_the_exception_line_without_paths_or_module():
    try:
        Path(MISSING).read_text()
    except OSError:
        text = traceback.format_exc()
    assert text.count("\n") > 3 and str(ROOT) in text
    assert failure_cause(text) == CAUSE
    # Our own exceptions are written for people: their message alone.
    bad = 'Traceback (most recent call last):\n  File "/srv/x.py", line 1, in f\n    g()\n'
    assert failure_cause(bad + "apps.runs.prompts.PromptError: User message: bad tag\n") == (
        "User message: bad tag"
    )
    # A fatal endpoint error is already one plain line; a URL is no server path.
    stopped = "Stopped: model “m” not found (404) at http://127.0.0.1:9/v1/chat/completions"
    assert failure_cause(stopped) == (
        "model “m” not found (404) at http://127.0.0.1:9/v1/chat/completions"
    )


# ---- the run page, per role ----------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("role", ["admin", "reviewer", "viewer"])
def test_a_crashed_run_says_why_and_only_admins_get_the_folded_traceback(
    client, role, request, dataset, endpoint, template
):
    user = request.getfixturevalue(f"{role}_user")
    run = crash_run(make_run(dataset, endpoint=endpoint, template=template))
    assert run.status == Run.Status.FAILED and str(ROOT) in run.error  # stored whole
    page = run_page(client, user, run)

    cause = re.search(r'<p id="run-cause">(.*?)</p>', page, re.S).group(1)
    assert "failed as a whole" in cause and CAUSE.replace("'", "&#x27;") in cause
    assert "Traceback" not in cause and str(ROOT) not in cause
    assert ">Run failed<" in page
    # Counters agree with the status: nothing done, nothing failed item by item, 30 not run.
    assert (number(page, "run-done"), number(page, "run-failed")) == ("0", "0")
    assert number(page, "run-not-run") == "30" and number(page, "run-total") == "30"
    assert "Not run</dt>" in page and "30 items were not run" in page
    if role == "admin":
        folded = re.search(r'<details id="run-traceback">(.*?)</details>', page, re.S)
        assert folded and "Traceback (most recent call last)" in folded.group(1)
        assert str(ROOT) in folded.group(1)
        assert str(ROOT) not in page.replace(folded.group(0), "")  # nowhere else
    else:
        assert "run-traceback" not in page and "Traceback" not in page
        assert str(ROOT) not in page and "read_text" not in page


@pytest.mark.django_db
def test_a_fatal_endpoint_error_counts_what_was_done_failed_and_not_run(
    admin_client, dataset, endpoint, template
):
    run = make_run(dataset, endpoint=endpoint, template=template, done=12, failed=3)
    run.mark_failed("Stopped: the API key was refused (401): check the endpoint's key")
    page = admin_client.get(run.get_absolute_url()).content.decode()
    assert "failed as a whole</strong>, not item by item: the API key was refused (401)" in page
    assert [number(page, c) for c in ("run-done", "run-failed", "run-not-run")] == [
        "12",
        "3",
        "15",
    ]
    assert "15 items were not run; what was done before it stopped is kept" in page
    assert "run-traceback" not in page  # a plain stop has no traceback, even for admins
    # While a run is going, what is left is "to do", not "not run".
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, error="")
    page = admin_client.get(run.get_absolute_url()).content.decode()
    assert "To do</dt>" in page and "Not run</dt>" not in page and "run-cause" not in page


# ---- lists: runs, task, judge, judge run pages ------------------------------------------------
@pytest.mark.django_db
def test_lists_show_run_failed_with_its_cause_and_not_run_but_no_traceback(
    reviewer_client, dataset, endpoint, template
):
    generation = crash_run(make_run(dataset, endpoint=endpoint, template=template))
    judge = make_judge(dataset.task, Judge.Kind.MCQ_RULE)
    judged = make_run(dataset, kind=Run.Kind.JUDGE, source_column="answer")
    JudgeRun.objects.create(run=judged, judge=judge)
    judged = crash_run(judged)
    pages = {
        "runs": reverse("runs:list"),
        "task": dataset.task.get_absolute_url(),
        "judge": judge.get_absolute_url(),
        "results": reverse("judges:results", args=[judged.pk]),
        "review": reverse("review:index"),
    }
    for name, url in pages.items():
        page = reviewer_client.get(url).content.decode()
        assert page.count("Run failed<") == (2 if name in ("runs", "task") else 1), name
        assert "FileNotFoundError: [Errno 2] No such file or directory" in page, name
        assert str(ROOT) not in page and "Traceback" not in page, name
    for name in ("runs", "task", "judge"):
        page = reviewer_client.get(pages[name]).content.decode()
        assert "Failed items</th>" in page and "Not run</th>" in page, name
        assert re.search(
            r'<td class="num">0</td><td class="num">0</td><td class="num">30</td>', page
        )
    header = reviewer_client.get(pages["results"]).content.decode()
    assert "0 done, 0 failed of 30, 30 not run" in header
    assert "The run failed as a whole: FileNotFoundError" in header
    assert generation.not_run == judged.not_run == 30


# ---- the command line -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_start_run_wait_says_the_cause_in_one_line(
    client, admin_user, viewer_user, dataset, endpoint, workers
):
    # A template that cannot compile (saved around the form, as an old row could be): the job
    # fails in preparing, before any item.
    PromptTemplate.objects.create(task=dataset.task, name="broken", user_message="{% oops %}")
    workers()
    result = subprocess.run(
        [
            *(sys.executable, "manage.py", "start_run", "generation"),
            *("--dataset", str(dataset.pk), "--endpoint", "local", "--template", "broken"),
            *("--wait", "--poll", "0.3"),
        ],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    run = Run.objects.get()
    assert result.returncode == 2, result.stdout + result.stderr
    assert run.status == Run.Status.FAILED and "Traceback" in run.error
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"run #{run.pk} failed: 0 done, 0 failed of 30, 30 not run")
    assert result.stderr.strip() == (
        f"run #{run.pk} failed as a whole: User message: Invalid block tag on line 1: 'oops'. "
        "Did you forget to register or load this tag?"
    )
    viewer = run_page(client, viewer_user, run)
    assert "User message: Invalid block tag on line 1" in viewer and "Traceback" not in viewer
    assert "Traceback (most recent call last)" in run_page(client, admin_user, run)


# ---- in Chromium ------------------------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_failed_run_page_in_chromium_at_1280_and_800(
    login, admin_user, dataset, endpoint, template
):
    run = crash_run(make_run(dataset, endpoint=endpoint, template=template, label="model-a"))
    page = login(admin_user, run.get_absolute_url())
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.reload()
        page.screenshot(path=f"/tmp/run-failed-{width}.png", full_page=True)
        assert page.locator("#run-status").inner_text() == "Run failed"
        assert CAUSE in page.locator("#run-cause").inner_text()
        # Folded: the traceback is there for the admin, but closed until asked for.
        assert page.locator("#run-traceback").count() == 1
        assert not page.locator("#run-traceback pre").is_visible()
        assert page.locator("#run-not-run").inner_text() == "30"
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways at {width} px"
    page.click("#run-traceback summary")
    assert page.locator("#run-traceback pre").is_visible()
    page.screenshot(path="/tmp/run-failed-800-unfolded.png", full_page=True)
