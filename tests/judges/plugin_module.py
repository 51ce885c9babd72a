"""Plug-ins listed by the EVALSITE_PLUGINS setting in tests/judges/test_plugins.py (a module,
not a package with entry points): one that raises on some items, one that gives two values."""

from typing import Any


def fragile(prediction: str, references: list[str], item: dict) -> float:
    """Length over the item's `divisor`: raises ZeroDivisionError where that is 0 (a bug in a
    plug-in, which must fail only those items)."""
    return min(100.0, len(prediction) / int(item["divisor"]))


def two_values(prediction: str, references: list[str], item: dict) -> dict[str, Any]:
    """Characters and words of the response, with a reason."""
    return {
        "chars": len(prediction),
        "words": len(prediction.split()),
        "reason": f"{len(prediction)} characters",
    }


def shout(text: str) -> str:
    """Upper case."""
    return text.upper()


EVALSITE_METRICS = {"fragile": fragile, "two_values": two_values}
EVALSITE_POSTPROCESSORS = {"shout": shout}
