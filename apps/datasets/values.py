"""Item field values as text. Plain Python, no Django: the judge's core modules (reply parsing,
prompt building) use it and stay importable without settings."""

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any


def as_text(value: Any, indent: int | None = None) -> str:
    """A field value as text: strings as they are, nothing as "", anything else as JSON
    (non-ASCII kept; `indent` for reading on a page). The one rendering prompts, pages and
    imports share, so a list field reads the same in a judge prompt and on the review page."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=indent)


def prompt_inputs(
    fields: Mapping[str, Any], input_columns: Sequence[str] | None, hidden: Collection[str]
) -> dict[str, Any]:
    """An item's inputs as judges and pages show them: the mapped input columns, or without a
    mapping every field but the `hidden` ones (answers, reference, tags: `Dataset.hidden_columns`)."""
    if input_columns:
        return {name: fields.get(name) for name in input_columns}
    return {name: value for name, value in fields.items() if name not in hidden}
