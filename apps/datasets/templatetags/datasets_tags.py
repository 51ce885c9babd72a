from typing import Any

from django import template

from apps.datasets.values import as_text

register = template.Library()


@register.filter
def item_field(item: Any, name: str) -> str:
    """One field of an item as plain text (lists and objects as JSON); escaped by the template."""
    return as_text(item.fields.get(name) if hasattr(item, "fields") else None)
