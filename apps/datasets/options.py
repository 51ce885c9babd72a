"""The options of a multiple-choice item and their labels. Plain Python, no Django.

An item's options are read from *option columns*, in order: each column one option (the demo's
A, B, C, D), or one column whose value is a list of options (`["Mars", "Venus", …]`). The i-th
option gets the i-th label of the label type: upper A, B, C…; lower a, b, c…; digit 1, 2, 3….
Multiple-choice judges (apps.judges.parsing) and log-likelihood choice runs share these labels.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from apps.datasets.values import as_text

LABEL_TYPES = ("upper", "lower", "digit")
MAX_LABELS = {"upper": 26, "lower": 26, "digit": 9}


class OptionsError(ValueError):
    """An item whose options cannot be read; the message names the column."""


def labels_for(label_type: str, label_count: int) -> list[str]:
    """The option labels: upper A, B, C…; lower a, b, c…; digit 1, 2, 3… (at most 9, so that a
    reply "13" can only mean options 1 and 3)."""
    if label_type not in LABEL_TYPES:
        raise ValueError(f"Label type must be one of {', '.join(LABEL_TYPES)}, not {label_type!r}.")
    limit = MAX_LABELS[label_type]
    if not isinstance(label_count, int) or not 1 <= label_count <= limit:
        raise ValueError(
            f"Label count for {label_type} labels must be 1–{limit}, not {label_count}."
        )
    if label_type == "digit":
        return [str(i) for i in range(1, label_count + 1)]
    first = "A" if label_type == "upper" else "a"
    return [chr(ord(first) + i) for i in range(label_count)]


def label_type_of(name: str) -> str | None:
    """The label type a column name is a label of ("B" → upper, "2" → digit), else None."""
    if len(name) == 1 and name.isdigit() and name != "0":
        return "digit"
    if len(name) == 1 and name.isascii() and name.isalpha():
        return "upper" if name.isupper() else "lower"
    return None


def default_option_columns(columns: Sequence[str]) -> tuple[list[str], str]:
    """The columns named like consecutive labels from the first (A, B, C, D; 1, 2, 3), in label
    order, and their label type; ([], "upper") when the file has none."""
    for label_type in LABEL_TYPES:
        named = set(columns)
        found = []
        for label in labels_for(label_type, MAX_LABELS[label_type]):
            if label not in named:
                break
            found.append(label)
        if len(found) >= 2:
            return found, label_type
    return [], "upper"


def item_options(fields: Mapping[str, Any], columns: Sequence[str], label_type: str) -> list[str]:
    """The item's options in label order (see the module doc). Raises OptionsError naming the
    column when one is missing or empty, or when there are fewer than 2 or more than the
    label type has labels."""
    if len(columns) == 1:
        value = fields.get(columns[0])
        if not isinstance(value, list):
            raise OptionsError(
                f"Option column “{columns[0]}” must hold a list of options when it is the only "
                "option column."
            )
        options = [as_text(option) for option in value]
        where = [f"option {n + 1} of column “{columns[0]}”" for n in range(len(options))]
    else:
        options = [as_text(fields.get(column)) for column in columns]
        where = [f"option column “{column}”" for column in columns]
    for option, place in zip(options, where, strict=True):
        if not option.strip():
            raise OptionsError(f"The item has no value in {place}.")
    if len(options) < 2:
        raise OptionsError(f"The item has {len(options)} option; choices need at least 2.")
    limit = MAX_LABELS.get(label_type, 0)
    if len(options) > limit:
        raise OptionsError(
            f"The item has {len(options)} options, more than the {limit} {label_type} labels."
        )
    return options
