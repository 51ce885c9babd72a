"""The worker's import streams CSV, JSON, JSONL, Parquet and Excel files to the database a batch at a time
(`fill_dataset_from_file`): the same dataset as reading the file whole, never the file in
memory, and every problem told exactly as the whole-file import tells it, with nothing written."""

import json
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction

from apps.datasets import importing, readers
from apps.datasets.importing import Mapping, fill_dataset, fill_dataset_from_file
from apps.datasets.models import Dataset, Item
from apps.datasets.readers import DatasetError, read_table
from tests.datasets import samples

pytestmark = pytest.mark.django_db

ROWS = [
    {"id": f"r{i}", "question": f"What is {i} + {i}?\nShow the sum.", "tags": "math;easy"}
    for i in range(23)
]


def files(tmp_path: Path) -> dict[str, Path]:
    csv_path = tmp_path / "rows.csv"
    csv_path.write_bytes(
        b"\xef\xbb\xbf"  # a BOM, and a blank line that still counts as a row
        + samples.csv_bytes(["id", "question", "tags"], [list(r.values()) for r in ROWS[:5]])
        + b"\r\n"
        + samples.csv_bytes(["id", "question", "tags"], [list(r.values()) for r in ROWS[5:]]).split(
            b"\n", 1
        )[1]
    )
    jsonl_path = tmp_path / "rows.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) for r in ROWS]
    lines[7] = json.dumps({**ROWS[7], "extra": [1, {"a": None}]})  # a column from line 8 on
    jsonl_path.write_text("\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n")
    parquet_path = tmp_path / "rows.parquet"
    parquet_path.write_bytes(
        samples.parquet_bytes(
            {name: [r[name] for r in ROWS] for name in ("id", "question", "tags")}
        )
    )
    json_path = tmp_path / "rows.json"
    # Items read a few characters at a time where a test sets JSON_CHUNK small, a
    # column from item 8 on, an escaped quote and a line end, spaces around the list.
    items = [dict(r) for r in ROWS]
    items[7]["extra"] = [1, {"a": None, "b": 'say "x"\n'}]
    json_path.write_text(" \n" + json.dumps(items, ensure_ascii=False, indent=1) + "\n ")
    xlsx_path = tmp_path / "rows.xlsx"
    # Two blank rows and an empty column A before the table, a blank row inside it, a cell
    # styled as a percentage, and the first sheet of two.
    table = [list(r.values()) for r in ROWS]
    cells = [[], [], [None, "id", "question", "tags"]]
    cells += [[None, *row] for row in table[:5]] + [[]] + [[None, *row] for row in table[5:]]
    cells[10][1] = 0.25
    xlsx_path.write_bytes(
        samples.xlsx_bytes({"Items": cells, "Other": [["id"], ["x"]]}, {"B11": "0%"})
    )
    return {
        "csv": csv_path,
        "jsonl": jsonl_path,
        "parquet": parquet_path,
        "json": json_path,
        "xlsx": xlsx_path,
    }


def new_dataset(task, fmt: str, name: str) -> Dataset:
    return Dataset.objects.create(
        task=task, name=name, format=fmt, status=Dataset.Status.IMPORTING, file_name=f"x.{fmt}"
    )


