"""The upload → preview → mapping → dataset page flow, errors on the page, browsing, downloads."""

import csv
import html
import io
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.datasets.importing import import_dataset
from apps.datasets.models import Dataset, Item, Task
from apps.datasets.readers import read_table
from apps.runs.models import Run
from tests.base import make_user
from tests.datasets import samples

pytestmark = pytest.mark.django_db


def upload(client, task: Task, data: bytes, file_name: str, **extra):
    url = reverse("datasets:dataset-upload", args=[task.slug])
    return client.post(url, {"file": SimpleUploadedFile(file_name, data), **extra})


def staged_url(response) -> str:
    assert response.status_code == 302, response.content.decode()[:2000]
    return response["Location"]


def map_and_import(client, url: str, **fields):
    page = client.get(url)
    initial = page.context["form"].initial
    data = {
        "name": initial["name"],
        "format": initial["format"],
        **{k: v for k, v in fields.items() if v is not None},
    }
    return client.post(url, data)


def text(response) -> str:
    return response.content.decode()


# ---- tasks --------------------------------------------------------------------------------
def test_task_pages_list_datasets_runs_and_offer_upload(reviewer_client, viewer_user, task):
    dataset = import_dataset(task, "mmlu", samples.MMLU_CSV, {"response_columns": ["response"]})
    Run.objects.create(task=task, kind=Run.Kind.GENERATION, dataset=dataset, label="gpt-x")
    page = text(reviewer_client.get(reverse("datasets:task-detail", args=[task.slug])))
    assert "mmlu v1" in page and "Ready" in page and "frozen" in page and "gpt-x" in page
    assert reverse("datasets:dataset-upload", args=[task.slug]) in page
    viewer = Client()
    viewer.force_login(viewer_user)
    viewer_page = text(viewer.get(reverse("datasets:task-detail", args=[task.slug])))
    assert "mmlu v1" in viewer_page and 'id="upload-dataset"' not in viewer_page
    listing = text(reviewer_client.get(reverse("datasets:task-list")))
    assert re.search(
        r'support-qa</a></td><td>Support QA</td>\s*<td class="num">1</td><td class="num">1</td>',
        listing,
    )


# ---- upload, preview, mapping -------------------------------------------------------------
def test_upload_preview_map_and_import(reviewer_client, task, staged_files):
    response = upload(reviewer_client, task, samples.MMLU_CSV, "mmlu-dev.csv")
    url = staged_url(response)
    assert len(staged_files()) == 2  # the file and its note
    page = reviewer_client.get(url)
    html = text(page)
    assert "中国的首都是哪里？" in html and 'id="detected-format">CSV' in html
    assert "3 rows" in html and "7 columns" in html
    initial = page.context["form"].initial
    assert initial["name"] == "mmlu-dev"
    assert initial["reference_column"] == "answer" and initial["response_columns"] == ["response"]
    response = reviewer_client.post(
        url,
        {
            "name": "mmlu",
            "format": "csv",
            "reference_column": "answer",
            "response_columns": ["response"],
            "input_columns": ["question", "A", "B", "C", "D"],
        },
    )
    dataset = Dataset.objects.get()
    assert response["Location"] == dataset.get_absolute_url()
    assert (dataset.name, dataset.row_count, dataset.status) == ("mmlu", 3, "ready")
    assert dataset.file_name == "mmlu-dev.csv" and dataset.created_by.username == "reviewer"
    assert staged_files() == []  # the staged upload is cleaned up
    page = text(reviewer_client.get(dataset.get_absolute_url()))
    assert "Imported 3 items into mmlu v1" in page
    assert "Response columns can be judged without generating" in page


