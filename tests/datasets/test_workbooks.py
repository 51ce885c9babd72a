"""Excel (.xlsx) and Parquet files: values arrive as the user saw them, rows are numbered as the
user finds them, bad files are named for what they are, and imports stay atomic.

Every file here is a real one, written in the test by openpyxl or pyarrow."""

import datetime
import decimal
import io
import zipfile

import pyarrow
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.datasets import importing
from apps.datasets.importing import Mapping, fill_dataset, import_dataset
from apps.datasets.models import Dataset, Item
from apps.datasets.readers import (
    DatasetError,
    column_letter,
    number_display,
    read_head,
    read_table,
    workbook_sheets,
)
from tests.base import run_burst_worker
from tests.datasets.samples import parquet_bytes, xlsx_bytes


def error_of(data: bytes, name: str, **options) -> str:
    with pytest.raises(DatasetError) as caught:
        read_table(data, file_name=name, **options)
    return str(caught.value)


# ---- Excel: values as the sheet showed them -----------------------------------------------
def test_excel_numbers_dates_and_text_arrive_as_the_user_saw_them():
    data = xlsx_bytes(
        {
            "Data": [
                [
                    "id",
                    "count",
                    "share",
                    "sum",
                    "day",
                    "moment",
                    "clock",
                    "hours",
                    "ok",
                    "code",
                    "pct",
                    "price",
                    "big",
                    "note",
                ],
                [
                    1,
                    3,
                    0.1,
                    0.1 + 0.2,
                    datetime.date(2024, 1, 5),
                    datetime.datetime(2024, 1, 5, 13, 45),
                    datetime.time(9, 30),
                    datetime.timedelta(hours=30),
                    True,
                    "007",
                    0.15,
                    1234.5,
                    1234567890123,
                    None,
                ],
                [
                    2,
                    -7,
                    2.5,
                    1e-05,
                    None,
                    datetime.datetime(2024, 1, 5, 0, 0, 0, 250_000),
                    None,
                    None,
                    False,
                    "@not a formula",
                    None,
                    None,
                    None,
                    "终",
                ],
            ]
        },
        formats={"K2": "0%", "L2": '"$"#,##0.00', "C3": "0.00", "D3": "0.00E+00"},
    )
    table = read_table(data, file_name="scores.xlsx")
    assert (table.format, table.sheet, table.sheets) == ("xlsx", "Data", ["Data"])
    first, second = table.rows
    assert first == {
        "id": "1",
        "count": "3",  # not "3.0": Excel keeps every number as a float
        "share": "0.1",
        "sum": "0.3",  # 0.30000000000000004 shows as 0.3 (15 significant digits)
        "day": "2024-01-05",  # a date cell: no 00:00:00
        "moment": "2024-01-05T13:45:00",
        "clock": "09:30:00",
        "hours": "30:00:00",
        "ok": "TRUE",
        "code": "007",  # text stays text
        "pct": "15%",  # its number format, as the sheet shows it
        "price": "$1,234.50",
        "big": "1234567890123",
        "note": "",  # an empty cell is empty, as in a CSV
    }
    assert second["count"] == "-7" and second["share"] == "2.50"  # styled 0.00
    assert second["sum"] == "1e-05"  # styled 0.00E+00, a format left alone: the plain value
    assert second["moment"] == "2024-01-05T00:00:00.250"
    assert second["ok"] == "FALSE" and second["code"] == "@not a formula"
    assert second["note"] == "终" and second["day"] == ""