def stored(dataset: Dataset) -> tuple:
    dataset.refresh_from_db()
    items = list(
        Item.objects.filter(dataset=dataset)
        .order_by("position")
        .values_list("position", "key", "fields", "reference", "tags", "search_text")
    )
    return (
        dataset.status,
        dataset.columns,
        dataset.row_count,
        dataset.tag_counts,
        dataset.fingerprint,
        items,
    )


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "json", "xlsx"])
def test_a_streamed_import_stores_what_reading_the_file_whole_stores(
    task, tmp_path, monkeypatch, fmt
):
    path = files(tmp_path)[fmt]
    monkeypatch.setattr(readers, "JSON_CHUNK", 7)  # items split across reads, and the "["
    mapping = Mapping(id_column="id", tags_column="tags")
    whole = new_dataset(task, fmt, "whole")
    fill_dataset(whole, read_table(path, fmt), mapping.validated(read_table(path, fmt).columns))
    # Batches of 4 rows: the 23 rows span six of them.
    monkeypatch.setattr(importing, "WRITE_BATCH", 4)
    writes: list[int] = []
    write_items = importing.write_items
    monkeypatch.setattr(
        importing,
        "write_items",
        lambda d, items, **kw: writes.append(len(items.rows)) or write_items(d, items, **kw),
    )
    # Never the whole file: the whole-file reader is not called.
    monkeypatch.setattr(importing, "read_table", lambda *a, **k: pytest.fail("read whole"))
    streamed = new_dataset(task, fmt, "streamed")
    progress: list[tuple] = []
    fill_dataset_from_file(
        streamed,
        path,
        mapping.validated(read_table(path, fmt).columns),
        lambda *args: progress.append(args),
    )
    assert writes == [4, 4, 4, 4, 4, 3]
    assert progress[-1][:2] == ("writing", 23)
    assert stored(streamed) == stored(whole)
    assert stored(streamed)[0] == "ready" and stored(streamed)[2] == 23
    if fmt in ("jsonl", "json"):
        assert stored(streamed)[1] == ["id", "question", "tags", "extra"]
    if fmt == "xlsx":
        assert stored(streamed)[-1][6][1] == "25%"  # the percentage, as Excel shows it
        assert Dataset.objects.get(pk=streamed.pk).sheet == "Items"


def sheet_file(tmp_path: Path, rows: list[list], name: str = "S") -> Path:
    path = tmp_path / "bad.xlsx"
    path.write_bytes(samples.xlsx_bytes({"First": [["other"], ["x"]], name: rows}))
    return path


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # A value under a column with no name, after batches were written.
        ([["id", "q"], *[[f"r{i}", "x"] for i in range(30)], ["r30", "x", "y"]], "Cell C32"),
        # An id missing, an id repeated batches apart (every row that has it named).
        ([["id", "q"], *[[f"r{i}", "x"] for i in range(20)], [None, "x"]], "Row 22 of sheet"),
        ([["id", "q"], *[[f"r{i % 25}", "x"] for i in range(26)]], "row 2 of sheet 'S', row 27"),
        ([["id", "q"]], "only a header row"),
    ],
)
def test_a_problem_in_a_sheet_is_told_as_the_whole_file_import_tells_it(
    task, tmp_path, monkeypatch, rows, expected
):
    path = sheet_file(tmp_path, rows)
    mapping = Mapping(id_column="id")
    with pytest.raises(DatasetError) as whole:
        table = read_table(path, "xlsx", sheet="S")
        fill_dataset(new_dataset(task, "xlsx", "whole-error"), table, mapping)
    assert expected in str(whole.value)
    monkeypatch.setattr(importing, "WRITE_BATCH", 4)
    dataset = new_dataset(task, "xlsx", "streamed-error")
    dataset.sheet = "S"
    with pytest.raises(DatasetError) as streamed:
        fill_dataset_from_file(dataset, path, mapping)
    assert str(streamed.value) == str(whole.value)
    assert Item.objects.count() == 0


def test_a_batch_ends_at_a_number_of_characters_too(task, tmp_path, monkeypatch):
    path = files(tmp_path)["csv"]
    monkeypatch.setattr(importing, "WRITE_BATCH_CHARS", 100)  # about two rows
    writes: list[int] = []
    write_items = importing.write_items
    monkeypatch.setattr(
        importing,
        "write_items",
        lambda d, items, **kw: writes.append(len(items.rows)) or write_items(d, items, **kw),
    )
    dataset = new_dataset(task, "csv", "chars")
    fill_dataset_from_file(dataset, path, Mapping(id_column="id"))
    assert sum(writes) == 23 and max(writes) <= 3 and len(writes) >= 8


def whole_error(path: Path, fmt: str, mapping: Mapping, task) -> str:
    with pytest.raises(DatasetError) as whole:
        fill_dataset(new_dataset(task, fmt, "whole-error"), read_table(path, fmt), mapping)
    return str(whole.value)