def test_format_is_detected_and_can_be_overridden_on_the_preview(reviewer_client, task):
    data = b'{"q": "a"}\n{"q": "b"}\n'
    url = staged_url(upload(reviewer_client, task, data, "rows.txt"))
    assert 'id="detected-format">JSONL' in text(reviewer_client.get(url))
    page = text(reviewer_client.get(url + "?format=json"))
    assert "The JSON is not valid at line 2, column 1" in page
    page = text(reviewer_client.get(url + "?format=csv"))
    assert 'id="detected-format">CSV' in page
    # The chosen format is the one imported.
    response = reviewer_client.post(url, {"name": "raw", "format": "csv"})
    assert response.status_code == 302
    dataset = Dataset.objects.get()
    assert dataset.format == "csv" and dataset.columns == ['{"q": "a"}']


def test_format_chosen_on_the_upload_form_wins(reviewer_client, task):
    url = staged_url(upload(reviewer_client, task, b"[a]\nx\n", "x.csv", format="csv"))
    assert 'id="detected-format">CSV' in text(reviewer_client.get(url))


ERROR_FILES = [
    (b"", "empty.csv", "The file is empty."),
    (b"question,answer\n", "header.csv", "only a header row (question, answer)"),
    ("q\ncafé\n".encode("cp1252"), "latin.csv", "line 2 has the byte 0xE9"),
    (b'{"a": 1}\n{"a": 1\n', "broken.jsonl", "Line 2 is not valid JSON"),
    (b"a,b\n1,2\n3\n", "ragged.csv", "Row 3 (line 3) has 1 fields, but the header has 2"),
    (b'{"rows": []}', "obj.json", "not a list of objects"),
    (b'{"a": 1}\ntrue\n', "lines.jsonl", "Line 2 is true/false, not a JSON object"),
    (b"a,b\n\x00\x00\n", "nul.csv", "NUL bytes (the first on line 2)"),
]


@pytest.mark.parametrize(("data", "name", "expected"), ERROR_FILES, ids=[e[1] for e in ERROR_FILES])
def test_each_file_error_is_shown_on_the_upload_page(
    reviewer_client, task, staged_files, data, name, expected
):
    response = upload(reviewer_client, task, data, name)
    assert response.status_code == 200
    html = text(response)
    assert 'id="upload-error"' in html and expected in html
    assert name in html  # the message names the file
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0
    assert staged_files() == []


def test_a_json_named_file_is_never_read_as_csv_but_a_bare_name_is_sniffed(
    reviewer_client, task, staged_files
):
    data = b'1\n"two"\n[3]\n'  # one CSV column to a sniffer; three wrong lines to JSONL
    html = text(upload(reviewer_client, task, data, "x.jsonl"))
    assert "x.jsonl: Line 1 is a number, not a JSON object; each line of a JSONL file" in html
    html = text(upload(reviewer_client, task, data, "x.json"))
    assert "x.json: The JSON is not valid at line 2, column 1: Extra data." in html
    assert "The file starts with a number and goes on after it" in html
    html = text(upload(reviewer_client, task, b'"hello"', "y.json"))
    assert "y.json: The JSON file holds a string, not a list of objects. Expected [{" in html
    assert Dataset.objects.count() == 0 and staged_files() == []
    # A name that says nothing is still read by its content.
    url = staged_url(upload(reviewer_client, task, data, "export"))
    assert 'id="detected-format">CSV' in text(reviewer_client.get(url))
    url = staged_url(upload(reviewer_client, task, b'{"q": "a"}\n{"q": "b"}\n', "export"))
    assert 'id="detected-format">JSONL' in text(reviewer_client.get(url))
    assert map_and_import(reviewer_client, url).status_code == 302
    assert Dataset.objects.get().format == "jsonl"


def test_the_utf8_fix_is_spelled_out_on_the_page(reviewer_client, task):
    html = text(upload(reviewer_client, task, "q\ncafé\n".encode("cp1252"), "x.csv"))
    assert "Save it as UTF-8 (in Excel: File → Save As → “CSV UTF-8”)" in html


def test_a_file_over_the_size_limit_is_refused_before_staging(
    reviewer_client, task, settings, staged_files
):
    settings.DATASET_MAX_UPLOAD_BYTES = 64
    html = text(upload(reviewer_client, task, samples.numbered_csv(10), "big.csv"))
    assert "the limit is 64 bytes" in html
    assert staged_files() == [] and Dataset.objects.count() == 0


