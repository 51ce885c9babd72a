"""The reader turns each file shape into columns and rows, and names what is wrong otherwise."""

import json

import pytest

from apps.datasets.readers import DatasetError, detect_format, read_head, read_table
from tests.datasets import samples


def error_of(data: bytes, name: str = "file.csv", fmt: str | None = None) -> str:
    with pytest.raises(DatasetError) as caught:
        read_table(data, fmt, name)
    return str(caught.value)


# ---- the four shapes ----------------------------------------------------------------------
def test_mmlu_csv_with_bom_quotes_newlines_and_chinese_keeps_text_as_text():
    table = read_table(samples.MMLU_CSV, file_name="mmlu.csv")
    assert table.format == "csv"
    assert table.columns == ["question", "A", "B", "C", "D", "answer", "response"]  # no BOM
    first, chinese, odd = table.rows
    assert first["question"] == 'Which is prime, given "primes" are odd?'
    assert first["response"] == "The answer is C.\r\nBecause 7 is prime."
    assert chinese["question"] == "中国的首都是哪里？" and chinese["B"] == "北京"
    assert odd["question"] == "007" and odd["A"] == "NA" and odd["C"] == "-3"
    assert table.where(0) == "row 2" and table.where(2) == "row 4"


def test_instruction_jsonl_keeps_history_as_a_list():
    table = read_table(samples.INSTRUCTION_JSONL, file_name="sft.jsonl")
    assert table.format == "jsonl"
    assert table.columns == ["instruction", "input", "output", "history", "response"]
    assert table.rows[0]["history"] == [["Hi", "Salut"], ["Thanks", "Merci"]]
    assert table.rows == samples.INSTRUCTION_ROWS


def test_json_array_of_objects_keeps_json_values():
    table = read_table(samples.JSON_ARRAY, file_name="qa.json")
    assert table.format == "json"
    assert table.columns == ["id", "question", "answers", "meta"]
    assert table.rows == samples.JSON_ROWS
    assert table.where(1) == "item 2"


def test_nli_jsonl_with_tag_lists():
    table = read_table(samples.NLI_JSONL, file_name="nli.jsonl")
    assert table.rows[0]["tags"] == ["music", "easy"]
    assert table.columns == ["uid", "premise", "hypothesis", "label", "tags"]


def test_json_rows_may_leave_out_keys_and_columns_are_their_union():
    data = b'{"a": 1}\n\n{"b": "x", "a": 2}\n'
    table = read_table(data, file_name="x.jsonl")
    assert table.columns == ["a", "b"]
    assert table.where(1) == "line 3"  # blank lines still count


def test_semicolon_and_tab_separated_files():
    assert read_table(b"a;b\n1;2\n", file_name="x.csv").rows == [{"a": "1", "b": "2"}]
    assert read_table(b"a\tb\n1\t2\n", file_name="x.tsv").rows == [{"a": "1", "b": "2"}]


# ---- format detection and override --------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("data.csv", "a,b\n1,2\n", "csv"),
        ("data.json", '[{"a": 1}]', "json"),
        ("data.jsonl", '{"a": 1}\n{"a": 2}\n', "jsonl"),
        ("data.json", '{"a": 1}\n{"a": 2}\n', "jsonl"),  # content wins: one object a line
        ("data.txt", '[{"a": 1}]', "json"),
        ("upload", '{"a": 1}\n', "jsonl"),
        ("data.json", '{"a": 1}', "json"),  # a single object named .json is JSON (and an error)
        ("data.jsonl", '{"a": \n', "jsonl"),  # a broken first line keeps the extension's word
        ("noext", "q,a\nx,y\n", "csv"),
    ],
)
def test_format_is_detected_from_content_and_extension(name, content, expected):
    assert detect_format(name, content) == expected


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("x.jsonl", '1\n"two"\n[3]\n', "jsonl"),  # numbers and strings are not a CSV file
        ("x.ndjson", "plain text\n", "jsonl"),
        ("x.jsonl", "[3]\n1\n", "jsonl"),  # a list on line 1 of several: a wrong JSONL line
        ("x.json", '"hello"', "json"),
        ("x.json", "1\n2\n", "json"),
        ("x.csv", "[id],question\n1,a\n", "csv"),  # a CSV header may start with [ or {
        ("x.tsv", '{"a"}\tb\n1\t2\n', "csv"),
    ],
)
def test_a_known_extension_decides_the_format_whatever_the_content(name, content, expected):
    assert detect_format(name, content) == expected