@pytest.mark.parametrize(
    ("fmt", "content", "expected"),
    [
        # A ragged row far into the file, after batches were written.
        (
            "csv",
            "id,q\n" + "".join(f"r{i},x\n" for i in range(30)) + "r30,x,y\n",
            "Row 32 (line 32)",
        ),
        # A quoted field never closed.
        ("csv", "id,q\n" + "".join(f"r{i},x\n" for i in range(30)) + 'r30,"x\n', "never closed"),
        # An id repeated batches apart: every row that has it is named.
        ("csv", "id,q\n" + "".join(f"r{i % 25},x\n" for i in range(26)), "row 2, row 27"),
        # An id missing: its row, as a person finds it.
        ("csv", "id,q\n" + "".join(f"r{i},x\n" for i in range(20)) + ",x\n", "Row 22 has no id"),
        ("jsonl", "".join(f'{{"id": "r{i}"}}\n' for i in range(20)) + "[1]\n", "Line 21 is a list"),
        ("jsonl", "".join(f'{{"id": "r{i}"}}\n' for i in range(20)) + "{oops\n", "Line 21 is not"),
        ("csv", "id,q\n" + "".join(f"r{i},x\n" for i in range(20)) + "r20,\x00\n", "NUL bytes"),
        ("csv", "id,q\nr1,caf\xe9\n", "line 2 has the byte 0xE9"),
        # JSON: an item that is not an object, invalid JSON far in, an id repeated, an empty
        # list, more after the list, one object.
        ("json", "[" + "".join(f'{{"id": "r{i}"}},' for i in range(20)) + "[1]]", "Item 21"),
        ("json", "[" + "".join(f'{{"id": "r{i}"}},' for i in range(20)) + '{"id": }]', "line 1"),
        ("json", "[" + ",".join(f'{{"id": "r{i % 25}"}}' for i in range(26)) + "]", "item 26"),
        ("json", " [ ] ", "empty list"),
        ("json", '[{"id": "r1"}] [{"id": "r2"}]', "goes on after it"),
        ("json", '{"rows": [{"id": "r1"}]}', "holds one object"),
        ("json", '[{"id": "r1"}, {"id": "r2"},]', "not valid"),
        ("csv", "id,q\n", "only a header row"),
        ("csv", "  \n\n", "The file is empty."),
    ],
)
def test_a_problem_is_told_as_the_whole_file_import_tells_it_and_nothing_is_written(
    task, tmp_path, monkeypatch, fmt, content, expected
):
    path = tmp_path / f"bad.{fmt}"
    path.write_bytes(content.encode("latin-1" if "\xe9" in content else "utf-8"))
    mapping = Mapping(id_column="id")
    told = whole_error(path, fmt, mapping, task)
    assert expected in told
    monkeypatch.setattr(importing, "WRITE_BATCH", 4)
    dataset = new_dataset(task, fmt, "streamed-error")
    with pytest.raises(DatasetError) as streamed:
        fill_dataset_from_file(dataset, path, mapping)
    assert str(streamed.value) == told
    assert Item.objects.count() == 0
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.IMPORTING  # the job marks it failed


def test_only_a_few_rows_are_in_memory_at_once(tmp_path):
    """The stream hands rows over one by one: 100 rows in, it has read a few kB of the file."""
    path = tmp_path / "many.csv"
    path.write_text("id,q\n" + "".join(f"r{i},{'x' * 50}\n" for i in range(5000)))
    stream = readers.stream_rows(path, "csv")
    assert stream is not None
    first = [next(stream.rows) for _ in range(100)]
    assert first[0][:2] == (2, {"id": "r0", "q": "x" * 50}) and first[-1][0] == 101
    assert stream.read() < path.stat().st_size / 4  # far from the end of the file
    stream.close()


def streamed_records(path: Path) -> list | str:
    """The stream's (origin, row) pairs, or "unstreamable"."""
    try:
        stream = readers.stream_rows(path, "csv")
        assert stream is not None
        try:
            return [(origin, row) for origin, row, _ in stream.rows]
        finally:
            stream.close()
    except readers.Unstreamable:
        return "unstreamable"