def test_duplicate_ids_are_shown_on_the_mapping_page(reviewer_client, task, staged_files):
    data = samples.csv_bytes(["id", "q"], [["x1", "a"], ["x2", "b"], ["x1", "c"]])
    url = staged_url(upload(reviewer_client, task, data, "dups.csv"))
    response = reviewer_client.post(url, {"name": "dups", "format": "csv", "id_column": "id"})
    assert response.status_code == 200
    assert "The id &#x27;x1&#x27; in column &#x27;id&#x27; appears 2 times: row 2, row 4." in text(
        response
    )
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0
    assert len(staged_files()) == 2  # kept, so the mapping can be fixed and sent again
    assert reviewer_client.post(url, {"name": "dups", "format": "csv"}).status_code == 302
    assert Item.objects.count() == 3 and staged_files() == []


def test_a_mapping_naming_a_column_twice_is_refused(reviewer_client, task):
    url = staged_url(upload(reviewer_client, task, samples.MMLU_CSV, "m.csv"))
    response = reviewer_client.post(
        url,
        {
            "name": "m",
            "format": "csv",
            "reference_column": "answer",
            "response_columns": ["answer"],
        },
    )
    assert "cannot be both the reference column and a response column" in text(response)
    assert Dataset.objects.count() == 0


def test_a_staged_upload_belongs_to_its_uploader_and_task(reviewer_client, task):
    url = staged_url(upload(reviewer_client, task, samples.MMLU_CSV, "m.csv"))
    someone_else = Client()
    someone_else.force_login(make_user("reviewer", "someone-else"))
    response = someone_else.get(url)
    assert response.status_code == 302 and response["Location"].endswith("/upload/")
    other = Task.objects.create(slug="other", name="Other")
    token = url.rstrip("/").rsplit("/", 1)[1]
    wrong_task = reverse("datasets:dataset-map", args=[other.slug, token])
    assert reviewer_client.get(wrong_task).status_code == 302
    forged = reverse("datasets:dataset-map", args=[task.slug, "..%2F..%2Fsecret"])
    assert reviewer_client.get(forged).status_code == 302
    assert reviewer_client.get(url).status_code == 200  # still there for its owner


def test_viewers_cannot_upload(viewer_client, task):
    assert (
        viewer_client.get(reverse("datasets:dataset-upload", args=[task.slug])).status_code == 403
    )
    response = upload(viewer_client, task, samples.MMLU_CSV, "m.csv")
    assert response.status_code == 403 and Dataset.objects.count() == 0


# ---- mapping memory and versions through the pages ----------------------------------------
def test_the_last_mapping_is_prefilled_for_the_next_upload(reviewer_client, task):
    url = staged_url(upload(reviewer_client, task, samples.NLI_JSONL, "nli.jsonl"))
    reviewer_client.post(
        url,
        {
            "name": "nli",
            "format": "jsonl",
            "id_column": "uid",
            "reference_column": "hypothesis",  # unusual, so a guess could not produce it
            "tags_column": "tags",
            "input_columns": ["premise"],
        },
    )
    rows = [{k: v for k, v in row.items() if k != "tags"} for row in samples.NLI_ROWS]
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()  # no tags column now
    page = reviewer_client.get(staged_url(upload(reviewer_client, task, data, "nli-2.jsonl")))
    initial = page.context["form"].initial
    assert initial["id_column"] == "uid" and initial["reference_column"] == "hypothesis"
    assert initial["input_columns"] == ["premise"] and initial["tags_column"] is None
    assert re.search(r'<option value="hypothesis" selected>', text(page))


