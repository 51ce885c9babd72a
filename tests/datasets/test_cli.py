"""`manage.py import_dataset`: same checks and messages as the page, non-zero exit on error."""

import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from apps.datasets.models import Dataset, Item
from tests.base import ROOT, subprocess_env
from tests.datasets import samples


@pytest.mark.django_db
def test_cli_imports_with_a_full_mapping(task, tmp_path, capsys):
    path = tmp_path / "nli.jsonl"
    path.write_bytes(samples.NLI_JSONL)
    call_command(
        "import_dataset", str(path), "--task", task.slug, "--name", "nli",
        "--id-column", "uid", "--reference-column", "label", "--tags-column", "tags",
        "--input-column", "premise", "--input-column", "hypothesis",
    )  # fmt: skip
    dataset = Dataset.objects.get()
    assert (dataset.name, dataset.row_count, dataset.format) == ("nli", 3, "jsonl")
    assert dataset.mapping["id_column"] == "uid" and dataset.tag_counts["easy"] == 2
    assert dataset.input_columns == ["premise", "hypothesis"]
    assert f"Imported 3 items from nli.jsonl into support-qa / nli v1 (dataset #{dataset.pk}" in (
        capsys.readouterr().out
    )


@pytest.mark.django_db
def test_cli_response_columns_format_override_and_default_name(task, tmp_path):
    path = tmp_path / "mmlu-dev.txt"
    path.write_bytes(samples.MMLU_CSV)
    call_command(
        "import_dataset", str(path), "--task", task.slug, "--format", "csv",
        "--reference-column", "answer", "--response-column", "response",
    )  # fmt: skip
    dataset = Dataset.objects.get()
    assert dataset.name == "mmlu-dev" and dataset.response_columns == ["response"]
    assert dataset.file_name == "mmlu-dev.txt"


