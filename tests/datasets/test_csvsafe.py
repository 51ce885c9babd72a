"""The shared CSV neutraliser that every export uses."""

import csv
import io

import pytest

from apps.datasets import csvsafe


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_text_starting_like_a_formula_gets_a_quote(start):
    assert csvsafe.neutralise(f"{start}SUM(A1)") == f"'{start}SUM(A1)"
    assert csvsafe.cell(f"{start}1") == f"'{start}1"


def test_other_text_numbers_and_json_values():
    assert csvsafe.neutralise("plain = text") == "plain = text"
    assert csvsafe.cell(-3) == "-3" and csvsafe.cell(2.5) == "2.5"  # numbers are not formulas
    assert csvsafe.cell(True) == "true" and csvsafe.cell(None) == ""
    assert csvsafe.cell(["=a", 1]) == '["=a", 1]'
    assert csvsafe.cell({"k": "中"}) == '{"k": "中"}'


def test_csv_lines_stream_a_bom_header_and_rows_in_chunks(monkeypatch):
    monkeypatch.setattr(csvsafe, "ROWS_PER_CHUNK", 2)
    chunks = list(csvsafe.csv_lines(["a", "=b"], [["1", "=2"], ["x,y", "z\nw"], ["3", "@4"]]))
    assert len(chunks) == 3  # the header, then two chunks of rows
    text = "".join(chunks)
    assert text.startswith("\ufeff")
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))
    assert rows == [["a", "'=b"], ["1", "'=2"], ["x,y", "z\nw"], ["3", "'@4"]]


def test_attachment_names_are_safe_in_a_header():
    assert csvsafe.attachment_name('my "data"/../x.csv') == "my-data-..-x.csv"
    assert csvsafe.attachment_name("数据") == "export"