def test_after_another_upload_a_named_reference_is_not_offered_as_an_input(reviewer_client, task):
    """#28.6: question/answer/response after a file where `answer` was an input: the page
    offered `answer` as an input (the reference leaked into prompts) and no response column."""
    first = samples.csv_bytes(["input", "answer", "label"], [["2+2?", "four", "4"]])
    url = staged_url(upload(reviewer_client, task, first, "grading.csv"))
    reviewer_client.post(url, {"name": "grading", "format": "csv", "reference_column": "label",
                               "input_columns": ["input", "answer"]})  # fmt: skip
    data = samples.csv_bytes(["question", "answer", "response"], [["2+2?", "4", "four"]])
    url = staged_url(upload(reviewer_client, task, data, "qa.csv"))
    page = reviewer_client.get(url)
    initial = page.context["form"].initial
    assert (initial["reference_column"], initial["input_columns"]) == ("answer", ["question"])
    assert initial["response_columns"] == ["response"]
    # Ticked as an input anyway: imported as asked, and the page says what that means.
    response = reviewer_client.post(
        url, {"name": "qa", "format": "csv", "input_columns": ["question", "answer"]}, follow=True
    )
    assert Dataset.objects.get(name="qa").input_columns == ["question", "answer"]
    assert (
        "Column 'answer' is named like a reference answer but mapped as an input: prompts show "
        "it to the model." in html.unescape(text(response))
    )


def test_the_page_names_columns_left_out_of_the_inputs_for_their_name(reviewer_client, task):
    data = samples.csv_bytes(["question", "answer", "gold_label"], [["2+2?", "4", "4"]])
    page = text(reviewer_client.get(staged_url(upload(reviewer_client, task, data, "g.csv"))))
    note = re.search(r'<p class="note" id="reference-like-note">(.*?)</p>', page, re.S)
    assert note and "<code>gold_label</code>" in note.group(1)
    assert "<code>answer</code>" not in note.group(1)  # the reference itself is not listed


def test_upload_corrected_file_makes_a_linked_version(reviewer_client, task):
    first = import_dataset(task, "mmlu", samples.MMLU_CSV, {"reference_column": "answer"})
    Run.objects.create(task=task, kind=Run.Kind.GENERATION, dataset=first)
    page = text(reviewer_client.get(first.get_absolute_url()))
    assert 'id="frozen"' in page and "Delete</button>" not in page
    assert "A corrected file becomes a new version" in page
    corrected_link = reverse("datasets:dataset-upload", args=[task.slug]) + "?name=mmlu"
    assert corrected_link in page
    form_page = reviewer_client.get(corrected_link)
    assert form_page.context["form"]["name"].value() == "mmlu"
    url = staged_url(upload(reviewer_client, task, samples.MMLU_CSV, "mmlu-fixed.csv", name="mmlu"))
    preview = text(reviewer_client.get(url))
    assert "this upload becomes version 2" in preview
    reviewer_client.post(url, {"name": "mmlu", "format": "csv", "reference_column": "answer"})
    second = Dataset.objects.get(version=2)
    assert second.previous == first and first.items.count() == 3
    page = text(reviewer_client.get(second.get_absolute_url()))
    assert f'href="{first.get_absolute_url()}" id="previous-version"' in page


def test_delete_refuses_a_frozen_dataset_and_removes_an_unused_one(reviewer_client, task):
    frozen = import_dataset(task, "a", samples.MMLU_CSV, {})
    Run.objects.create(task=task, kind=Run.Kind.GENERATION, dataset=frozen)
    response = reviewer_client.post(
        reverse("datasets:dataset-delete", args=[frozen.pk]), follow=True
    )
    assert "is used by a run" in text(response) and Dataset.objects.filter(pk=frozen.pk).exists()
    unused = import_dataset(task, "b", samples.MMLU_CSV, {})
    reviewer_client.post(reverse("datasets:dataset-delete", args=[unused.pk]))
    assert not Dataset.objects.filter(pk=unused.pk).exists()
    assert Item.objects.filter(dataset_id=unused.pk).count() == 0


# ---- the dataset page and the item browser ------------------------------------------------
@pytest.fixture
def numbered(task) -> Dataset:
    return import_dataset(
        task,
        "numbered",
        samples.numbered_csv(120),
        {"id_column": "id", "tags_column": "tags", "reference_column": "answer"},
    )


def keys(response) -> list[str]:
    return re.findall(r'/items/\d+/">(q\d{4})</a>', text(response))