@pytest.mark.parametrize(
    ("value", "code", "shown"),
    [
        (0.15, "0%", "15%"),
        (0.1234, "0.00%", "12.34%"),
        (1234.5, '"$"#,##0.00', "$1,234.50"),
        (-1234.5, '"$"#,##0.00_);("$"#,##0.00)', "($1,234.50)"),  # the negative section
        (-3, "0.00", "-3.00"),
        (1234567.891, "#,##0", "1,234,568"),
        (0.125, "0.00", "0.13"),  # Excel rounds halves up, unlike Python's 0.12
        (1.5, "0", "2"),
        (1.2, "0.0#", "1.2"),
        (12, "0.0#", "12.0"),
        (1234.5, "#,##0.00 [$€-407]", "1,234.50 €"),
        (1.5, "[Red]0.00", "1.50"),
        (1234.5, r'_("$"* #,##0.00_);_("$"* \(#,##0.00\);_("$"* "-"??_);_(@_)', "$1,234.50"),
        (0, r'_("$"* #,##0.00_);_("$"* \(#,##0.00\);_("$"* "-"??_);_(@_)', "$-"),
        (3, "General", None),  # None: the value as cell_text() gives it
        (1.5, "0.00E+00", None),
        (0.5, "# ?/?", None),
        (1.5, "[>100]0.00", None),
    ],
)
def test_number_formats_as_excel_shows_them(value, code, shown):
    assert number_display(value, code) == shown


def test_excel_rows_are_numbered_as_excel_numbers_them():
    data = xlsx_bytes(
        {"Answers": [["id", "question"], ["a", "one"], [], ["b", "two"], [None, "three"]]}
    )
    table = read_table(data, file_name="qa.xlsx")
    assert [row["id"] for row in table.rows] == ["a", "b", ""]
    # Header in row 1, a blank row 3 skipped but counted: the rows a person scrolls to.
    assert table.origins == [2, 4, 5]
    assert table.where(2) == "row 5 of sheet 'Answers'"


def test_a_table_that_starts_right_of_a1_keeps_excel_row_numbers():
    data = xlsx_bytes({"Offset": [[], [], [None, None, "id", "text"], [None, None, "x", "hello"]]})
    table = read_table(data, file_name="offset.xlsx")
    assert table.columns == ["id", "text"]
    assert table.rows == [{"id": "x", "text": "hello"}] and table.origins == [4]


def test_the_first_sheet_by_default_and_any_sheet_by_name():
    data = xlsx_bytes({"Notes": [["note"], ["read me"]], "Items": [["id", "q"], ["1", "2+2?"]]})
    assert workbook_sheets(data) == ["Notes", "Items"]
    first = read_table(data, file_name="book.xlsx")
    assert (first.sheet, first.columns) == ("Notes", ["note"])
    second = read_table(data, file_name="book.xlsx", sheet="Items")
    assert (second.sheet, second.columns, second.sheets) == (
        "Items",
        ["id", "q"],
        ["Notes", "Items"],
    )
    assert error_of(data, "book.xlsx", sheet="Nope") == (
        "The workbook has no sheet 'Nope'; its sheets are 'Notes', 'Items'."
    )


def test_a_workbook_is_recognised_by_its_bytes_without_an_extension():
    data = xlsx_bytes({"S": [["a"], ["1"]]})
    assert read_table(data, file_name="export").format == "xlsx"
    assert read_table(parquet_bytes({"a": [1]}), file_name="export").format == "parquet"


# ---- Excel: what is wrong, and where ------------------------------------------------------
def test_sheet_problems_name_the_sheet_the_row_and_the_column():
    assert error_of(xlsx_bytes({"Empty": []}), "x.xlsx") == (
        "Sheet 'Empty' is empty: it has no header row and no rows. Choose another sheet, or "
        "fill this one."
    )
    assert error_of(xlsx_bytes({"H": [["id", "q"]]}), "x.xlsx") == (
        "Sheet 'H' has only a header row (id, q) and no data rows."
    )
    assert error_of(xlsx_bytes({"S": [["id", None, "q"], ["1", "2", "3"]]}), "x.xlsx") == (
        "Cell B1 of sheet 'S' is empty, but it is in the header row (row 1): name column B, "
        "or delete it."
    )
    assert error_of(xlsx_bytes({"S": [["q", "a", "q"], ["1", "2", "3"]]}), "x.xlsx") == (
        "The header row (row 1 of sheet 'S') names column 'q' twice (columns A and C). "
        "Rename one of them."
    )
    stray = xlsx_bytes({"S": [["id", "q"], ["1", "2"], ["3", "4", None, "oops"]]})
    assert error_of(stray, "x.xlsx") == (
        "Cell D3 of sheet 'S' holds 'oops', but column D has no name in the header row "
        "(row 1). Name the column, or delete the value."
    )
    assert [column_letter(i) for i in (0, 25, 26, 701, 702)] == ["A", "Z", "AA", "ZZ", "AAA"]