def test_a_long_record_is_split_as_the_csv_module_splits_it(tmp_path, monkeypatch):
    """Records longer than LONG_RECORD are split by hand (the csv module holds a field in 4
    bytes a character): 3,000 random files of quotes, doubled quotes, delimiters, line ends
    inside and outside quotes, blank lines and stray quotes, each streamed with every record
    split by hand and with none, give the same rows, or both end the stream (and the file is
    then read whole, which words the problem)."""
    import random

    draw = random.Random(26)
    pieces = ["a", "bc", " ", ",", ",", '"', '""', "\n", "\r\n", "\r", ";", "x" * 5]
    agreed = split = 0
    for n in range(3000):
        body = "".join(draw.choice(pieces) for _ in range(draw.randint(0, 30)))
        path = tmp_path / f"f{n}.csv"
        path.write_bytes(("id,q\n" + body + draw.choice(["", "\n"])).encode())
        monkeypatch.setattr(readers, "LONG_RECORD", 10**9)
        by_csv = streamed_records(path)
        monkeypatch.setattr(readers, "LONG_RECORD", 0)
        by_hand = streamed_records(path)
        assert by_hand == by_csv, (body, by_csv, by_hand)
        agreed += by_csv != "unstreamable"
        split += by_csv != "unstreamable" and any('"' in row["q"] for _, row in by_csv)
    # Both kinds of outcome were tried, and rows with quotes in them.
    assert agreed > 300 and split > 30 and 3000 - agreed > 300, (agreed, split)


def test_a_long_cell_is_streamed_and_stored_whole(task, tmp_path):
    """One row of 12 MB (a quoted cell with doubled quotes and a line end in it), between two
    short rows: stored as read whole, from a stream that split it by hand."""
    cell = ('He said ""yes"".\n' + "word " * 2_400_000).rstrip()
    path = tmp_path / "long.csv"
    path.write_text(f'id,q\nr1,short\nr2,"{cell}"\nr3,"a, b"\n')
    stream = readers.stream_rows(path, "csv")
    assert stream is not None
    rows = [row for _, row, _ in stream.rows]
    stream.close()
    assert rows[1]["q"] == cell.replace('""', '"') and rows[2] == {"id": "r3", "q": "a, b"}
    dataset = new_dataset(task, "csv", "long")
    fill_dataset_from_file(dataset, path, Mapping(id_column="id"))
    dataset.refresh_from_db()
    assert dataset.status == "ready", dataset.error
    item = Item.objects.get(dataset=dataset, key="r2")
    assert item.fields["q"] == cell.replace('""', '"')
    # Found by the words of its first million characters; the fields are kept whole.
    whole = "r2\n" + cell.replace('""', '"').lower()
    assert item.search_text == whole[: importing.SEARCH_TEXT_CHARS]
    assert Item.objects.get(dataset=dataset, key="r3").search_text == "r3\na, b"
    if connection.vendor == "sqlite":
        # The huge row went in with a small page cache and no JSON check: both are back.
        with connection.cursor() as cursor:
            assert cursor.execute("PRAGMA ignore_check_constraints").fetchone() == (0,)
            assert cursor.execute("PRAGMA cache_size").fetchone() == (-64000,)
            with pytest.raises(IntegrityError), transaction.atomic():
                cursor.execute(
                    "UPDATE datasets_item SET fields = 'not json' WHERE id = %s", [item.pk]
                )


def test_a_big_json_list_is_previewed_from_its_first_items(tmp_path):
    """A JSON list bigger than the preview window is read only as far as the window goes."""
    rows = [{"id": f"r{i}", "q": "x" * (100 + i)} for i in range(1000)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(rows))
    sizes = [len(json.dumps(row)) for row in rows]
    shown = max(k for k in range(1, 1000) if sum(sizes[:k]) <= 2000)
    table = readers.read_head(path, None, "big.json", max_bytes=2000)
    assert (table.format, table.complete, table.cut_at) == ("json", False, shown + 1)
    assert table.rows == rows[:shown] and table.columns == ["id", "q"]
    assert f"first {shown} items" in table.preview_note
    assert f"item {shown + 1} is the first that does not fit" in table.preview_note
    # Not one list of objects: read whole, and its reader says what is wrong.
    path.write_text(json.dumps({"rows": rows}))
    with pytest.raises(DatasetError, match="holds one object"):
        readers.read_head(path, None, "big.json", max_bytes=2000)
