"""The item browser: search, tag filter and keyset pages that stay fast at 100k+ items."""

import json
from collections.abc import Mapping as AnyMapping
from dataclasses import dataclass
from typing import Any

from apps.datasets.conversations import Bubble, bubbles
from apps.datasets.models import Dataset, Item

PAGE_SIZE = 50


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def item_page(
    dataset: Dataset, params: AnyMapping[str, str], size: int = PAGE_SIZE
) -> dict[str, Any]:
    """One page of items after (or before) a position, with the links to its neighbours.

    No COUNT over the filtered items: with search that is a full scan on every keystroke.
    The unfiltered total and each tag's total are known from the import.
    """
    q = (params.get("q") or "").strip()
    tag = (params.get("tag") or "").strip()
    after, before = _int(params.get("after")), _int(params.get("before"))
    items = dataset.items.search(q).tagged(tag).defer("search_text", "tags_text")
    if before is not None:
        page = items.page_before(before, size)
        has_previous, page = len(page) > size, page[-size:]
        has_next = True
    else:
        page = items.page_after(after, size)
        has_next, page = len(page) > size, page[:size]
        has_previous = after is not None
    if q:
        total = None
    elif tag:
        total = dataset.tag_counts.get(tag, 0)
    else:
        total = dataset.row_count
    return {
        "items": page,
        "q": q,
        "tag": tag,
        "item_query": {name: value for name, value in (("q", q), ("tag", tag)) if value},
        "total": total,
        "next_after": page[-1].position if page and has_next else None,
        "previous_before": page[0].position if page and has_previous else None,
        "preview_columns": (shown := _preview_columns(dataset)),
        # Named under the table: columns left out of it with no note read as lost (#28.6).
        "more_columns": [
            c
            for c in dataset.columns
            if c not in shown and c not in (dataset.id_column, dataset.tags_column)
        ],
    }


def _preview_columns(dataset: Dataset) -> list[str]:
    """The few columns the item table shows: inputs first, then the reference, then every
    response column (answers a model already gave are what the dataset is often for)."""
    columns = [c for c in dataset.input_columns if c != dataset.id_column][:2]
    if dataset.reference_column:
        columns.append(dataset.reference_column)
    columns += [c for c in dataset.response_columns if c not in columns]
    return columns or list(dataset.columns[:3])


@dataclass
class FieldView:
    name: str
    roles: list[str]
    value: Any  # as stored; the page renders it ({% model_text %}), folding long text
    is_json: bool
    # The conversation column: drawn once, as the dialogue above; here its stored JSON, folded.
    stored: str = ""


def item_view_fields(dataset: Dataset, item: Item) -> list[FieldView]:
    """Every field of an item, with the roles its column plays."""
    roles = dict(dataset.column_roles())
    names = list(dict.fromkeys([*dataset.columns, *item.fields]))
    views = []
    for name in names:
        if name not in item.fields:
            continue
        value = item.fields[name]
        view = FieldView(name, roles.get(name, []), value, not isinstance(value, str))
        if name == dataset.conversation_column and item.is_conversation:
            view.stored = json.dumps(item.conversation, ensure_ascii=False, indent=2)
        views.append(view)
    return views


def conversation_view(item: Item) -> list[Bubble]:
    """The item's conversation as the review pages draw a dialogue, each user message with
    its turn's reference answer when the dataset has them."""
    references = list(item.turn_references)
    return bubbles(item.messages(), references if references else None)
