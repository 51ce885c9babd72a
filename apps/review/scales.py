"""What the digit keys mean on one subject of the item page, decided by the subject's scale.

A digit must never be taken literally where it makes no sense: on an MCQ subject (0 or 100)
"1" used to save 1, a value the judge can never give. So each subject gets one of three keymaps:

- two-valued (MCQ, pass/fail metrics): 0 gives the low value, 1 the high one;
- a small integer range (1–5, 0–10): each digit inside the range is that value;
- anything else (0–100 continuous, fractional bounds): no digit keys; the value is typed.

The page carries the map as data; the script only looks keys up in it.
"""

import json
from dataclasses import dataclass
from typing import Any

from apps.judges.models import Judge

# Rule-based metrics whose every value is the low or the high end of their range (100 on a
# match, else 0). The metric registry declares no such flag yet, so it is listed here; a metric
# missing from this list only loses its keys (falls back to typing), it is never mis-keyed.
PASS_FAIL_METRICS = frozenset({"exact_match", "accuracy", "regex_match"})

# A range counts as small when all of it fits on the digit row give or take one value (0–10).
SMALL_RANGE = 10


@dataclass(frozen=True)
class DigitKeys:
    """The digit shortcuts of one subject: key → value, and how the keyboard help says it."""

    scale: str  # "two-valued" | "digits" | "typed"
    values: dict[str, float]
    help: list[tuple[str, str]]  # (keys, meaning) rows for the "?" panel

    @property
    def as_json(self) -> str:
        """For a data attribute; the template escapes it like any other text."""
        return json.dumps(self.values)

    @property
    def hint(self) -> str:
        """One short line for the subject's card (two-valued only: the mapping is not obvious)."""
        if self.scale != "two-valued":
            return ""
        return " · ".join(f"{keys} → {meaning}" for keys, meaning in self.help)


def _num(value: float) -> str:
    return f"{value:g}"


def is_two_valued(judge: Judge) -> bool:
    """Whether every value of this judge's subject is its min or its max (right/wrong)."""
    if judge.kind in (Judge.Kind.MCQ, Judge.Kind.MCQ_RULE, Judge.Kind.CHOICE):
        return True
    return judge.kind == Judge.Kind.METRIC and judge.metric in PASS_FAIL_METRICS


def digit_keys(judge: Judge, spec: dict[str, Any]) -> DigitKeys:
    try:
        low, high = float(spec["min"]), float(spec["max"])
    except (KeyError, TypeError, ValueError):
        return DigitKeys("typed", {}, [("0–9", "nothing here: type the value")])
    if low < high and is_two_valued(judge):
        no, yes = ("fail", "pass") if judge.kind == Judge.Kind.METRIC else ("wrong", "right")
        return DigitKeys(
            "two-valued",
            {"0": low, "1": high},
            [("0", f"{_num(low)} ({no})"), ("1", f"{_num(high)} ({yes})")],
        )
    digits = [d for d in range(10) if low <= d <= high]
    small = low.is_integer() and high.is_integer() and high - low <= SMALL_RANGE
    if small and digits:
        keys = f"{digits[0]}–{digits[-1]}" if len(digits) > 1 else str(digits[0])
        others = [n for n in range(int(low), int(high) + 1) if n not in digits]
        meaning = "that value"
        if others:
            meaning += f" (type {others[0]})" if len(others) == 1 else " (type the others)"
        return DigitKeys("digits", {str(d): float(d) for d in digits}, [(keys, meaning)])
    return DigitKeys("typed", {}, [("0–9", f"nothing: type the value ({_num(low)}–{_num(high)})")])
