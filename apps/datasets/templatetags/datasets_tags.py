import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def item_field(item: Any, name: str) -> str:
    """One field of an item as plain text (lists and objects as JSON); escaped by the template."""
    value = item.fields.get(name) if hasattr(item, "fields") else None
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