def test_a_json_named_file_of_non_objects_says_what_it_holds_and_what_is_expected():
    message = error_of(b'1\n"two"\n[3]\n', "x.jsonl")
    assert message.startswith("Line 1 is a number, not a JSON object; each line of a JSONL file")
    message = error_of(b'1\n"two"\n[3]\n', "x.json")
    assert message == (
        "The JSON is not valid at line 2, column 1: Extra data. The file starts with a number "
        "and goes on after it; a JSON file must hold one list of objects, like "
        '[{"question": ...}, {"question": ...}].'
    )
    assert error_of(b'"hello"', "x.json") == (
        "The JSON file holds a string, not a list of objects. "
        'Expected [{"question": ...}, {"question": ...}]: one object per row.'
    )
    assert read_table(b"[id],q\n1,a\n", file_name="x.csv").columns == ["[id]", "q"]


def test_format_can_be_overridden():
    data = b'{"a": 1}\n{"a": 2}\n'
    assert read_table(data, None, "x.txt").format == "jsonl"
    message = error_of(data, "x.txt", fmt="json")
    assert "line 2" in message and "JSONL" in message
    assert read_table(b"a\n[x]\n", "csv", "x.json").rows == [{"a": "[x]"}]


# ---- every error, in plain words naming where ---------------------------------------------
def test_empty_file():
    assert error_of(b"") == "The file is empty."
    assert error_of(b"\xef\xbb\xbf \n\n") == "The file is empty."
    assert error_of(b"\n\n", "x.jsonl") == "The file is empty."


def test_header_only():
    message = error_of(b"question,answer\r\n")
    assert "only a header row (question, answer)" in message and "no data rows" in message
    assert "empty list" in error_of(b"[]", "x.json")


def test_not_utf8_names_line_and_fix():
    message = error_of("question\nok\ncafé\n".encode("cp1252"))
    assert "not UTF-8" in message
    assert "line 3" in message and "0xE9" in message
    assert "CSV UTF-8" in message and "Save it as UTF-8" in message


def test_utf16_is_named_as_such():
    message = error_of("a,b\n1,2\n".encode("utf-16"))
    assert "UTF-16" in message and "CSV UTF-8" in message


def test_broken_json_line_names_its_line():
    message = error_of(b'{"a": 1}\n{"a": 2}\n{"a": 3,}\n', "x.jsonl")
    assert message.startswith("Line 3 is not valid JSON")


def test_broken_json_file_names_line_and_column():
    message = error_of(b'[\n  {"a": 1},\n  {"a" 2}\n]', "x.json")
    assert "line 3, column 8" in message


def test_ragged_csv_row_names_row_line_and_counts():
    message = error_of(b"a,b,c\n1,2,3\n4,5\n")
    assert message.startswith("Row 3 (line 3) has 2 fields, but the header has 3 columns")
    # A quoted newline makes the line differ from the row; both are given.
    message = error_of(b'a,b,c\n1,"x\ny",3\n\n4,5,6,7\n')
    assert message.startswith("Row 4 (line 5) has 4 fields, but the header has 3 columns")


def test_unclosed_quote_names_its_row():
    message = error_of(b'a,b\n1,2\n3,"never closed\n4,5\n')
    assert message.startswith("Row 3 (line 3) opens a quoted field that is never closed")


def test_header_problems_name_the_column():
    assert "column 'a' twice (columns 1 and 3)" in error_of(b"a,b,a\n1,2,3\n")
    assert "Column 2 of the header row has no name" in error_of(b"a,,c\n1,2,3\n")


