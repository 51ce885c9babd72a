"""One entry point per round, whatever the judge's kind. Pure Python, no Django.

A judge run's job builds a `JudgeSpec` once (`JudgeSpec.of(judge)` reads a Judge row's fields
by name) and then, for each round, calls `score_text(spec, text, references)` where `text` is
the LLM judge's reply (rubric, mcq), the response itself (mcq_rule, metric) or a choice-scoring
run's picks (choice, see `score_choice`). The result is a
`RubricResult`: a value per subject name and a reason. Failures raise `JudgeReplyError` (its
`kind` is the ErrorKind to store) or, for a bad answer key in the item, `AnswerKeyError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.judges import plugins
from apps.judges.metrics import METRICS, POSTPROCESSORS, evaluate, get_metric, validate_options
from apps.judges.parsing import (
    SINGLE_VALUE_FORMATS,
    RubricResult,
    compile_reply_pattern,
    format_labels,
    labels_for,
    parse_answer_key,
    parse_mcq_choice,
    parse_rubric_reply,
    score_mcq,
    validate_subjects,
)

KINDS = ("rubric", "mcq", "mcq_rule", "metric", "choice")
# A choice judge's values: the raw pick's and the length-normalised pick's accuracy.
CHOICE_VALUES = ("accuracy", "accuracy_norm")


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
    postprocess_reference: bool = False
    converter: str = ""  # a field converter plug-in
    plugin_code: Mapping[str, Any] = field(default_factory=dict)  # Judge.plugin_code
    ask_confidence: bool = False
    reply_format: str = "json"
    reply_pattern: str = ""

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
            postprocess_reference=bool(getattr(judge, "postprocess_reference", False)),
            converter=str(getattr(judge, "converter", "") or ""),
            plugin_code=dict(getattr(judge, "plugin_code", None) or {}),
            ask_confidence=bool(getattr(judge, "ask_confidence", False)),
            reply_format=str(getattr(judge, "reply_format", "") or "json"),
            reply_pattern=str(getattr(judge, "reply_pattern", "") or ""),
        )

    @property
    def uses_llm(self) -> bool:
        return self.kind in ("rubric", "mcq")

    @property
    def uses_plugins(self) -> bool:
        """A metric judge that scores with Python plug-ins: a plug-in metric, post-processor or
        field converter (apps/judges/plugins.py)."""
        return self.kind == "metric" and (
            self.metric not in METRICS
            or bool(self.converter)
            or bool(self.postprocess and self.postprocess not in POSTPROCESSORS)
        )

    @property
    def subject_names(self) -> list[str]:
        """Rubric: its subjects. Others have one value, named by their single subject if
        given, else "score" (multiple choice) or the metric's name."""
        if self.kind == "rubric" or self.subjects:
            return [str(subject["name"]).strip() for subject in self.subjects]
        if self.kind == "choice":
            return list(CHOICE_VALUES)
        return [self.metric if self.kind == "metric" else "score"]

    def check(self) -> None:
        """Raise ValueError naming the first problem in the judge's settings (for forms)."""
        if self.kind not in KINDS:
            raise ValueError(f"Judge kind must be one of {', '.join(KINDS)}, not {self.kind!r}.")
        if self.kind == "rubric":
            validate_subjects(self.subjects)
            if self.reply_format in SINGLE_VALUE_FORMATS and len(self.subjects) != 1:
                raise ValueError(
                    "This reply format gives one number: list one subject, or read the reply "
                    "as JSON, “Score: N/M” per subject or a regular expression."
                )
            if self.reply_format == "regex":
                compile_reply_pattern(self.reply_pattern, self.subjects)
            return
        if self.kind == "choice":
            if self.subjects and self.subject_names != list(CHOICE_VALUES):
                raise ValueError(
                    "A log-likelihood choice judge gives accuracy and accuracy_norm, no other "
                    "subjects."
                )
            return
        if self.kind == "metric" and self.uses_plugins:
            plugins.check(self)
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


def score_text(
    spec: JudgeSpec,
    text: str,
    references: Sequence[str] = (),
    item: Mapping[str, Any] | None = None,
) -> RubricResult:
    """The values of one round.

    rubric: `text` is the judge's reply, parsed with `parse_rubric_reply`.
    mcq / mcq_rule: `text` is the judge's reply / the response; the labels it chose are
    compared with the answer key, `references[0]` (100 when equal, else 0).
    metric: `text` is the response, scored against `references` after post-processing (of the
    references too when the judge says so). With plug-ins, `item` is the item's fields; a
    plug-in that raises raises `plugins.PluginRaised`.
    """
    if spec.kind == "rubric":
        return parse_rubric_reply(
            text,
            spec.subjects,
            confidence=spec.ask_confidence,
            reply_format=spec.reply_format,
            pattern=spec.reply_pattern,
        )
    name = spec.subject_names[0]
    if spec.kind in ("mcq", "mcq_rule"):
        if not references:
            raise ValueError("A multiple-choice judge needs the item's answer key as reference.")
        answer = parse_answer_key(references[0], spec.label_type, spec.label_count)
        chosen = parse_mcq_choice(text, spec.label_type, spec.label_count)
        reason = f"Chose {format_labels(chosen)}; the answer is {format_labels(answer)}."
        return RubricResult({name: score_mcq(chosen, answer)}, reason)
    if spec.kind == "choice":
        return score_choice(spec, text, references)
    if spec.kind == "metric" and spec.uses_plugins:
        return plugins.score_item(spec, text, list(references), item)
    if spec.kind == "metric":
        value = evaluate(
            spec.metric,
            text,
            list(references),
            spec.metric_options,
            spec.postprocess or None,
            postprocess_reference=spec.postprocess_reference,
        )
        return RubricResult({name: value}, "")
    raise ValueError(f"Judge kind must be one of {', '.join(KINDS)}, not {spec.kind!r}.")


def score_choice(spec: JudgeSpec, text: str, references: Sequence[str]) -> RubricResult:
    """A choice-scoring run's picks, `text` = {"pick", "pick_norm", "label_type", "label_count"}
    as JSON (apps.judges.judging reads them from the response): each 100 when the pick is one
    of the answer key's labels (lm-eval-harness's rule for a key of several), else 0."""
    if not references:
        raise ValueError("A choice judge needs the item's answer key as reference.")
    try:
        picks = json.loads(text)
        label_type, count = str(picks["label_type"]), int(picks["label_count"])
        raw, norm = str(picks["pick"]), str(picks["pick_norm"])
    except (ValueError, KeyError, TypeError):
        raise ValueError("The response holds no log-likelihood picks.") from None
    answer = parse_answer_key(references[0], label_type, count)
    names = spec.subject_names
    values = {
        names[0]: 100.0 if raw in answer else 0.0,
        names[1]: 100.0 if norm in answer else 0.0,
    }
    reason = f"Most likely {raw}, per character {norm}; the answer is {format_labels(answer)}."
    return RubricResult(values, reason)
