"""One entry point per round, whatever the judge's kind. Pure Python, no Django.

A judge run's job builds a `JudgeSpec` once (`JudgeSpec.of(judge)` reads a Judge row's fields
by name) and then, for each round, calls `score_text(spec, text, references)` where `text` is
the LLM judge's reply (rubric, mcq) or the response itself (mcq_rule, metric). The result is a
`RubricResult`: a value per subject name and a reason. Failures raise `JudgeReplyError` (its
`kind` is the ErrorKind to store) or, for a bad answer key in the item, `AnswerKeyError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.judges.metrics import evaluate, get_metric, validate_options
from apps.judges.parsing import (
    RubricResult,
    format_labels,
    labels_for,
    parse_answer_key,
    parse_mcq_choice,
    parse_rubric_reply,
    score_mcq,
    validate_subjects,
)

KINDS = ("rubric", "mcq", "mcq_rule", "metric")


@dataclass(frozen=True)
class JudgeSpec:
    """What `score_text` needs to know about a judge (the same names as the Judge model)."""

    kind: str
    subjects: tuple[Mapping[str, Any], ...] = ()
    label_type: str = "upper"
    label_count: int = 4
    metric: str = ""
    metric_options: Mapping[str, Any] = field(default_factory=dict)
    postprocess: str = ""
    ask_confidence: bool = False

    @classmethod
    def of(cls, judge: Any) -> JudgeSpec:
        return cls(
            kind=str(judge.kind),
            subjects=tuple(judge.subjects or ()),
            label_type=str(judge.label_type),
            label_count=int(judge.label_count),
            metric=judge.metric or "",
            metric_options=dict(judge.metric_options or {}),
            postprocess=judge.postprocess or "",
            ask_confidence=bool(getattr(judge, "ask_confidence", False)),
        )

    @property
    def uses_llm(self) -> bool:
        return self.kind in ("rubric", "mcq")

    @property
    def subject_names(self) -> list[str]:
        """Rubric: its subjects. Others have one value, named by their single subject if
        given, else "score" (multiple choice) or the metric's name."""
        if self.kind == "rubric" or self.subjects:
            return [str(subject["name"]).strip() for subject in self.subjects]
        return [self.metric if self.kind == "metric" else "score"]

    def check(self) -> None:
        """Raise ValueError naming the first problem in the judge's settings (for forms)."""
        if self.kind not in KINDS:
            raise ValueError(f"Judge kind must be one of {', '.join(KINDS)}, not {self.kind!r}.")
        if self.kind == "rubric":
            validate_subjects(self.subjects)
            return
        if len(self.subjects) > 1:
            raise ValueError(f"A {self.kind} judge gives one value; list at most one subject.")
        if self.subjects:
            validate_subjects(self.subjects)
        if self.kind == "metric":
            get_metric(self.metric)
            validate_options(self.metric, self.metric_options)
        else:
            labels_for(self.label_type, self.label_count)


def score_text(spec: JudgeSpec, text: str, references: Sequence[str] = ()) -> RubricResult:
    """The values of one round.

    rubric: `text` is the judge's reply, parsed with `parse_rubric_reply`.
    mcq / mcq_rule: `text` is the judge's reply / the response; the labels it chose are
    compared with the answer key, `references[0]` (100 when equal, else 0).
    metric: `text` is the response, scored against `references` after post-processing.
    """
    if spec.kind == "rubric":
        return parse_rubric_reply(text, spec.subjects, confidence=spec.ask_confidence)
    name = spec.subject_names[0]
    if spec.kind in ("mcq", "mcq_rule"):
        if not references:
            raise ValueError("A multiple-choice judge needs the item's answer key as reference.")
        answer = parse_answer_key(references[0], spec.label_type, spec.label_count)
        chosen = parse_mcq_choice(text, spec.label_type, spec.label_count)
        reason = f"Chose {format_labels(chosen)}; the answer is {format_labels(answer)}."
        return RubricResult({name: score_mcq(chosen, answer)}, reason)
    if spec.kind == "metric":
        value = evaluate(
            spec.metric, text, list(references), spec.metric_options, spec.postprocess or None
        )
        return RubricResult({name: value}, "")
    raise ValueError(f"Judge kind must be one of {', '.join(KINDS)}, not {spec.kind!r}.")
