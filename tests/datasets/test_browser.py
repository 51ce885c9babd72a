"""In Chromium: upload a CSV through the page, map its columns, see its items and tags."""

import re

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Dataset, Task
from tests.base import make_user, run_burst_worker
from tests.datasets import samples

CSV = (
    "\ufeffquestion,answer,subject,response\n"
    '"Capital of France, in one word?",Paris,geo;easy,Paris\n'
    "2+2?,4,math;easy,5\n"
    "中国的首都是哪里？,北京,geo,北京\n"
    '"<b>bold?</b>",no,html,"=HYPERLINK(""x"")"\n'
).encode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_upload_map_and_browse_a_csv(login, live_server):
    task = Task.objects.create(slug="geo-qa", name="Geo QA")
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/")
    page.click("#upload-dataset")
    page.set_input_files(
        "input[name=file]", files=[{"name": "capitals.csv", "mimeType": "text/csv", "buffer": CSV}]
    )
    page.click("text=Upload and preview")

    expect(page.locator("#preview-table")).to_contain_text("中国的首都是哪里？")
    expect(page.locator("#preview-table")).to_contain_text("Capital of France, in one word?")
    expect(page.locator("#detected-format")).to_have_text("CSV")
    page.fill("input[name=name]", "capitals")
    page.select_option("select[name=reference_column]", "answer")
    page.select_option("select[name=tags_column]", "subject")
    page.check("#response-columns input[value=response]")
    page.check("#input-columns input[value=question]")
    page.uncheck("#input-columns input[value=subject]")  # guessed as an input; it is the tags
    page.click("#import-button")

    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    dataset = Dataset.objects.get()
    assert page.url.endswith(dataset.get_absolute_url())
    expect(page.locator("#row-count")).to_have_text("4")
    expect(page.locator("#item-table tbody tr")).to_have_count(4)
    expect(page.locator("#item-table")).to_contain_text("<b>bold?</b>")  # shown as text
    tags = page.locator("#tag-counts")
    for expected in ("geo · 2", "easy · 2", "math · 1", "html · 1"):
        expect(tags).to_contain_text(expected)
    assert dataset.mapping == {
        "id_column": None,
        "input_columns": ["question"],
        "reference_column": "answer",
        "tags_column": "subject",
        "response_columns": ["response"],
    }

    # A tag narrows the items; typing a search swaps the list in place.
    page.click("#tag-counts a[data-tag=geo]")
    expect(page.locator("#item-table tbody tr")).to_have_count(2)
    page.goto(f"{live_server.url}{dataset.get_absolute_url()}")
    page.fill("#item-search", "首都")
    expect(page.locator("#item-table tbody tr")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"q=%E9%A6%96%E9%83%BD"))

    # The item page shows every field, the formula-like response as plain text.
    page.fill("#item-search", "bold")
    page.click("#item-table a >> text=3")
    expect(page.locator("#item-fields")).to_contain_text('=HYPERLINK("x")')
    expect(page.locator('[data-field="answer"] .role-reference')).to_be_visible()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_file_over_the_limit_is_refused_before_it_is_sent(login, live_server, settings):
    settings.DATASET_MAX_UPLOAD_BYTES = 1000
    task = Task.objects.create(slug="limits", name="Limits")
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/upload/")
    posts: list[str] = []
    page.on("request", lambda request: request.method == "POST" and posts.append(request.url))

    big = CSV + b"x" * 4000
    page.set_input_files(
        "input[name=file]", files=[{"name": "big.csv", "mimeType": "text/csv", "buffer": big}]
    )
    error = page.locator("#id_file-size-error")
    expect(error).to_have_text(
        f"big.csv: The file is {len(big) / 1024:.1f} KB; the limit is 1000 bytes. "
        "Split it into smaller files, or ask an admin to raise DATASET_MAX_UPLOAD_BYTES."
    )
    page.click("text=Upload and preview")
    page.wait_for_timeout(300)
    assert posts == [] and page.url.endswith("/upload/")

    # A file within the limit clears the message and goes through.
    page.set_input_files(
        "input[name=file]", files=[{"name": "small.csv", "mimeType": "text/csv", "buffer": CSV}]
    )
    expect(error).to_be_hidden()
    page.click("text=Upload and preview")
    expect(page.locator("#preview-table")).to_contain_text("Capital of France, in one word?")
    assert len(posts) == 1


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_background_import_shows_progress_until_the_worker_is_done(login, live_server, settings):
    settings.DATASET_SYNC_MAX_ROWS = 10
    task = Task.objects.create(slug="big", name="Big")
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/upload/")
    data = samples.numbered_csv(60)
    page.set_input_files(
        "input[name=file]", files=[{"name": "big.csv", "mimeType": "text/csv", "buffer": data}]
    )
    page.click("text=Upload and preview")
    page.select_option("select[name=id_column]", "id")
    page.click("#import-button")

    expect(page.locator("#import-progress")).to_contain_text("Waiting for a worker")
    expect(page.locator("#dataset-status")).to_have_text("Importing")
    result = run_burst_worker()
    assert result.returncode == 0, result.stdout + result.stderr
    # The page polls, sees the import finished, and reloads itself with the items.
    expect(page.locator("#dataset-status")).to_have_text("Ready", timeout=60_000)
    expect(page.locator("#item-table tbody tr")).to_have_count(50)
    expect(page.locator("#tag-counts")).to_contain_text("math · 30")
    expect(page.locator("#import-progress")).to_have_count(0)


XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_upload_an_excel_workbook_choose_its_second_sheet_map_and_import(login, live_server):
    task = Task.objects.create(slug="excel-qa", name="Excel QA")
    workbook = samples.xlsx_bytes(
        {
            "Cover": [["title"], ["Quarterly quiz"]],
            "Questions": [
                ["id", "question", "answer", "subject"],
                [1, "2+2?", 4, "math"],
                [2, "Capital of Peru?", "Lima", "geo"],
                [],
                [3, "0.1+0.2?", 0.1 + 0.2, "math"],
            ],
        }
    )
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/upload/")
    page.set_input_files(
        "input[name=file]", files=[{"name": "quiz.xlsx", "mimeType": XLSX_MIME, "buffer": workbook}]
    )
    page.click("text=Upload and preview")
    expect(page.locator("#detected-format")).to_have_text("XLSX")
    expect(page.locator("#read-sheet")).to_have_text("Cover")
    expect(page.locator("#preview-table")).to_contain_text("Quarterly quiz")

    page.select_option("#sheet-choice", "Questions")
    page.click("#read-again-button")
    expect(page.locator("#read-sheet")).to_have_text("Questions")
    expect(page.locator("#preview-table")).to_contain_text("Capital of Peru?")
    expect(page.locator("#preview-table")).not_to_contain_text("Quarterly quiz")
    expect(page.locator("select[name=id_column]")).to_have_value("id")
    page.fill("input[name=name]", "quiz")
    page.select_option("select[name=reference_column]", "answer")
    page.select_option("select[name=tags_column]", "subject")
    page.uncheck("#input-columns input[value=subject]")
    page.click("#import-button")

    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    dataset = Dataset.objects.get()
    assert (dataset.sheet, dataset.format) == ("Questions", "xlsx")
    expect(page.locator("#row-count")).to_have_text("3")
    expect(page.locator("#dataset-sheet")).to_have_text("Questions")
    expect(page.locator("#item-table tbody tr")).to_have_count(3)
    expect(page.locator("#item-table")).to_contain_text("Capital of Peru?")
    expect(page.locator("#tag-counts")).to_contain_text("math · 2")
    assert [item.reference for item in dataset.items.order_by("position")] == ["4", "Lima", "0.3"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_upload_a_parquet_file_end_to_end(login, live_server):
    task = Task.objects.create(slug="parquet-qa", name="Parquet QA")
    data = samples.parquet_bytes(
        {"uid": ["p1", "p2"], "prompt": ["Say hi", "Say bye"], "score": [3, None]}
    )
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/upload/")
    page.set_input_files(
        "input[name=file]",
        files=[{"name": "prompts.parquet", "mimeType": "application/octet-stream", "buffer": data}],
    )
    page.click("text=Upload and preview")
    expect(page.locator("#detected-format")).to_have_text("PARQUET")
    expect(page.locator("#sheet-choice")).to_have_count(0)
    expect(page.locator("#preview-table")).to_contain_text("Say bye")
    page.select_option("select[name=id_column]", "uid")
    page.click("#import-button")

    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    expect(page.locator("#row-count")).to_have_text("2")
    expect(page.locator("#item-table")).to_contain_text("Say hi")
    dataset = Dataset.objects.get()
    assert dataset.format == "parquet"
    assert dataset.items.get(key="p1").fields == {"uid": "p1", "prompt": "Say hi", "score": "3"}
