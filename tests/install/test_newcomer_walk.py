"""A newcomer's walk, in Chromium, through the users' running install (bin/run): log in, make a
task, upload a CSV as Excel saves it, map it, add an endpoint and test it, write a prompt template
and preview it, generate responses and watch them arrive, judge them with a rule-based metric and
an LLM rubric, override a score with a reason, read the leaderboard (judge-only beside
human-corrected), compare two runs and download the CSV export.

One test, one flow, by what a person reads and clicks. When a step fails, the page's screenshot
and HTML are kept in the test's temp directory and their paths printed."""

import csv
import io
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.install.conftest import ADMIN, Install
from tests.llm_server import LLMServer

KEY = "sk-newcomer-walk-0123456789abcdef"
# "CSV UTF-8" as Excel writes it: a byte-order mark, CRLF between rows, and a cell with a line
# break (Alt+Enter, a bare LF) and a comma, quoted.
EXCEL_CSV = (
    "\ufeffquestion,answer,topic\r\n"
    '"Name the largest planet.\nOne word, please.",Jupiter,space\r\n'
    "What is 2+2?,4,math\r\n"
    "Which gas do plants take in?,carbon dioxide,biology\r\n"
).encode()
RUBRIC_REPLY = '{"correctness": 4, "reason": "Right, and brief."}'
OVERRIDE_REASON = "Echoes the question instead of answering it"


@pytest.fixture
def walk_page(page: Page) -> Page:
    page.set_viewport_size({"width": 1280, "height": 900})
    page.set_default_timeout(60_000)  # generous: the machine may be loaded
    return page


def keep(page: Page, folder: Path) -> None:
    shot, html = folder / "walk-failure.png", folder / "walk-failure.html"
    try:
        page.screenshot(path=str(shot), full_page=True)
        html.write_text(page.content())
        print(f"\nThe walk stopped at {page.url}\n  screenshot: {shot}\n  page HTML: {html}")
    except Exception as exc:  # the browser itself may be gone
        print(f"\nThe walk stopped at {page.url}; could not keep the page: {exc}")


def test_a_newcomer_walks_the_whole_flow(
    install: Install, llm_server: LLMServer, walk_page: Page, tmp_path: Path
) -> None:
    page = walk_page
    try:
        walk(page, install.url, llm_server)
    except BaseException:
        keep(page, tmp_path)
        raise


def choose(page: Page, select: str, text: str) -> None:
    """Pick the option whose label contains the text, as a person reads the list."""
    value = page.locator(f"{select} option", has_text=text).first.get_attribute("value")
    page.select_option(select, value=value)


def cells(page: Page, row: str) -> list[str]:
    return [cell.strip() for cell in page.locator(row).first.locator("td").all_inner_texts()]


