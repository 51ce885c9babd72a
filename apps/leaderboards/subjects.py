"""A judge's subjects as the boards read them: range, direction, worst and best value."""

import math
from dataclasses import dataclass
from typing import Any

from apps.judges.metrics import METRICS, describe_bleu_tokenizer
from apps.judges.models import Judge


# ---- subjects ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SubjectInfo:
    name: str
    label: str
    unit: str
    low: float | None
    high: float | None
    higher_is_better: bool
    # How the values were computed where a board should say it (BLEU's tokenizer).
    note: str = ""

    @property
    def has_range(self) -> bool:
        return self.low is not None and self.high is not None and self.high > self.low

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def worst(self) -> float | None:
        """The value a failed or missing item counts as in strict scoring (needs a range)."""
        if not self.has_range:
            return None
        return self.low if self.higher_is_better else self.high

    @property
    def best(self) -> float | None:
        """The best value of the range (pass@k's passing value); None without a range."""
        if not self.has_range:
            return None
        return self.high if self.higher_is_better else self.low

    @property
    def range_text(self) -> str:
        return f"{self.low:g}–{self.high:g}" if self.has_range else "no declared range"


def as_number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def subject_infos(judge: Judge) -> list[SubjectInfo]:
    """Each subject with its range and direction: the subject's own declaration wins, then the
    metric registry (for metric judges), then higher-is-better."""
    entry = METRICS.get(judge.metric) if judge.kind == Judge.Kind.METRIC else None
    infos = []
    bounds: tuple[float | None, float | None] = entry.range if entry else (None, None)
    for subject in judge.subjects:
        name = subject["name"]
        higher = subject.get("higher_is_better", entry.higher_is_better if entry else True)
        label = subject.get("label") or (
            entry.display_name if len(judge.subjects) == 1 and entry else name
        )
        infos.append(
            SubjectInfo(
                name=name,
                label=str(label),
                unit=str(subject.get("unit") or (entry.unit if entry else "")),
                low=as_number(subject.get("min", bounds[0])),
                high=as_number(subject.get("max", bounds[1])),
                higher_is_better=bool(higher),
                note=(
                    f"tokenized {describe_bleu_tokenizer(judge.metric_options)}"
                    if entry and entry.name == "bleu"
                    else ""
                ),
            )
        )
    return infos