@pytest.mark.django_db
def test_cli_errors_are_the_page_messages_and_store_nothing(task, tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_bytes(b"a,b\n1,2\n3,4,5\n")
    with pytest.raises(CommandError, match=r"ragged.csv: Row 3 \(line 3\) has 3 fields"):
        call_command("import_dataset", str(path), "--task", task.slug)
    path.write_bytes(samples.csv_bytes(["id"], [["a"], ["a"]]))
    with pytest.raises(
        CommandError, match="The id 'a' in column 'id' appears 2 times: row 2, row 3"
    ):
        call_command("import_dataset", str(path), "--task", task.slug, "--id-column", "id")
    with pytest.raises(CommandError, match="The tags column 'nope' is not in the file"):
        call_command("import_dataset", str(path), "--task", task.slug, "--tags-column", "nope")
    with pytest.raises(CommandError, match="There is no task with the slug 'missing'"):
        call_command("import_dataset", str(path), "--task", "missing")
    with pytest.raises(CommandError, match="There is no file at"):
        call_command("import_dataset", str(tmp_path / "gone.csv"), "--task", task.slug)
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0


@pytest.mark.django_db
def test_cli_never_reads_a_json_named_file_as_csv(task, tmp_path):
    lines = b'1\n"two"\n[3]\n'
    path = tmp_path / "x.jsonl"
    path.write_bytes(lines)
    with pytest.raises(CommandError, match=r"x.jsonl: Line 1 is a number, not a JSON object"):
        call_command("import_dataset", str(path), "--task", task.slug)
    path = tmp_path / "x.json"
    path.write_bytes(lines)
    with pytest.raises(CommandError, match=r"x.json: .*The file starts with a number"):
        call_command("import_dataset", str(path), "--task", task.slug)
    assert Dataset.objects.count() == 0 and Item.objects.count() == 0
    path = tmp_path / "x.txt"  # .txt says nothing: the content decides, and it is a CSV
    path.write_bytes(lines)
    call_command("import_dataset", str(path), "--task", task.slug)
    assert Dataset.objects.get().columns == ["1"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "import_dataset", *args],
        cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cli_process_exits_non_zero_on_error_and_zero_on_success(task, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"rows": [1, 2]}')
    result = run_cli(str(bad), "--task", task.slug)
    assert result.returncode != 0
    assert "bad.json: The JSON file holds one object (keys 'rows'), not a list of objects" in (
        result.stderr
    )
    assert Dataset.objects.count() == 0

    good = tmp_path / "qa.json"
    good.write_bytes(samples.JSON_ARRAY)
    result = run_cli(str(good), "--task", task.slug, "--id-column", "id")
    assert result.returncode == 0, result.stderr
    assert "Imported 3 items" in result.stdout
    assert Dataset.objects.get().items.count() == 3


@pytest.mark.django_db
def test_cli_imports_a_chosen_excel_sheet_and_keeps_it_for_the_next_version(task, tmp_path, capsys):
    path = tmp_path / "book.xlsx"
    path.write_bytes(
        samples.xlsx_bytes(
            {
                "Readme": [["about"], ["see Items"]],
                "Items": [["id", "question", "answer"], [1, "2+2?", 4], [2, "0.1+0.2?", 0.3]],
            }
        )
    )
    call_command(
        "import_dataset", str(path), "--task", task.slug, "--sheet", "Items",
        "--id-column", "id", "--reference-column", "answer",
    )  # fmt: skip
    dataset = Dataset.objects.get()
    assert (dataset.format, dataset.sheet, dataset.row_count) == ("xlsx", "Items", 2)
    assert [item.reference for item in dataset.items.order_by("position")] == ["4", "0.3"]
    assert "Imported 2 items from book.xlsx into support-qa / book v1" in capsys.readouterr().out
    # The next version of "book" reads the sheet the last one used, without --sheet.
    call_command("import_dataset", str(path), "--task", task.slug, "--id-column", "id")
    latest = Dataset.objects.latest_version(task, "book")
    assert (latest.version, latest.sheet, latest.row_count) == (2, "Items", 2)
    assert "sheet 'Items'" in capsys.readouterr().out


@pytest.mark.django_db
def test_cli_imports_parquet_and_names_the_file_and_sheet_in_errors(task, tmp_path):
    path = tmp_path / "scores.parquet"
    path.write_bytes(samples.parquet_bytes({"uid": ["a", "b", "c"], "score": [1, 2, None]}))
    call_command("import_dataset", str(path), "--task", task.slug, "--id-column", "uid")
    dataset = Dataset.objects.get()
    assert (dataset.format, dataset.row_count) == ("parquet", 3)
    assert dataset.items.get(key="c").fields == {"uid": "c", "score": ""}
    book = tmp_path / "bad.xlsx"
    book.write_bytes(samples.xlsx_bytes({"Data": [["id"], ["x"], ["x"]]}))
    with pytest.raises(
        CommandError,
        match=r"bad.xlsx: The id 'x' in column 'id' appears 2 times: row 2 of sheet 'Data', "
        r"row 3 of sheet 'Data'\.",
    ):
        call_command("import_dataset", str(book), "--task", task.slug, "--id-column", "id")
    with pytest.raises(
        CommandError, match=r"bad.xlsx: The workbook has no sheet 'Nope'; its sheets are 'Data'\."
    ):
        call_command("import_dataset", str(book), "--task", task.slug, "--sheet", "Nope")
    notparquet = tmp_path / "fake.parquet"
    notparquet.write_bytes(b"id\n1\n")
    with pytest.raises(CommandError, match=r"fake.parquet: The file is not a Parquet file"):
        call_command("import_dataset", str(notparquet), "--task", task.slug)
    assert Dataset.objects.count() == 1 and Item.objects.count() == 3


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cli_process_imports_excel_and_parquet(task, tmp_path):
    book = tmp_path / "qa.xlsx"
    book.write_bytes(samples.xlsx_bytes({"S1": [["q"], ["a"]], "S2": [["q", "n"], ["b", 3]]}))
    result = run_cli(str(book), "--task", task.slug, "--sheet", "S2")
    assert result.returncode == 0, result.stderr
    assert "(dataset #" in result.stdout and "xlsx, sheet 'S2')." in result.stdout
    table = tmp_path / "qa.parquet"
    table.write_bytes(samples.parquet_bytes({"q": ["x", "y"]}))
    result = run_cli(str(table), "--task", task.slug, "--name", "pq")
    assert result.returncode == 0, result.stderr
    assert "Imported 2 items from qa.parquet" in result.stdout
    fields = sorted(
        (item.dataset.format, item.fields["q"], item.fields.get("n")) for item in Item.objects.all()
    )
    assert fields == [("parquet", "x", None), ("parquet", "y", None), ("xlsx", "b", "3")]


@pytest.mark.django_db
def test_cli_maps_columns_as_the_page_suggests(task, tmp_path, capsys):
    """#28.6: the command mapped nothing, so a file whose uid repeats imported as positions
    while the page refused it."""
    path = tmp_path / "repeats.csv"
    path.write_bytes(samples.csv_bytes(["uid", "question", "answer"], [["a", "1?", "1"],
                                                                      ["a", "2?", "2"]]))  # fmt: skip
    with pytest.raises(CommandError, match="The id 'a' in column 'uid' appears 2 times"):
        call_command("import_dataset", str(path), "--task", task.slug)
    assert not Dataset.objects.exists() and not Item.objects.exists()
    path.write_bytes(samples.csv_bytes(["uid", "question", "answer", "response_x"],
                                       [["a", "1?", "1", "one"]]))  # fmt: skip
    call_command("import_dataset", str(path), "--task", task.slug)
    dataset = Dataset.objects.get()
    assert (dataset.id_column, dataset.reference_column) == ("uid", "answer")
    assert (dataset.input_columns, dataset.response_columns) == (["question"], ["response_x"])
    out = capsys.readouterr().out
    assert "Columns: id uid · inputs question · reference answer · tags none · " in out


@pytest.mark.django_db
def test_cli_options_replace_single_roles_of_the_suggestion(task, tmp_path, capsys):
    path = tmp_path / "qa.csv"
    path.write_bytes(samples.csv_bytes(["uid", "question", "answer"], [["a", "1?", "1"]]))
    call_command(
        "import_dataset", str(path), "--task", task.slug, "--id-column", "",
        "--reference-column", "", "--input-column", "question", "--input-column", "answer",
    )  # fmt: skip
    dataset = Dataset.objects.get()
    assert (dataset.id_column, dataset.reference_column) == (None, None)
    assert dataset.input_columns == ["question", "answer"]
    assert "Column 'answer' is named like a reference answer but mapped as an input" in (
        capsys.readouterr().out
    )


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_cli_streams_a_file_bigger_than_the_preview_window(task, tmp_path, monkeypatch, fmt):
    """A file past the window (4 MB; 2 kB here) is mapped from its first part and streamed to
    the database a batch at a time, as the worker imports it: never read whole. A problem far
    in is the page's message, with nothing stored."""
    import json

    from apps.datasets import importing
    from apps.datasets.management.commands import import_dataset

    monkeypatch.setattr(import_dataset, "PREVIEW_BYTES", 2000)
    monkeypatch.setattr(importing, "WRITE_BATCH", 50)
    monkeypatch.setattr(importing, "read_table", lambda *a, **k: pytest.fail("read whole"))
    rows = [
        {"id": f"r{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(300)
    ]
    path = tmp_path / f"sums.{fmt}"
    if fmt == "csv":
        path.write_text("id,question,answer\n" + "".join(",".join(r.values()) + "\n" for r in rows))
    else:
        path.write_text(json.dumps(rows))
    call_command("import_dataset", str(path), "--task", task.slug)
    dataset = Dataset.objects.get()
    assert (dataset.status, dataset.row_count, dataset.format) == ("ready", 300, fmt)
    assert dataset.mapping["id_column"] == "id" and dataset.mapping["reference_column"] == "answer"
    assert Item.objects.get(dataset=dataset, key="r299").fields == rows[299]
    # A repeated id at the end: the whole-file reader words it (every row that has it).
    monkeypatch.undo()
    monkeypatch.setattr(import_dataset, "PREVIEW_BYTES", 2000)
    rows.append(rows[0])
    if fmt == "csv":
        path.write_text("id,question,answer\n" + "".join(",".join(r.values()) + "\n" for r in rows))
    else:
        path.write_text(json.dumps(rows))
    with pytest.raises(CommandError, match="r0"):
        call_command("import_dataset", str(path), "--task", task.slug)
    assert Dataset.objects.count() == 1 and Item.objects.count() == 300
