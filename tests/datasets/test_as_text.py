"""One rendering of a field value as text, shared by prompts, pages, imports and CSV cells."""

from apps.datasets.csvsafe import cell
from apps.datasets.importing import split_tags
from apps.datasets.values import as_text


def test_strings_stay_as_they_are_and_nothing_is_empty() -> None:
    assert as_text("  spaced\nlines ") == "  spaced\nlines "
    assert as_text(None) == ""
    assert as_text("") == ""


def test_other_values_are_json_with_non_ascii_kept() -> None:
    assert as_text(["Zürich", 2]) == '["Zürich", 2]'
    assert as_text({"a": None}) == '{"a": null}'
    assert as_text(0) == "0"
    assert as_text(False) == "false"


def test_indent_is_for_reading_on_a_page() -> None:
    assert as_text({"a": [1]}, indent=2) == '{\n  "a": [\n    1\n  ]\n}'
    assert as_text("text", indent=2) == "text"


def test_csv_cells_and_tags_use_it() -> None:
    assert cell({"k": "é"}) == '{"k": "é"}'
    assert cell(["=1"]) == '["=1"]'
    assert cell("=1") == "'=1"
    # A null inside a tag list is no tag, not the tag "null".
    assert split_tags(["a", None, {"b": 1}]) == ["a", '{"b": 1}']