def walk(page: Page, url: str, llm_server: LLMServer) -> None:
    llm_server.configure(
        require_key=KEY, script=[{"scope": "any", "match": "correctness", "reply": RUBRIC_REPLY}]
    )
    go: Callable[[str], object] = lambda path: page.goto(url.rstrip("/") + path)  # noqa: E731

    # Log in, and make a task.
    go("/")
    page.fill("input[name=username]", ADMIN[0])
    page.fill("input[name=password]", ADMIN[1])
    page.click("button[type=submit]")
    page.click("text=New task")
    page.fill("input[name=slug]", "science-walk")
    page.fill("input[name=name]", "Science walk")
    page.click("button:has-text('Create')")
    expect(page).to_have_url(re.compile(r"/tasks/science-walk/$"))

    # Upload the Excel CSV, see it previewed, map it.
    page.click("#upload-dataset")
    page.set_input_files(
        "input[name=file]",
        files=[{"name": "science.csv", "mimeType": "text/csv", "buffer": EXCEL_CSV}],
    )
    page.click("text=Upload and preview")
    preview = page.locator("#preview-table")
    expect(preview).to_contain_text("Name the largest planet.")
    expect(preview.locator("th").first).to_have_text("question")  # the BOM is not in the name
    expect(preview.locator("tbody tr")).to_have_count(3)
    page.select_option("select[name=tags_column]", "topic")
    page.uncheck("#input-columns input[value=topic]")
    page.click("#import-button")
    expect(page.locator("#row-count")).to_have_text("3")
    expect(page.locator("#tag-counts")).to_contain_text("space · 1")
    page.click("#item-table a >> text=0")
    expect(page.locator('[data-field="question"] .model-text')).to_have_text(
        "Name the largest planet.\nOne word, please."
    )

    # An endpoint with a stored key and one request at a time, so progress can be watched.
    page.click("nav >> text=Endpoints")
    page.click("text=New endpoint")
    page.fill("input[name=name]", "walk-endpoint")
    page.fill("input[name=base_url]", llm_server.base_url)
    page.fill("input[name=model]", "test-model")
    page.fill("input[name=new_api_key]", KEY)
    page.fill("input[name=concurrency_limit]", "1")
    page.click("button:has-text('Save')")
    row = page.locator("tr", has_text="walk-endpoint")
    expect(row).to_contain_text("stored secret: set")
    row.locator("button:has-text('Test connection')").click()
    expect(page.locator("main")).to_contain_text("Connected: test-model answered")
    assert KEY not in page.content()

    # A prompt template, previewed on a real item.
    go("/tasks/science-walk/")
    page.click("#task-templates")
    page.click("text=New template")
    page.fill("input[name=name]", "short-answer")
    page.fill("textarea[name=system_message]", "Answer in as few words as you can.")
    page.fill("textarea[name=user_message]", "Question: {{ question }}")
    page.click("button:has-text('Save')")
    expect(page.locator("#template-preview")).to_contain_text(
        "Question: Name the largest planet.\nOne word, please."
    )

    # A generation run: the page follows it by itself, the table filling as answers arrive.
    llm_server.configure(latency=2.0)
    page.click("text=Start a generation run")
    page.select_option("select[name=endpoint]", label="walk-endpoint")
    expect(page.locator("select[name=dataset] option:checked")).to_have_text("science v1")
    expect(page.locator("select[name=template] option:checked")).to_have_text("short-answer v1")
    page.fill("input[name=label]", "walk-model-a")
    page.click("button:has-text('Start')")
    # Null-safe: the page may be between two documents (it reloads itself when the run ends)
    # at the moment the predicate runs, and a throw there ends the wait.
    page.wait_for_function(
        "() => document.querySelector('#run-status')?.dataset.status === 'running'"
        " && document.querySelectorAll('#response-table tr.response-ok').length >= 1"
        " && Number(document.querySelector('#run-done')?.textContent) < 3",
        timeout=120_000,
    )
    expect(page.locator("#run-status")).to_have_attribute("data-status", "completed")
    expect(page.locator("#run-done")).to_have_text("3")
    expect(page.locator("#response-table tr.response-ok")).to_have_count(3)
    llm_server.configure(latency=0.0)

    # A rule-based judge (token F1) over those responses.
    page.click("text=Judge these responses")
    page.click("text=New judge")
    page.fill("input[name=name]", "token-f1")
    page.select_option("select[name=kind]", label="Metric (rule-based)")
    page.select_option("select[name=metric]", label="Token F1 (F1, higher is better)")
    page.click("button:has-text('Save')")
    choose(page, "#judge-run-form select[name=responses]", "walk-model-a")
    page.click("button:has-text('Start judge run')")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "completed")
    expect(page.locator("#run-done")).to_have_text("3")

    # An LLM rubric judge, made the task's default so the next model is judged by itself.
    go("/judges/new/?task=science-walk")
    page.fill("input[name=name]", "correctness")
    page.select_option("select[name=kind]", label="LLM rubric")
    page.fill("textarea[name=subjects_text]", "correctness 1 5")
    page.click("button:has-text('Save')")
    page.select_option("#make-default-form select[name=endpoint]", label="walk-endpoint")
    page.click('button:has-text("Make this the task\'s default judge")')
    expect(page.locator("main")).to_contain_text("now judged by correctness v1")
    choose(page, "#judge-run-form select[name=responses]", "walk-model-a")
    page.select_option("#judge-run-form select[name=endpoint]", label="walk-endpoint")
    page.click("button:has-text('Start judge run')")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "completed")
    expect(page.locator("#run-done")).to_have_text("3")
    judge_run_url = page.url

    # Review: override the first item's score with a reason; the history keeps it.
    page.click("#judge-run-links >> text=Review")
    page.click("table >> a >> text=0")
    expect(page.locator("main")).to_contain_text("Name the largest planet.")
    page.fill("input[name=value]", "2")
    page.fill("textarea[name=reason]", OVERRIDE_REASON)
    page.click("button:has-text('Save override')")
    expect(page.locator("main")).to_contain_text("Overridden by admin on")
    page.click("summary:has-text('History (1)')")
    expect(page.locator("main")).to_contain_text(OVERRIDE_REASON)

    # A second model, judged by the default judge without anyone starting it.
    go("/runs/new/generation/?task=science-walk")
    page.select_option("select[name=endpoint]", label="walk-endpoint")
    page.fill("input[name=label]", "walk-model-b")
    page.click("button:has-text('Start')")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "completed")

    # The leaderboard: judge-only beside human-corrected, both models.
    go("/leaderboards/science-walk/")
    choose(page, "select[name=judge]", "correctness v1")
    expect(page.locator("#leaderboard tbody tr", has_text="walk-model-b")).to_be_visible()
    board = {
        name: cells(page, f"#leaderboard tbody tr:has-text('walk-model-{name}')") for name in "ab"
    }
    # Model a: judge 4, 4, 4; human 2, 4, 4 → 3.33; overall (3.33 − 1) / (5 − 1) × 100 = 58.33.
    # Model b, judged by the default judge: 4, 4, 4 → overall 75.00.
    # Cells: position, tied rank, model, overall, its CI, judge, human, CI, answered, cover., n…
    # The CI of 2, 4, 4 on the 1–5 range is the bounded-mean bound (#29.1): stats.mean_ci(
    # [2, 4, 4], 1, 5) = [1.63, 4.58], rescaled for the overall to [15.86, 89.60].
    assert board["a"][3:5] == ["58.33", "[15.86, 89.60]"], board
    assert board["a"][5:11] == ["4.00", "3.33", "[1.63, 4.58]", "3.33", "100.0%", "3"], board
    assert board["b"][3] == "75.00" and board["b"][5:7] == ["4.00", "4.00"], board
    assert board["a"][1] == board["b"][1] == "1", board  # three items cannot tell them apart

    # Compare the two.
    page.click("text=Compare two runs")
    choose(page, "select[name=a]", "walk-model-b · correctness v1")
    choose(page, "select[name=b]", "walk-model-a · correctness v1")
    page.click("button:has-text('Compare')")
    # The table is on the next page: wait for it (reading at once read the old page at load 50).
    expect(page.locator("#comparison tr[data-subject=correctness] td").first).to_be_visible()
    compared = cells(page, "#comparison tr[data-subject=correctness]")
    # paired n, A wins, B wins, ties, mean A, mean B, A − B
    assert compared[:7] == ["3", "1", "0", "2", "4.00", "3.33", "0.67"], compared

    # The judge run's CSV, downloaded and read.
    page.goto(judge_run_url)
    with page.expect_download() as download:
        page.click("#export-csv")
    text = Path(download.value.path()).read_text(encoding="utf-8-sig")
    rows = {row["key"]: row for row in csv.DictReader(io.StringIO(text))}
    assert set(rows) == {"0", "1", "2"}, text
    assert rows["0"]["question"] == "Name the largest planet.\nOne word, please."
    assert rows["0"]["correctness.judge"] == "4.0"
    assert rows["0"]["correctness.final"] == "2.0"
    assert rows["0"]["correctness.override_reason"] == OVERRIDE_REASON
    assert rows["1"]["correctness.final"] == "4.0"
    assert KEY not in text