def test_broken_workbooks_say_what_they_are():
    good = xlsx_bytes({"S": [["a"], ["1"]]})
    truncated = error_of(good[: len(good) // 2], "cut.xlsx")
    assert truncated.startswith("The Excel workbook is damaged: its ZIP structure cannot be read")
    # An encrypted workbook is an OLE compound file, like an old .xls.
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(1024)
    assert error_of(ole, "secret.xlsx").startswith(
        "The workbook is password-protected (encrypted), or it is an old Excel 97–2003 .xls file"
    )
    assert error_of(b"id,question\n1,hi\n", "renamed.xlsx").startswith(
        "The file is not an Excel workbook: an .xlsx file is a ZIP archive, and this one is not."
    )
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("notes.txt", "hello")
    assert error_of(archive.getvalue(), "photos.xlsx") == (
        "The file is a ZIP archive but not an Excel workbook (it holds no xl/workbook.xml). "
        "Upload the .xlsx file itself."
    )
    assert error_of(b"", "empty.xlsx") == "The file is empty."


def test_a_workbook_that_unpacks_too_big_is_refused_before_it_is_read(settings):
    settings.DATASET_MAX_UPLOAD_BYTES = 50_000  # x5: at most 250 kB unpacked
    data = xlsx_bytes({"S": [["text"], *[["x" * 100 + str(i)] for i in range(3000)]]})
    assert len(data) < 50_000
    message = error_of(data, "bomb.xlsx")
    assert message.startswith("The workbook unpacks to ") and "244.1 KB evalsite reads" in message


# ---- Parquet ------------------------------------------------------------------------------
def test_parquet_values_keep_their_types_as_text():
    paris = datetime.timezone(datetime.timedelta(hours=1))
    data = parquet_bytes(
        {
            "id": pyarrow.array([1, 2, 3], pyarrow.int64()),
            "count": pyarrow.array([3, None, -4], pyarrow.int32()),
            "share": pyarrow.array([0.1, 2.0, None], pyarrow.float64()),
            "small": pyarrow.array([0.1, None, 1.5], pyarrow.float32()),
            "price": pyarrow.array([decimal.Decimal("1.50")] * 3, pyarrow.decimal128(5, 2)),
            "at": pyarrow.array(
                [datetime.datetime(2024, 1, 5, 13, 45), None, datetime.datetime(2024, 1, 5)],
                pyarrow.timestamp("ns"),
            ),
            "local": pyarrow.array(
                [datetime.datetime(2024, 1, 5, 13, 45, tzinfo=paris)] * 3,
                pyarrow.timestamp("us", tz="+01:00"),
            ),
            "day": pyarrow.array([datetime.date(2024, 1, 5), None, None], pyarrow.date32()),
            "ok": pyarrow.array([True, False, None]),
            "answers": pyarrow.array([["4", "four"], [], None]),
            "meta": pyarrow.array([{"source": "arith", "n": 1}, None, {"source": "é", "n": 2}]),
            "subject": pyarrow.array(["math", "geo", "math"]).dictionary_encode(),
            "text": pyarrow.array(["007", None, ""]),
        }
    )
    table = read_table(data, file_name="qa.parquet")
    assert table.format == "parquet" and table.columns[0] == "id"
    first, second, third = table.rows
    assert first == {
        "id": "1",
        "count": "3",
        "share": "0.1",
        "small": "0.1",  # a float32, not 0.10000000149011612
        "price": "1.50",
        "at": "2024-01-05T13:45:00",
        "local": "2024-01-05T13:45:00+01:00",
        "day": "2024-01-05",
        "ok": "true",
        "answers": '["4", "four"]',
        "meta": '{"source": "arith", "n": 1}',
        "subject": "math",
        "text": "007",
    }
    # A null is empty, and never turns the rest of its column into floats.
    assert second["count"] == "" and third["count"] == "-4"
    assert second["share"] == "2.0" and third["share"] == ""
    assert second["at"] == "" and third["at"] == "2024-01-05T00:00:00"
    assert second["answers"] == "[]" and third["answers"] == ""
    assert third["meta"] == '{"source": "é", "n": 2}' and second["ok"] == "false"
    assert second["text"] == "" and table.where(2) == "row 3"


def test_broken_parquet_files_say_what_they_are():
    assert error_of(b"id,question\n1,hi\n", "data.parquet").startswith(
        "The file is not a Parquet file: it does not start with the Parquet mark “PAR1”."
    )
    good = parquet_bytes({"a": list(range(100))})
    assert error_of(good[:-30], "cut.parquet").startswith(
        "The Parquet file is damaged and cannot be read ("
    )
    assert error_of(parquet_bytes({"a": pyarrow.array([], pyarrow.int64())}), "x.parquet") == (
        "The Parquet file has columns (a) but no rows."
    )
    assert error_of(b"", "empty.parquet") == "The file is empty."


# ---- previews of big files ----------------------------------------------------------------
def test_big_workbooks_and_parquet_files_are_previewed_from_their_first_rows(tmp_path):
    rows = [[f"q{i}", f"question {i}"] for i in range(450)]
    book = tmp_path / "big.xlsx"
    book.write_bytes(xlsx_bytes({"Only": [["id", "question"], *rows]}))
    table = read_head(book, max_bytes=1000)
    assert not table.complete and len(table.rows) == 200 and table.origins[-1] == 201
    assert table.preview_note == (
        "The preview shows the first 200 rows of sheet 'Only': the workbook is larger than the "
        "preview window. The import reads the whole sheet (about 450 rows)."
    )
    assert read_head(book).complete and len(read_head(book).rows) == 450
    parquet = tmp_path / "big.parquet"
    parquet.write_bytes(parquet_bytes({"id": [row[0] for row in rows]}))
    table = read_head(parquet, max_bytes=1000)
    assert not table.complete and len(table.rows) == 200
    assert table.preview_note == (
        "The preview shows the first 200 of the file's 450 rows. The import reads them all."
    )


# ---- importing ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_chosen_sheet_imports_and_is_recorded(task):
    data = xlsx_bytes(
        {
            "Readme": [["about"], ["this workbook"]],
            "Items": [
                ["id", "question", "answer", "tags"],
                [101, "2+2?", 4, "math;easy"],
                [102, "Capital of Peru?", "Lima", "geo"],
            ],
        }
    )
    mapping = {"id_column": "id", "reference_column": "answer", "tags_column": "tags"}
    dataset = import_dataset(task, "qa", data, mapping, file_name="qa.xlsx", sheet="Items")
    assert (dataset.format, dataset.sheet, dataset.row_count) == ("xlsx", "Items", 2)
    item = dataset.items.get(key="101")
    assert item.fields == {"id": "101", "question": "2+2?", "answer": "4", "tags": "math;easy"}
    assert item.reference == "4" and item.tags == ["math", "easy"]
    assert Dataset.objects.get(pk=dataset.pk).sheet == "Items"


@pytest.mark.django_db
def test_excel_and_parquet_imports_are_atomic_and_name_the_place(task):
    duplicate = xlsx_bytes({"Items": [["id", "q"], ["a", "1"], [], ["b", "2"], ["a", "3"]]})
    with pytest.raises(DatasetError) as caught:
        import_dataset(task, "qa", duplicate, {"id_column": "id"}, file_name="qa.xlsx")
    assert str(caught.value).startswith(
        "The id 'a' in column 'id' appears 2 times: row 2 of sheet 'Items', row 5 of sheet 'Items'."
    )
    blank = xlsx_bytes({"Items": [["id", "q"], ["a", "1"], [None, "2"]]})
    with pytest.raises(DatasetError, match=r"^Row 3 of sheet 'Items' has no id in the id column"):
        import_dataset(task, "qa", blank, {"id_column": "id"}, file_name="qa.xlsx")
    with pytest.raises(DatasetError) as caught:
        import_dataset(task, "qa", blank, {"reference_column": "answer"}, file_name="qa.xlsx")
    assert str(caught.value) == (
        "The reference column 'answer' is not in sheet 'Items' of the workbook. "
        "Its columns are: id, q."
    )
    parquet = parquet_bytes({"id": ["x", "y", "x"], "q": ["1", "2", "3"]})
    with pytest.raises(DatasetError, match=r"appears 2 times: row 1, row 3\."):
        import_dataset(task, "qa", parquet, {"id_column": "id"}, file_name="qa.parquet")
    with pytest.raises(DatasetError, match=r"^The id column 'uid' is not in the file\."):
        import_dataset(task, "qa", parquet, {"id_column": "uid"}, file_name="qa.parquet")
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0


@pytest.mark.django_db
def test_a_parquet_import_stores_text_fields(task):
    data = parquet_bytes({"n": pyarrow.array([1, None], pyarrow.int64()), "q": ["a", "b"]})
    dataset = import_dataset(task, "nums", data, {}, file_name="nums.parquet")
    assert (dataset.format, dataset.sheet) == ("parquet", "")
    assert [item.fields for item in dataset.items.order_by("position")] == [
        {"n": "1", "q": "a"},
        {"n": "", "q": "b"},
    ]


# ---- the upload pages ---------------------------------------------------------------------
TWO_SHEETS = xlsx_bytes(
    {
        "Readme": [["about"], ["Items are on the next sheet."]],
        "Items": [["id", "question", "answer"], ["q1", "2+2?", 4], ["q2", "3+3?", 6]],
    }
)


def upload(client, task, data: bytes, file_name: str) -> str:
    response = client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile(file_name, data)},
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    return response["Location"]


@pytest.mark.django_db
def test_the_preview_offers_the_sheets_and_follows_the_chosen_one(reviewer_client, task):
    url = upload(reviewer_client, task, TWO_SHEETS, "book.xlsx")
    page = reviewer_client.get(url)
    html = page.content.decode()
    assert '<select name="sheet" id="sheet-choice">' in html
    assert '<option value="Readme" selected>Readme</option>' in html
    assert "Items are on the next sheet." in html and page.context["table"].sheet == "Readme"

    page = reviewer_client.get(url, {"format": "xlsx", "sheet": "Items"})
    html = page.content.decode()
    assert '<option value="Items" selected>Items</option>' in html
    assert page.context["preview_columns"] == ["id", "question", "answer"]
    assert page.context["form"].initial["sheet"] == "Items"
    assert page.context["form"].initial["id_column"] == "id"  # guessed from this sheet's header

    response = reviewer_client.post(
        url,
        {"name": "book", "format": "xlsx", "sheet": "Items", "id_column": "id",
         "reference_column": "answer"},
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[-2000:]
    dataset = Dataset.objects.get()
    assert (dataset.sheet, dataset.format, dataset.row_count) == ("Items", "xlsx", 2)
    assert dataset.items.get(key="q2").reference == "6"
    detail = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert 'sheet <strong id="dataset-sheet">Items</strong>' in detail

    # A corrected workbook uploaded as the next version opens on the sheet the last one used.
    url = upload(reviewer_client, task, TWO_SHEETS, "book.xlsx")
    page = reviewer_client.get(url)
    assert page.context["table"].sheet == "Items"
    assert page.context["latest"] == dataset


@pytest.mark.django_db
def test_an_unreadable_first_sheet_still_lets_the_user_choose_another(reviewer_client, task):
    data = xlsx_bytes({"Cover": [], "Data": [["q"], ["hello"]]})
    url = upload(reviewer_client, task, data, "cover.xlsx")
    html = reviewer_client.get(url).content.decode()
    assert "Sheet &#x27;Cover&#x27; is empty" in html and 'id="sheet-choice"' in html
    page = reviewer_client.get(url, {"format": "xlsx", "sheet": "Data"})
    assert "read_error" not in page.context and page.context["table"].rows == [{"q": "hello"}]


@pytest.mark.django_db
def test_a_bad_workbook_is_refused_at_upload_naming_the_file(reviewer_client, task, staged_files):
    response = reviewer_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {
            "file": SimpleUploadedFile(
                "secret.xlsx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)
            )
        },
    )
    assert response.status_code == 200
    assert "secret.xlsx: The workbook is password-protected" in response.content.decode()
    response = reviewer_client.post(
        reverse("datasets:dataset-upload", args=[task.slug]),
        {"file": SimpleUploadedFile("x.parquet", b"not parquet at all")},
    )
    assert "x.parquet: The file is not a Parquet file" in response.content.decode()
    assert staged_files() == [] and Dataset.objects.count() == 0


@pytest.mark.django_db
def test_a_parquet_upload_previews_maps_and_imports(reviewer_client, task):
    data = parquet_bytes({"uid": ["a", "b"], "n": pyarrow.array([1, None], pyarrow.int64())})
    url = upload(reviewer_client, task, data, "nums.parquet")
    page = reviewer_client.get(url)
    assert page.context["table"].format == "parquet" and 'id="sheet-choice"' not in (
        page.content.decode()
    )
    assert page.context["preview"] == [["a", "1"], ["b", ""]]
    response = reviewer_client.post(url, {"name": "nums", "format": "parquet", "id_column": "uid"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    dataset = Dataset.objects.get()
    assert (dataset.format, dataset.row_count, dataset.items.get(key="b").fields["n"]) == (
        "parquet",
        2,
        "",
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_big_workbook_imports_its_chosen_sheet_in_a_real_worker(reviewer_client, task, settings):
    settings.DATASET_SYNC_MAX_ROWS = 10
    rows = [[f"q{i:03d}", f"question {i}", "math;easy" if i % 2 else "geo"] for i in range(60)]
    data = xlsx_bytes({"Notes": [["x"], ["y"]], "Big": [["id", "question", "tags"], *rows]})
    url = upload(reviewer_client, task, data, "big.xlsx")
    reviewer_client.get(url, {"format": "xlsx", "sheet": "Big"})
    response = reviewer_client.post(
        url,
        {"name": "big", "format": "xlsx", "sheet": "Big", "id_column": "id", "tags_column": "tags"},
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    dataset = Dataset.objects.get()
    assert (dataset.status, dataset.sheet) == ("importing", "Big")
    result = run_burst_worker()
    assert result.returncode == 0, result.stdout + result.stderr
    dataset.refresh_from_db()
    assert (dataset.status, dataset.row_count, dataset.sheet) == ("ready", 60, "Big")
    assert dataset.tag_counts == {"math": 30, "easy": 30, "geo": 30}


@pytest.mark.django_db
def test_progress_moves_while_a_workbook_is_written(task, monkeypatch):
    monkeypatch.setattr(importing, "WRITE_BATCH", 25)
    rows = [[f"q{i:03d}", f"question {i}"] for i in range(60)]
    table = read_table(xlsx_bytes({"S": [["id", "q"], *rows]}), file_name="p.xlsx")
    dataset = Dataset.objects.new_version(task, "p", format="xlsx", columns=table.columns)
    reports: list[tuple[str, int, int]] = []
    fill_dataset(dataset, table, Mapping(id_column="id"), lambda *args: reports.append(args))
    assert reports == [("checking", 0, 60), ("writing", 25, 60), ("writing", 50, 60),
                       ("writing", 60, 60)]  # fmt: skip
    assert Dataset.objects.get(pk=dataset.pk).sheet == "S"
