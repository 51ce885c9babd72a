"""One round's values for every judge kind through `score_text`."""

from types import SimpleNamespace

import pytest

from apps.judges.metrics import MetricError
from apps.judges.parsing import (
    MISSING_SUBJECT,
    UNPARSEABLE,
    AnswerKeyError,
    JudgeReplyError,
    RubricResult,
)
from apps.judges.scoring import JudgeSpec, score_text

RUBRIC = JudgeSpec(
    kind="rubric",
    subjects=({"name": "accuracy", "min": 1, "max": 5}, {"name": "clarity", "min": 1, "max": 5}),
)
MCQ = JudgeSpec(kind="mcq", label_type="upper", label_count=4)
MCQ_RULE = JudgeSpec(kind="mcq_rule", label_type="digit", label_count=4,
                     subjects=({"name": "correct", "min": 0, "max": 100},))  # fmt: skip


def test_spec_of_a_judge_like_object() -> None:
    judge = SimpleNamespace(
        kind="metric", subjects=[], label_type="upper", label_count=4, metric="token_f1",
        metric_options={"ignore_articles": False}, postprocess="first_line",
    )  # fmt: skip
    spec = JudgeSpec.of(judge)
    assert spec == JudgeSpec(
        kind="metric",
        metric="token_f1",
        metric_options={"ignore_articles": False},
        postprocess="first_line",
    )
    assert spec.subject_names == ["token_f1"]
    assert not spec.uses_llm


def test_spec_of_the_judge_model() -> None:
    from apps.judges.models import Judge

    judge = Judge(kind=Judge.Kind.MCQ, label_type=Judge.LabelType.LOWER, label_count=5)
    spec = JudgeSpec.of(judge)
    assert (spec.kind, spec.label_type, spec.label_count, spec.subject_names) == (
        "mcq",
        "lower",
        5,
        ["score"],
    )
    assert spec.uses_llm


def test_rubric_round() -> None:
    result = score_text(RUBRIC, '{"Accuracy": 4, "clarity": "5", "reason": "good"}')
    assert result == RubricResult({"accuracy": 4.0, "clarity": 5.0}, "good")
    with pytest.raises(JudgeReplyError) as caught:
        score_text(RUBRIC, '{"accuracy": 4}')
    assert caught.value.kind == MISSING_SUBJECT


@pytest.mark.parametrize(
    ("reply", "key", "value", "reason"),
    [
        ("A, C", "A,C", 100.0, "Chose A, C; the answer is A, C."),
        ("A", "AC", 0.0, "Chose A; the answer is A, C."),
        ("N", "B", 0.0, "Chose none; the answer is B."),
        ("答案是B", '["B"]', 100.0, "Chose B; the answer is B."),
        ("b", "b", 100.0, "Chose B; the answer is B."),
    ],
)
def test_mcq_round(reply: str, key: str, value: float, reason: str) -> None:
    assert score_text(MCQ, reply, [key]) == RubricResult({"score": value}, reason)


def test_mcq_rule_round_reads_the_response_and_names_its_subject() -> None:
    result = score_text(MCQ_RULE, "I think the answer is 2 because...", ["2"])
    assert result == RubricResult({"correct": 100.0}, "Chose 2; the answer is 2.")


def test_mcq_failures() -> None:
    with pytest.raises(JudgeReplyError) as caught:
        score_text(MCQ, "no idea", ["A"])
    assert caught.value.kind == UNPARSEABLE
    with pytest.raises(AnswerKeyError, match="outside the labels A–D"):
        score_text(MCQ, "A", ["E"])
    with pytest.raises(ValueError, match="needs the item's answer key"):
        score_text(MCQ, "A", [])


def test_metric_round_postprocesses_and_uses_options() -> None:
    spec = JudgeSpec(kind="metric", metric="exact_match", postprocess="last_number")
    assert score_text(spec, "so 42.5 apples", ["42.5"]) == RubricResult({"exact_match": 100.0}, "")
    spec = JudgeSpec(kind="metric", metric="token_f1", metric_options={"ignore_articles": False})
    assert score_text(spec, "the cat sat", ["cat sat on mat"]).values["token_f1"] == pytest.approx(
        400 / 7
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (JudgeSpec(kind="vibes"), "Judge kind must be one of rubric, mcq, mcq_rule, metric, choice, not 'vibes'."),
        (JudgeSpec(kind="rubric"), "A rubric judge needs at least one subject."),
        (JudgeSpec(kind="mcq", label_count=30), "Label count for upper labels must be 1–26, not 30."),
        (JudgeSpec(kind="mcq", subjects=({"name": "a", "min": 0, "max": 1}, {"name": "b", "min": 0, "max": 1})),
         "A mcq judge gives one value; list at most one subject."),
        (JudgeSpec(kind="metric", metric="rouge"),
         "Unknown metric 'rouge'; known metrics: accuracy, bleu, exact_match, macro_f1, numeric_match, regex_match, token_f1."),
        (JudgeSpec(kind="metric", metric="regex_match"), "Regex match needs a non-empty 'pattern' option."),
        (JudgeSpec(kind="choice", subjects=({"name": "score", "min": 0, "max": 100},)),
         "A log-likelihood choice judge gives accuracy and accuracy_norm, no other subjects."),
    ],
)  # fmt: skip
def test_check_names_the_problem(spec: JudgeSpec, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        spec.check()
    assert str(caught.value) == message


@pytest.mark.parametrize("spec", [RUBRIC, MCQ, MCQ_RULE, JudgeSpec(kind="metric", metric="bleu")])
def test_check_accepts_good_settings(spec: JudgeSpec) -> None:
    spec.check()


def test_unknown_kind_cannot_be_scored() -> None:
    with pytest.raises(ValueError, match="Judge kind must be one of"):
        score_text(JudgeSpec(kind="vibes"), "x", ["x"])


def test_metric_error_is_a_value_error() -> None:
    assert issubclass(MetricError, ValueError)


def test_a_choice_judge_scores_both_picks_against_the_answer_key() -> None:
    """Each pick is right when it is one of the key's labels (lm-eval-harness's rule for a key
    of several); the labels are the run's, read with the picks."""
    spec = JudgeSpec(kind="choice")
    spec.check()
    picks = '{"pick": "A", "pick_norm": "C", "label_type": "upper", "label_count": 3}'
    result = score_text(spec, picks, ["C"])
    assert result.values == {"accuracy": 0.0, "accuracy_norm": 100.0}
    assert result.reason == "Most likely A, per character C; the answer is C."
    assert score_text(spec, picks, ["A, C"]).values == {"accuracy": 100.0, "accuracy_norm": 100.0}
    digits = '{"pick": "2", "pick_norm": "2", "label_type": "digit", "label_count": 2}'
    assert score_text(spec, digits, ["2"]).values == {"accuracy": 100.0, "accuracy_norm": 100.0}
    with pytest.raises(ValueError, match="outside the labels"):
        score_text(spec, picks, ["D"])
    with pytest.raises(ValueError, match="holds no log-likelihood picks"):
        score_text(spec, "B", ["B"])
