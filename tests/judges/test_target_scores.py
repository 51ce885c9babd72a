"""UltraEval's target_scores as the answer key (#29.12, fourth point): {option: 1 or 0}, the
options labelled in the dict's order, accepted by the multiple-choice judges and by the choice
judge that scores a choice-scoring run's picks. The key is read from the item's reference, which
is text and keeps the file's order (a JSON object in an item field is stored as PostgreSQL jsonb,
which reorders its keys, so options themselves come from a list column)."""

import json

import pytest

from apps.judges.parsing import AnswerKeyError, parse_answer_key
from apps.judges.scoring import JudgeSpec, score_text

# As UltraEval's datasets write them (ax-b, a yes/no task; a four-way one; one with two right).
TARGET_SCORES = [
    {"entailment": 1, "not_entailment": 0},
    {"entailment": 0, "not_entailment": 1},
    {"Mars": 0, "Venus": 0, "Jupiter": 1, "Saturn": 0},
    {"2": 0, "4": 1, "8": 0, "16": 0, "32": 0},
]


def ultraeval_answer(target_scores: dict) -> str:
    """UltraEval's GEN transform (transform.md, ax-b): options enumerated "(A) …" in the dict's
    order, the right one found with list(values).index(1)."""
    index_of_correct_answer = list(target_scores.values()).index(1)
    return chr(65 + index_of_correct_answer)


@pytest.mark.parametrize("scores", TARGET_SCORES)
def test_the_answer_key_is_ultraevals_correct_answer(scores):
    assert parse_answer_key(json.dumps(scores), "upper", 5) == {ultraeval_answer(scores)}
    assert parse_answer_key(scores, "upper", len(scores)) == {ultraeval_answer(scores)}


def test_several_right_options_and_other_label_types():
    scores = {"a cat": 1, "a dog": 0, "a kitten": 1}
    assert parse_answer_key(json.dumps(scores), "upper", 4) == {"A", "C"}
    assert parse_answer_key(json.dumps(scores), "digit", 4) == {"1", "3"}
    assert parse_answer_key(json.dumps(scores), "lower", 3) == {"a", "c"}
    assert parse_answer_key(json.dumps({"yes": 0.0, "no": 1.0})) == {"B"}


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ('{"yes": 0.5, "no": 0.5}', "gives option 'yes' the score 0.5"),
        ('{"yes": true, "no": false}', "gives option 'yes' the score True"),
        ('{"a": 1, "b": 0, "c": 0, "d": 0, "e": 0}', "has 5 options, more than the judge's 4"),
        ('{"only": 1}', "fewer than 2 options"),
        ('{"yes": 1, "no": 0', "is not a valid JSON object"),
    ],
)
def test_a_bad_target_scores_fails_with_the_reason(key, message):
    with pytest.raises(AnswerKeyError, match=message):
        parse_answer_key(key, "upper", 4)


@pytest.mark.parametrize("kind", ["mcq_rule", "mcq"])
def test_the_multiple_choice_judges_score_against_it(kind):
    spec = JudgeSpec(kind=kind, label_type="upper", label_count=4)
    key = json.dumps(TARGET_SCORES[2])
    assert score_text(spec, "The answer is (C).", [key]).values == {"score": 100.0}
    result = score_text(spec, "B", [key])
    assert result.values == {"score": 0.0}
    assert result.reason == "Chose B; the answer is C."


def test_the_choice_judge_scores_a_choice_runs_picks_against_it():
    spec = JudgeSpec(kind="choice")
    picks = {"pick": "C", "pick_norm": "A", "label_type": "upper", "label_count": 4}
    result = score_text(spec, json.dumps(picks), [json.dumps(TARGET_SCORES[2])])
    assert result.values == {"accuracy": 100.0, "accuracy_norm": 0.0}
