"""A big file is previewed from its first PREVIEW_BYTES; a record longer than that window still
maps and imports through the page (upload → preview → mapping → import), as the CLI imports it."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.datasets import jobs, uploads
from apps.datasets.models import Dataset
from apps.datasets.readers import read_head
from tests.datasets import samples

pytestmark = pytest.mark.django_db


def upload_and_preview(client, task, data: bytes, file_name: str):
    response = client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile(file_name, data)},
    )
    assert response.status_code == 302, response.content.decode()[-3000:]
    return response["Location"], client.get(response["Location"])


def map_and_import(client, url: str, page) -> Dataset:
    """Post the mapping the page suggests, then run the import job the page handed over."""
    initial = page.context["form"].initial
    data = {key: value for key, value in initial.items() if value is not None}
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[-3000:]
    dataset = Dataset.objects.get()
    assert dataset.is_importing  # only the start was read: the worker counts and checks it all
    jobs.import_dataset_job(dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == "ready", dataset.error
    return dataset


def qa_lines(first_document: str, count: int) -> bytes:
    rows = [{"id": "doc-1", "document": first_document, "question": "q1", "answer": "a1"}]
    rows += [
        {"id": f"doc-{n}", "document": f"short {n}", "question": f"q{n}", "answer": f"a{n}"}
        for n in range(2, count + 1)
    ]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def test_a_jsonl_whose_first_line_is_longer_than_the_window_maps_and_imports_whole(
    reviewer_client, task, monkeypatch, staged_files
):
    monkeypatch.setattr(uploads, "PREVIEW_BYTES", 2000)
    document = "长文" * 2000 + " the end"  # ~12 KB of UTF-8 on line 1
    url, page = upload_and_preview(reviewer_client, task, qa_lines(document, 30), "docs.jsonl")
    html = page.content.decode()
    assert 'id="preview-note"' in html
    assert (
        "Line 1 is longer than the 2.0 KB preview window, so the preview shows no rows; "
        "the columns were read from it whole. The import reads the whole file."
    ) in html
    assert page.context["preview"] == []
    form = page.context["form"]
    assert form.columns == ["id", "document", "question", "answer"]
    assert form.initial["id_column"] == "id" and form.initial["reference_column"] == "answer"

    dataset = map_and_import(reviewer_client, url, page)
    assert dataset.row_count == 30 and dataset.columns == ["id", "document", "question", "answer"]
    first = dataset.items.get(position=0)
    assert first.key == "doc-1" and first.fields["document"] == document
    assert staged_files() == []


def test_a_line_cut_by_the_window_is_named_under_the_rows_that_fit(
    reviewer_client, task, monkeypatch
):
    monkeypatch.setattr(uploads, "PREVIEW_BYTES", 2000)
    short = b'{"id": "doc-0", "document": "short", "question": "q0", "answer": "a0"}\n'
    url, page = upload_and_preview(
        reviewer_client, task, short + qa_lines("x" * 5000, 3), "docs.jsonl"
    )
    assert [row[0] for row in page.context["preview"]] == ["doc-0"]
    assert (
        "The preview shows the first row: the file is larger than the 2.0 KB preview window, "
        "and line 2 is the first that does not fit in it."
    ) in page.content.decode()
    assert map_and_import(reviewer_client, url, page).row_count == 4


def test_a_csv_whose_first_row_is_longer_than_the_window_maps_and_imports(
    reviewer_client, task, monkeypatch
):
    monkeypatch.setattr(uploads, "PREVIEW_BYTES", 2000)
    data = samples.csv_bytes(
        ["id", "question", "answer"], [["r1", "x" * 5000, "a1"], ["r2", "q2", "a2"]]
    )
    url, page = upload_and_preview(reviewer_client, task, data, "long.csv")
    assert page.context["preview"] == [] and page.context["form"].columns == [
        "id",
        "question",
        "answer",
    ]
    assert "The preview shows no rows" in page.content.decode()
    assert "row 2 is the first that does not fit in it" in page.content.decode()
    dataset = map_and_import(reviewer_client, url, page)
    assert dataset.row_count == 2 and len(dataset.items.get(key="r1").fields["question"]) == 5000


def test_a_header_longer_than_the_window_gives_the_columns(tmp_path):
    columns = [f"column_{n}" for n in range(200)]
    path = tmp_path / "wide.csv"
    path.write_bytes(samples.csv_bytes(columns, [[str(n) for n in range(200)]] * 5))
    table = read_head(path, max_bytes=500)
    assert table.columns == columns and table.rows == [] and not table.complete
    assert table.preview_note.startswith("The header row is longer than the 500 bytes preview")


def test_a_first_line_longer_than_the_real_4_mb_window(reviewer_client, task, staged_files):
    assert uploads.PREVIEW_BYTES == 4 * 1024 * 1024
    document = "0123456789abcdef" * (uploads.PREVIEW_BYTES // 16 + 4096)  # 4 MB + 64 KB
    url, page = upload_and_preview(reviewer_client, task, qa_lines(document, 3), "long.jsonl")
    assert "Line 1 is longer than the 4.0 MB preview window" in page.content.decode()
    assert page.context["form"].columns == ["id", "document", "question", "answer"]
    dataset = map_and_import(reviewer_client, url, page)
    assert dataset.row_count == 3
    assert dataset.items.get(key="doc-1").fields["document"] == document
    assert staged_files() == []