def test_dataset_page_shows_size_columns_mapping_and_tag_counts(reviewer_client, numbered):
    page = text(reviewer_client.get(numbered.get_absolute_url()))
    assert '<strong id="row-count">120</strong> items' in page
    assert '<td>id</td><td><span class="badge role-id">id</span>' in page
    assert '<td>answer</td><td><span class="badge role-reference">reference</span>' in page
    assert "math · 60" in page and "history · 60" in page and "hard · 60" in page


def test_pages_follow_positions_forward_and_back(reviewer_client, numbered):
    url = numbered.get_absolute_url()
    first = reviewer_client.get(url)
    assert keys(first) == [f"q{i:04d}" for i in range(50)]
    assert "?after=49" in text(first) and 'id="previous-page"' not in text(first)
    third = reviewer_client.get(url + "?after=99")
    assert keys(third) == [f"q{i:04d}" for i in range(100, 120)] and 'id="next-page"' not in text(
        third
    )
    assert "?before=100" in text(third)
    second = reviewer_client.get(url + "?before=100")
    assert keys(second) == [f"q{i:04d}" for i in range(50, 100)]
    assert "?before=50" in text(second) and "?after=99" in text(second)


def test_search_and_tag_filter_narrow_the_items(reviewer_client, numbered):
    url = numbered.get_absolute_url()
    assert keys(reviewer_client.get(url + "?q=QUESTION+NUMBER+11")) == [
        "q0011",
        "q0110",
        "q0111",
        "q0112",
        "q0113",
        "q0114",
        "q0115",
        "q0116",
        "q0117",
        "q0118",
        "q0119",
    ]
    hard = reviewer_client.get(url + "?tag=hard")
    assert keys(hard) == [f"q{i:04d}" for i in range(1, 100, 2)]
    assert "60 items tagged “hard”" in text(hard) and "tag=hard&amp;after=99" in text(hard)
    assert keys(reviewer_client.get(url + "?tag=hard&after=99")) == [
        f"q{i:04d}" for i in range(101, 120, 2)
    ]
    assert keys(reviewer_client.get(url + "?tag=math&q=number+2")) == [
        "q0002",
        "q0020",
        "q0022",
        "q0024",
        "q0026",
        "q0028",
    ]
    assert "No items match." in text(reviewer_client.get(url + "?q=nothing+like+this"))


def test_browsing_never_counts_over_the_items(reviewer_client, numbered):
    """The unfiltered and per-tag totals come from the import; search shows no total at all."""
    url = numbered.get_absolute_url()
    for query in ("", "?q=number", "?tag=math", "?tag=math&q=1&after=10"):
        with CaptureQueriesContext(connection) as queries:
            assert reviewer_client.get(url + query).status_code == 200
        assert not [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper()], query


def test_htmx_requests_get_only_the_item_list(reviewer_client, numbered):
    response = reviewer_client.get(
        numbered.get_absolute_url() + "?q=number+7",
        headers={"HX-Request": "true", "HX-Target": "items"},
    )
    html = text(response)
    assert html.lstrip().startswith('<div id="items">') and "<html" not in html
    assert "q0007" in html