def test_json_that_is_not_a_list_of_objects():
    message = error_of(b'{"data": [{"a": 1}], "version": 2}', "x.json")
    assert "one object (keys 'data', 'version'), not a list of objects" in message
    assert "holds a string" in error_of(b'"hello"', "x.json", fmt="json")
    message = error_of(json.dumps([{"a": 1}, {"a": 2}, ["a", 3]]).encode(), "x.json")
    assert message.startswith("Item 3 of the JSON list is a list, not an object")


def test_jsonl_lines_that_are_not_objects():
    message = error_of(b'{"a": 1}\n"just text"\n', "x.jsonl")
    assert message.startswith("Line 2 is a string, not a JSON object")
    assert error_of(b'{"a": 1}\n[1]\n', "x.jsonl").startswith("Line 2 is a list")


def test_nul_bytes_and_binary_content():
    message = error_of(b"a,b\n1,2\n3,\x00\x01\x02\n")
    assert "NUL bytes" in message and "line 3" in message and "binary" in message
    assert "Excel workbook" in error_of(b"PK\x03\x04\x14\x00rest-of-a-zip", "book.xlsx")


def test_file_over_the_size_limit(settings):
    settings.DATASET_MAX_UPLOAD_BYTES = 1024 * 1024
    message = error_of(b"a\n" + b"x\n" * 600_000)
    assert "The file is 1.1 MB; the limit is 1.0 MB" in message
    assert "DATASET_MAX_UPLOAD_BYTES" in message


def test_size_limit_applies_to_paths_before_reading(settings, tmp_path):
    settings.DATASET_MAX_UPLOAD_BYTES = 10
    path = tmp_path / "big.csv"
    path.write_bytes(b"a,b\n1,2\n3,4\n")
    with pytest.raises(DatasetError, match="limit is 10 bytes"):
        read_table(path)
    with pytest.raises(DatasetError, match="There is no file at"):
        read_table(tmp_path / "missing.csv")


# ---- previews of big files ----------------------------------------------------------------
def test_a_big_csv_is_previewed_from_its_start_even_when_cut_inside_a_quoted_field(tmp_path):
    rows = [[f"id{i}", f"line one\nline two of row {i}", "x"] for i in range(400)]
    data = samples.csv_bytes(["id", "text", "other"], rows)
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    for cut in (1000, 1001, 1017, 1030, 1041):
        table = read_head(path, max_bytes=cut)
        assert not table.complete and 0 < len(table.rows) < 400
        assert table.rows[0] == {"id": "id0", "text": "line one\nline two of row 0", "other": "x"}
        assert all(row["text"].startswith("line one\nline two") for row in table.rows)
    whole = read_head(path, max_bytes=len(data))
    assert whole.complete and len(whole.rows) == 400


def test_errors_in_the_start_of_a_big_file_are_still_reported(tmp_path):
    path = tmp_path / "big.csv"
    path.write_bytes(b"a,b\n1,2\n3\n" + b"5,6\n" * 1000)
    with pytest.raises(DatasetError, match=r"Row 3 \(line 3\) has 1 fields"):
        read_head(path, max_bytes=100)
    path = tmp_path / "big.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2\n' + b'{"a": 3}\n' * 1000)
    with pytest.raises(DatasetError, match="Line 2 is not valid JSON"):
        read_head(path, max_bytes=100)


def test_a_big_jsonl_file_is_previewed_by_whole_lines_and_json_by_whole_items(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(
        b"".join(json.dumps({"n": i, "t": "中文" * 5}).encode() + b"\n" for i in range(300))
    )
    table = read_head(path, max_bytes=500)
    assert not table.complete and [row["n"] for row in table.rows] == list(range(len(table.rows)))
    path = tmp_path / "big.json"
    path.write_bytes(json.dumps([{"n": i} for i in range(300)]).encode())
    table = read_head(path, max_bytes=500)
    # Items of 8 to 10 characters: 500 hold the first 56 of them ({"n": 0} … {"n": 55}).
    assert not table.complete and table.rows == [{"n": i} for i in range(56)]
    assert table.cut_at == 57