def test_item_view_escapes_every_field_and_folds_long_text(reviewer_client, task):
    long_text = "line\n" * 40
    rows = [
        {
            "id": "x<1>",
            "prompt": "<script>alert(1)</script>",
            "long": long_text,
            "meta": {"k": "<b>"},
        }
    ]
    data = json.dumps(rows).encode()
    dataset = import_dataset(task, "hostile", data, {"id_column": "id"}, file_name="h.json")
    page = text(reviewer_client.get(reverse("datasets:item-detail", args=[dataset.pk, 0])))
    assert (
        "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    )
    assert "x&lt;1&gt;" in page
    meta_block = page.split('data-field="meta"')[1]
    assert "&lt;b&gt;" in meta_block and "<b>" not in meta_block
    # Long text folds to a screenful, its length on the label that opens it in place.
    long_block = page.split('data-field="long"')[1].split('data-field="meta"')[0]
    assert "is-long" in long_block and "Show all 200 characters" in long_block
    assert long_block.count("line") >= 40
    prompt_block = page.split('data-field="prompt"')[1].split('data-field="long"')[0]
    assert "is-long" not in prompt_block
    listing = text(reviewer_client.get(dataset.get_absolute_url()))
    assert "<script>alert(1)</script>" not in listing


def test_item_view_links_neighbours(reviewer_client, numbered):
    page = text(reviewer_client.get(reverse("datasets:item-detail", args=[numbered.pk, 5])))
    assert reverse("datasets:item-detail", args=[numbered.pk, 4]) in page
    assert reverse("datasets:item-detail", args=[numbered.pk, 6]) in page
    assert (
        reviewer_client.get(reverse("datasets:item-detail", args=[numbered.pk, 999])).status_code
        == 404
    )


# ---- downloads ----------------------------------------------------------------------------
def download(client, dataset: Dataset, fmt: str) -> bytes:
    response = client.get(reverse("datasets:dataset-download", args=[dataset.pk, fmt]))
    assert response.status_code == 200 and response.streaming
    assert f"v{dataset.version}.{fmt}" in response["Content-Disposition"]
    return b"".join(response.streaming_content)


def test_csv_download_round_trips_and_neutralises_formulas(viewer_client, task):
    dataset = import_dataset(task, "mmlu", samples.MMLU_CSV, {"response_columns": ["response"]})
    data = download(viewer_client, dataset, "csv")
    assert data.startswith("\ufeff".encode())  # Excel reads it as UTF-8
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert rows[0] == dataset.columns
    assert rows[3][2:5] == ["'=1+1", "'-3", "'@SUM(A1)"]
    assert rows[3][6] == "'+cmd|' /C calc'!A0"
    assert (
        rows[2][0] == "中国的首都是哪里？"
        and rows[1][6] == "The answer is C.\r\nBecause 7 is prime."
    )
    # Importing the download gives the same items, formula cells keeping their quote.
    again = read_table(data, file_name="again.csv")
    original = read_table(samples.MMLU_CSV, file_name="mmlu.csv")
    assert again.columns == original.columns
    for before, after in zip(original.rows, again.rows, strict=True):
        for column in original.columns:
            value = before[column]
            expected = "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value
            assert after[column] == expected


def test_jsonl_download_round_trips_exactly(viewer_client, task):
    dataset = import_dataset(task, "sft", samples.INSTRUCTION_JSONL, {}, file_name="s.jsonl")
    data = download(viewer_client, dataset, "jsonl")
    assert read_table(data, file_name="back.jsonl").rows == samples.INSTRUCTION_ROWS
    again = import_dataset(task, "sft", data, {}, file_name="back.jsonl")
    assert list(again.items.values_list("fields", flat=True)) == samples.INSTRUCTION_ROWS


def test_json_values_are_written_as_json_in_csv(viewer_client, task):
    dataset = import_dataset(task, "qa", samples.JSON_ARRAY, {}, file_name="qa.json")
    rows = list(
        csv.reader(io.StringIO(download(viewer_client, dataset, "csv").decode("utf-8-sig")))
    )
    assert rows[1] == ["1", "2+2?", '["4", "four"]', '{"source": "arith"}']
    assert rows[3][3] == ""  # null


def test_unknown_download_format_is_404(viewer_client, numbered):
    assert (
        viewer_client.get(
            reverse("datasets:dataset-download", args=[numbered.pk, "xlsx"])
        ).status_code
        == 404
    )


def test_abandoned_staged_uploads_are_swept_after_a_day(reviewer_client, task, staged_files):
    import os
    import time

    from apps.datasets.uploads import sweep

    staged_url(upload(reviewer_client, task, samples.MMLU_CSV, "m.csv"))
    assert sweep() == 0 and len(staged_files()) == 2
    old = time.time() - 2 * 24 * 3600
    for path in staged_files():
        os.utime(path, (old, old))
    assert sweep() == 1 and staged_files() == []


def test_dataset_list_shows_every_dataset(viewer_client, task):
    import_dataset(task, "mmlu", samples.MMLU_CSV, {})
    page = text(viewer_client.get(reverse("datasets:dataset-list")))
    assert "mmlu v1" in page and "support-qa" in page and "Ready" in page


def test_a_corrected_file_keeps_its_datasets_mapping_not_the_tasks_last(reviewer_client, task):
    """#11.8: after another dataset was imported with another mapping, "Upload corrected file"
    of the first one offers the first one's mapping."""
    header = ["question", "gold", "label", "model_out"]
    data = samples.csv_bytes(header, [["2+2?", "4", "four", "4"], ["3+3?", "6", "six", "7"]])
    import_dataset(
        task,
        "sums",
        data,
        {"reference_column": "gold", "input_columns": ["question"], "response_columns": []},
    )
    import_dataset(
        task,
        "other",
        data,
        {"reference_column": "label", "input_columns": ["question"], "response_columns": []},
    )
    assert task.last_mapping["reference_column"] == "label"
    url = staged_url(upload(reviewer_client, task, data, "sums-fixed.csv", name="sums"))
    initial = reviewer_client.get(url).context["form"].initial
    assert initial["reference_column"] == "gold"
    # A new name still starts from the task's last mapping.
    url = staged_url(upload(reviewer_client, task, data, "third.csv", name="third"))
    assert reviewer_client.get(url).context["form"].initial["reference_column"] == "label"


def test_response_columns_are_shown_and_offered_for_judging(reviewer_client, task):
    """#11.8: the item table hid response columns and the page offered no way to judge them."""
    data = samples.csv_bytes(
        ["question", "answer", "model_out"], [["2+2?", "4", "five"], ["3+3?", "6", "six"]]
    )
    dataset = import_dataset(
        task,
        "answers",
        data,
        {
            "reference_column": "answer",
            "input_columns": ["question"],
            "response_columns": ["model_out"],
        },
    )
    page = reviewer_client.get(dataset.get_absolute_url())
    table = re.search(r'<table id="item-table">.*?</table>', text(page), re.S).group(0)
    assert "<th>model_out</th>" in table and "five" in table
    source = f"column:{dataset.pk}:model_out"
    links = re.findall(r'href="([^"]+)">Judge column model_out</a>', text(page))
    assert len(links) == 1 and source.replace(":", "%3A") in links[0]
    viewer = Client()
    viewer.force_login(make_user("viewer"))
    assert "Judge column" not in text(viewer.get(dataset.get_absolute_url()))

    # Through the judges list and "New judge", the new judge's start form has the column chosen.
    judges = text(reviewer_client.get(links[0].replace("&amp;", "&")))
    new_judge = re.search(r'id="new-judge" href="([^"]+)"', judges).group(1).replace("&amp;", "&")
    fields = {"name": "exact", "kind": "metric", "metric": "exact_match", "n_iter": "1"}
    fields |= {"aggregation": "mean", "label_type": "upper", "label_count": "4"}
    saved = reviewer_client.post(new_judge, fields)
    assert saved.status_code == 302, text(saved)[:3000]
    form = reviewer_client.get(saved["Location"]).context["form"]
    assert form["responses"].value() == source


def test_columns_left_out_of_the_item_table_are_named_under_it(task, reviewer_client) -> None:
    """Option columns B–D were hidden from the dataset page with no note (#28.6)."""
    dataset = import_dataset(task, "mmlu", samples.MMLU_CSV, {"reference_column": "answer"})
    page = text(reviewer_client.get(dataset.get_absolute_url()))
    shown = re.search(r'<table id="item-table"><thead><tr>(.*?)</tr>', page, re.S)[1]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", shown)
    assert headers[:4] == ["#", "Key", "question", "A"] and "B" not in headers
    note = re.search(r'<p class="muted small" id="more-columns">(.*?)</p>', page, re.S)[1]
    assert "4 more (B, C, D, response) are on each item&#x27;s page" in note or (
        "4 more (B, C, D, response) are on each item's page" in note
    )
