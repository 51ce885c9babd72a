"""Reading judges' replies: JSON objects, rubric scores, multiple-choice labels, answer keys."""

import json
import pickle
import subprocess
import sys

import pytest

from apps.judges.parsing import (
    MISSING_SUBJECT,
    OUT_OF_RANGE,
    UNPARSEABLE,
    AnswerKeyError,
    JudgeReplyError,
    RubricResult,
    extract_json_object,
    format_labels,
    iter_json_objects,
    labels_for,
    parse_answer_key,
    parse_mcq_choice,
    parse_rubric_reply,
    response_format_for,
    score_mcq,
    validate_subjects,
)
from tests.base import ROOT

SUBJECTS = [
    {"name": "accuracy", "min": 1, "max": 5},
    {"name": "completeness", "min": 1, "max": 5},
    {"name": "clarity", "min": 1, "max": 5},
]


def reply_error(func, *args) -> JudgeReplyError:
    with pytest.raises(JudgeReplyError) as caught:
        func(*args)
    return caught.value


# ---- the error type -------------------------------------------------------------------------
def test_error_kinds_are_the_run_error_kinds() -> None:
    from apps.runs.models import ErrorKind

    assert ErrorKind.UNPARSEABLE.value == UNPARSEABLE
    assert ErrorKind.MISSING_SUBJECT.value == MISSING_SUBJECT
    assert ErrorKind.OUT_OF_RANGE.value == OUT_OF_RANGE


def test_error_keeps_kind_and_message_through_pickle() -> None:
    error = JudgeReplyError(OUT_OF_RANGE, "'accuracy' = 7 is outside 1–5.")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.message, str(copy)) == (
        OUT_OF_RANGE,
        "'accuracy' = 7 is outside 1–5.",
        "'accuracy' = 7 is outside 1–5.",
    )


def test_error_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="Unknown judge reply error kind"):
        JudgeReplyError("api_error", "not a reply problem")


def test_core_modules_do_not_import_django() -> None:
    code = (
        "import sys; import apps.judges.parsing, apps.judges.metrics, "
        "apps.judges.aggregation, apps.judges.judge_prompts, apps.judges.scoring; "
        "print(any(m == 'django' or m.startswith('django.') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


# ---- JSON objects ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"accuracy": 4}', {"accuracy": 4}),
        ('  \n{"accuracy": 4}\n  ', {"accuracy": 4}),
        ('```json\n{"accuracy": 4}\n```', {"accuracy": 4}),
        ('```JSON\n{"accuracy": 4}\n```', {"accuracy": 4}),
        ('```\n{"accuracy": 4}\n```', {"accuracy": 4}),
        ('Here it is:\n```json\n{\n  "accuracy": 4,\n  "clarity": 3\n}\n```\nBye.', {"accuracy": 4, "clarity": 3}),
        ('{\n  "accuracy": 4,\n  "clarity": 3\n}', {"accuracy": 4, "clarity": 3}),
        ('My scores: {"accuracy": 4} — hope that helps!', {"accuracy": 4}),
        ('{"accuracy": 4} trailing words', {"accuracy": 4}),
        ('{"reason": "uses { and } inside", "accuracy": 4}', {"reason": "uses { and } inside", "accuracy": 4}),
        ('{"reason": "a \\"quoted\\" word", "accuracy": 4}', {"reason": 'a "quoted" word', "accuracy": 4}),
        ('{"reason": "line one\nline two", "accuracy": 4}', {"reason": "line one\nline two", "accuracy": 4}),
        ('{"scores": {"accuracy": 4}}', {"scores": {"accuracy": 4}}),
        ("{not json} then {\"accuracy\": 4}", {"accuracy": 4}),
        ('[{"accuracy": 4}]', {"accuracy": 4}),
        ('{"accuracy": 4, "clarity": "五"}', {"accuracy": 4, "clarity": "五"}),
        # Repairs, outside strings only.
        ("{'accuracy': 4, 'reason': 'fine'}", {"accuracy": 4, "reason": "fine"}),
        ('{"accuracy": 4, "clarity": 3,}', {"accuracy": 4, "clarity": 3}),
        ('{"accuracy": 4, "tags": ["a", "b",],}', {"accuracy": 4, "tags": ["a", "b"]}),
        ("{'accuracy': 4, 'ok': True, 'note': None}", {"accuracy": 4, "ok": True, "note": None}),
        ("{'reason': 'it\\'s \"fine\"', 'accuracy': 4}", {"reason": "it's \"fine\"", "accuracy": 4}),
        ("{'reason': 'True, None, }', 'accuracy': 4,}", {"reason": "True, None, }", "accuracy": 4}),
        ('{"reason": "None, ]", "accuracy": 4,}', {"reason": "None, ]", "accuracy": 4}),
        ("Sure: {'accuracy': 4, 'reason': \"it's {odd}\",} thanks", {"accuracy": 4, "reason": "it's {odd}"}),
    ],
)  # fmt: skip
def test_extract_json_object(text: str, expected: dict) -> None:
    assert extract_json_object(text) == expected


def test_fenced_object_wins_over_an_unparseable_aside_before_it() -> None:
    text = 'I will use {curly braces} here.\n```json\n{"accuracy": 2}\n```'
    assert extract_json_object(text) == {"accuracy": 2}


def test_iter_json_objects_lists_every_top_level_object_in_order() -> None:
    text = 'a {"x": {"inner": 1}} b {"y": 2} c'
    assert list(iter_json_objects(text)) == [{"x": {"inner": 1}}, {"y": 2}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "The reply is empty."),
        ("   \n\t ", "The reply is empty."),
        ("The response is accurate, I give it 4.", "The reply contains no JSON object ({...})."),
        ("[1, 2, 3]", "The reply contains no JSON object ({...})."),
        ('{"accuracy": 4', "The reply's {...} is not valid JSON, even after repairing quotes and commas."),
        ("{accuracy: 4}", "The reply's {...} is not valid JSON, even after repairing quotes and commas."),
        ("{" * 5000 + "}" * 5000, "The reply's {...} is not valid JSON, even after repairing quotes and commas."),
        ('{"a": ' * 3000 + "1" + "}" * 3000, "The reply's {...} is not valid JSON, even after repairing quotes and commas."),
    ],
)  # fmt: skip
def test_extract_json_object_failures(text: str, message: str) -> None:
    error = reply_error(extract_json_object, text)
    assert (error.kind, error.message) == (UNPARSEABLE, message)


def test_a_long_hostile_reply_with_many_braces_still_ends() -> None:
    error = reply_error(extract_json_object, "{x} " * 20000)
    assert error.kind == UNPARSEABLE


# ---- rubric replies -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "values", "reason"),
    [
        ('{"accuracy": 4, "completeness": 3, "clarity": 5}', (4, 3, 5), ""),
        ('{"accuracy": 4, "completeness": 3, "clarity": 5, "reason": "solid"}', (4, 3, 5), "solid"),
        ('{"Accuracy": 4, "COMPLETENESS": 3, " Clarity ": 5}', (4, 3, 5), ""),
        ('{"accuracy": "4", "completeness": "3/5", "clarity": " 5 "}', (4, 3, 5), ""),
        ('{"accuracy": "4 out of 5", "completeness": "2.5", "clarity": "４"}', (4, 2.5, 4), ""),
        ('{"accuracy": 4.5, "completeness": 1, "clarity": 5.0}', (4.5, 1, 5), ""),
        ('{"accuracy": 4, "completeness": 3, "clarity": 5, "depth": 99, "tone": "warm"}', (4, 3, 5), ""),
        ('{"scores": {"accuracy": 4, "completeness": 3, "clarity": 5}, "reasoning": "nested"}', (4, 3, 5), "nested"),
        ('{"scores": {"Accuracy": 4, "completeness": 3}, "clarity": 5, "explanation": "mixed"}', (4, 3, 5), "mixed"),
        ('{"accuracy": 1, "completeness": 1, "clarity": 1, "scores": {"accuracy": 5}}', (1, 1, 1), ""),
        (
            '{"accuracy": {"score": 4, "reason": "a"}, "completeness": {"value": 3, "reason": "b"}, '
            '"clarity": {"Rating": 5}}',
            (4, 3, 5),
            "accuracy: a\ncompleteness: b",
        ),
        ('{"accuracy": 4, "completeness": 3, "clarity": 5, "Explanation": ["x", "y"]}', (4, 3, 5), '["x", "y"]'),
        ('{"accuracy": 4, "completeness": 3, "clarity": 5, "rationale": "  padded  "}', (4, 3, 5), "padded"),
        ('{"accuracy": 4, "completeness": 3, "clarity": 5, "reason": null}', (4, 3, 5), ""),
        (
            'Let me think.\n```json\n{"reason": "multi\nline", "accuracy": 2,\n "completeness": 2, "clarity": 2}\n```',
            (2, 2, 2),
            "multi\nline",
        ),
        ("{'accuracy': 4, 'completeness': 3, 'clarity': 5, 'reason': 'single quotes',}", (4, 3, 5), "single quotes"),
        ('Aside {"note": "draft"} then {"accuracy": 3, "completeness": 3, "clarity": 3}', (3, 3, 3), ""),
    ],
)  # fmt: skip
def test_parse_rubric_reply(text: str, values: tuple, reason: str) -> None:
    result = parse_rubric_reply(text, SUBJECTS)
    assert result == RubricResult(
        values={"accuracy": values[0], "completeness": values[1], "clarity": values[2]},
        reason=reason,
    )
    assert all(type(value) is float for value in result.values.values())


def test_values_are_keyed_by_the_judges_own_subject_names() -> None:
    subjects = [{"name": "Accuracy", "min": 1, "max": 5}, {"name": "Fluency", "min": 0, "max": 1}]
    result = parse_rubric_reply('{"accuracy": 5, "FLUENCY": 0.5}', subjects)
    assert result.values == {"Accuracy": 5.0, "Fluency": 0.5}


@pytest.mark.parametrize("value", ["1", "5", "1.0", "5/5"])
def test_range_bounds_are_inclusive(value: str) -> None:
    subjects = [{"name": "accuracy", "min": 1, "max": 5}]
    assert parse_rubric_reply(json.dumps({"accuracy": value}), subjects).values == {
        "accuracy": float(value.split("/")[0])
    }


def test_negative_and_fractional_ranges() -> None:
    subjects = [{"name": "bias", "min": -1, "max": 1}, {"name": "p", "min": "0", "max": "0.5"}]
    assert parse_rubric_reply('{"bias": -0.5, "p": "0.25"}', subjects).values == {
        "bias": -0.5,
        "p": 0.25,
    }


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ('{"accuracy": 4, "completeness": 3}', MISSING_SUBJECT,
         "Subject 'clarity' is missing from the reply (got: accuracy, completeness)."),
        ('{"accuracy": 4, "reason": "short"}', MISSING_SUBJECT,
         "Subjects 'completeness', 'clarity' are missing from the reply (got: accuracy)."),
        ('{"scores": {"accuracy": 4, "completeness": 3}}', MISSING_SUBJECT,
         "Subject 'clarity' is missing from the reply (got: scores.accuracy, scores.completeness)."),
        ('{"reason": "no scores at all"}', MISSING_SUBJECT,
         "Subjects 'accuracy', 'completeness', 'clarity' are missing from the reply (got: no scores)."),
        ('{"acc": 4, "completeness": 3, "clarity": 5}', MISSING_SUBJECT,
         "Subject 'accuracy' is missing from the reply (got: acc, completeness, clarity)."),
        ('{"accuracy": 7, "completeness": 3, "clarity": 5}', OUT_OF_RANGE, "'accuracy' = 7 is outside 1–5."),
        ('{"accuracy": 4, "completeness": 0, "clarity": 5.5}', OUT_OF_RANGE,
         "'completeness' = 0 is outside 1–5; 'clarity' = 5.5 is outside 1–5."),
        ('{"accuracy": "8/10", "completeness": 3, "clarity": 5}', OUT_OF_RANGE, "'accuracy' = 8 is outside 1–5."),
        ('{"accuracy": -1, "completeness": 3, "clarity": 5}', OUT_OF_RANGE, "'accuracy' = -1 is outside 1–5."),
        ('{"accuracy": 4, "completeness": 3, "clarity": "high"}', UNPARSEABLE, "'clarity' = 'high' is not a number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": "4 or 5"}', UNPARSEABLE, "'clarity' = '4 or 5' is not a number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": ""}', UNPARSEABLE, "'clarity' = '' is not a number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": null}', UNPARSEABLE, "'clarity' has no value (null)."),
        ('{"accuracy": 4, "completeness": 3, "clarity": true}', UNPARSEABLE, "'clarity' = true is not a number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": [4]}', UNPARSEABLE, "'clarity' = [4] is not a number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": NaN}', UNPARSEABLE, "'clarity' = NaN is not a finite number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": Infinity}', UNPARSEABLE,
         "'clarity' = Infinity is not a finite number."),
        ('{"accuracy": 4, "completeness": 3, "clarity": {"why": "x"}}', UNPARSEABLE,
         "'clarity' is an object without a score ({\"why\": \"x\"})."),
        ("I rate it 4, 3 and 5.", UNPARSEABLE, "The reply contains no JSON object ({...})."),
        ("", UNPARSEABLE, "The reply is empty."),
        # Precedence: a missing subject first, then a value that is not a number, then the range.
        ('{"accuracy": 9, "completeness": "x"}', MISSING_SUBJECT,
         "Subject 'clarity' is missing from the reply (got: accuracy, completeness)."),
        ('{"accuracy": 9, "completeness": "x", "clarity": 3}', UNPARSEABLE, "'completeness' = 'x' is not a number."),
    ],
)  # fmt: skip
def test_parse_rubric_reply_failures(text: str, kind: str, message: str) -> None:
    error = reply_error(parse_rubric_reply, text, SUBJECTS)
    assert (error.kind, error.message) == (kind, message)


def test_missing_subject_message_clips_hostile_keys() -> None:
    text = json.dumps({"x" * 500: 1, "accuracy": 2, "completeness": 3})
    message = reply_error(parse_rubric_reply, text, SUBJECTS).message
    assert len(message) < 200
    assert message.startswith("Subject 'clarity' is missing from the reply (got: xxx")


@pytest.mark.parametrize(
    ("subjects", "message"),
    [
        ([], "A rubric judge needs at least one subject."),
        ([{"min": 1, "max": 5}], "Subject 1 has no name."),
        (["accuracy"], "Subject 1 must be an object with name, min and max."),
        ([{"name": "a", "min": 1, "max": 5}, {"name": "A", "min": 1, "max": 5}],
         "Subject 'A' is listed twice (names ignore case)."),
        ([{"name": "Reason", "min": 1, "max": 5}], "'Reason' is reserved for the judge's reason; rename the subject."),
        ([{"name": "a", "min": 5, "max": 1}], "Subject 'a': min 5 must not exceed max 1."),
        ([{"name": "a", "min": "low", "max": 1}], "Subject 'a' needs numeric min and max."),
        ([{"name": "a", "max": 1}], "Subject 'a' needs numeric min and max."),
    ],
)  # fmt: skip
def test_validate_subjects(subjects: list, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_subjects(subjects)
    assert str(caught.value) == message


def test_response_format_is_a_strict_schema_with_every_subject() -> None:
    fmt = response_format_for(SUBJECTS)
    assert fmt["type"] == "json_schema"
    spec = fmt["json_schema"]
    assert spec["strict"] is True
    assert spec["name"] == "judge_scores"
    schema = spec["schema"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["reason", "accuracy", "completeness", "clarity"]
    assert schema["required"] == ["reason", "accuracy", "completeness", "clarity"]
    assert schema["properties"]["reason"]["type"] == ["string", "null"]
    for name in ("accuracy", "completeness", "clarity"):
        assert schema["properties"][name]["type"] == "number"
        assert "from 1 to 5" in schema["properties"][name]["description"]
    json.dumps(fmt)  # goes over the wire as is


def test_a_reply_shaped_by_the_response_format_parses() -> None:
    reply = json.dumps({"reason": None, "accuracy": 5, "completeness": 4, "clarity": 3})
    assert parse_rubric_reply(reply, SUBJECTS) == RubricResult(
        {"accuracy": 5.0, "completeness": 4.0, "clarity": 3.0}, ""
    )


# ---- multiple choice ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label_type", "count", "labels"),
    [
        ("upper", 4, ["A", "B", "C", "D"]),
        ("lower", 3, ["a", "b", "c"]),
        ("digit", 5, ["1", "2", "3", "4", "5"]),
        ("upper", 26, [chr(c) for c in range(65, 91)]),
        ("digit", 9, [str(i) for i in range(1, 10)]),
        ("lower", 1, ["a"]),
    ],
)
def test_labels_for(label_type: str, count: int, labels: list[str]) -> None:
    assert labels_for(label_type, count) == labels


@pytest.mark.parametrize(
    ("label_type", "count", "message"),
    [
        ("roman", 4, "Label type must be one of upper, lower, digit, not 'roman'."),
        ("upper", 0, "Label count for upper labels must be 1–26, not 0."),
        ("lower", 27, "Label count for lower labels must be 1–26, not 27."),
        ("digit", 10, "Label count for digit labels must be 1–9, not 10."),
    ],
)
def test_labels_for_refuses(label_type: str, count: int, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        labels_for(label_type, count)
    assert str(caught.value) == message


UPPER4 = ("upper", 4)


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        # The cases.
        ("B", UPPER4, "B"),
        ("A, C", UPPER4, "AC"),
        ("A.", UPPER4, "A"),
        ("(B)", UPPER4, "B"),
        ("Answer: AC", UPPER4, "AC"),
        ("答案是B", UPPER4, "B"),
        ("答案：A和C", UPPER4, "AC"),
        ("N", UPPER4, ""),
        ("None", UPPER4, ""),
        ("The answer is (C).", UPPER4, "C"),
        ("B) because the others are wrong", UPPER4, "B"),
        ("**B**", UPPER4, "B"),
        ("I think A and C are correct", UPPER4, "AC"),
        ("b", ("lower", 4), "b"),
        ("a, c", ("lower", 4), "ac"),
        ("2", ("digit", 4), "2"),
        ("1, 3", ("digit", 4), "13"),
        # Articles and pronouns are not options.
        ("A good answer is B", UPPER4, "B"),
        ("A good answer is B", ("upper", 10), "B"),
        ("I choose C", UPPER4, "C"),
        ("I choose C", ("upper", 10), "C"),
        ("I think it is D", ("upper", 10), "D"),
        ("A good one is B", UPPER4, "B"),
        ("A thorough reading suggests D", UPPER4, "D"),
        ("I think A and C are correct", ("upper", 10), "AC"),
        ("I believe it is C", ("upper", 10), "C"),
        ("a nice one is b", ("lower", 4), "b"),
        ("i guess c", ("lower", 10), "c"),
        ("A is correct", UPPER4, "A"),
        ("A and C", UPPER4, "AC"),
        ("I and J are both right", ("upper", 10), "IJ"),
        ("a good answer is b", ("lower", 4), "b"),
        ("the answer is a", ("lower", 4), "a"),
        ("I'm sure it's D", UPPER4, "D"),
        # Whole replies made of labels.
        ("  C  ", UPPER4, "C"),
        ("C\n", UPPER4, "C"),
        ("AC", UPPER4, "AC"),
        ("A C", UPPER4, "AC"),
        ("A、C", UPPER4, "AC"),
        ("A/C", UPPER4, "AC"),
        ("A & C", UPPER4, "AC"),
        ("A;C", UPPER4, "AC"),
        ("A, A", UPPER4, "A"),
        ("(A) and (C)", UPPER4, "AC"),
        ("[\"A\", \"C\"]", UPPER4, "AC"),
        ("【B】", UPPER4, "B"),
        ("Ｂ", UPPER4, "B"),
        ("（Ｂ）", UPPER4, "B"),
        ("b", UPPER4, "B"),
        ("a, c", UPPER4, "AC"),
        ("B", ("lower", 4), "b"),
        ("A, B, C, D", UPPER4, "ABCD"),
        ("1,3", ("digit", 4), "13"),
        ("13", ("digit", 4), "13"),
        ("(2)", ("digit", 4), "2"),
        # Nothing chosen.
        ("none", UPPER4, ""),
        ("None of the above.", UPPER4, ""),
        ("**None**", UPPER4, ""),
        ("N/A", UPPER4, ""),
        ("[]", UPPER4, ""),
        ("无", UPPER4, ""),
        ("以上都不对", UPPER4, ""),
        ("n", ("lower", 4), ""),
        ("N", ("digit", 4), ""),
        ("The answer is none of them.", UPPER4, ""),
        ("答案：无", UPPER4, ""),
        ("Answer: N", UPPER4, ""),
        ("N", ("upper", 14), "N"),
        ("None", ("upper", 26), ""),
        # Answer markers.
        ("The correct answer is B.", UPPER4, "B"),
        ("Final answer: D", UPPER4, "D"),
        ("**Answer:** B\nExplanation: A is wrong because...", UPPER4, "B"),
        ("The correct answers are A and C.", UPPER4, "AC"),
        ("Answer: A, C", UPPER4, "AC"),
        ("answer: b", UPPER4, "B"),
        ("The answer is option C", UPPER4, "C"),
        ("The answer is B, not option A.", UPPER4, "B"),
        ("The answer is B. Wait, no: the answer is C.", UPPER4, "C"),
        ("Answer: A. Note that the answer is not B.", UPPER4, "A"),
        ('{"answer": ["A", "C"]}', UPPER4, "AC"),
        ('{"answer": "b"}', ("lower", 4), "b"),
        ("Final answer: \\boxed{B}", UPPER4, "B"),
        ("正确答案为C", UPPER4, "C"),
        ("答案应该是D。", UPPER4, "D"),
        ("故选B", UPPER4, "B"),
        ("我选择A和C", UPPER4, "AC"),
        ("The answer is 3", ("digit", 4), "3"),
        ("2.5 is close, but the answer is 3", ("digit", 4), "3"),
        ("I would not choose A; I pick B", UPPER4, "B"),
        ("I'd go with C", UPPER4, "C"),
        # Labels opening the reply.
        ("B. Paris is the capital of France.", UPPER4, "B"),
        ("C: because it is larger", UPPER4, "C"),
        ("(D) since it is the only even one", UPPER4, "D"),
        ("**B** is right since A is wrong", UPPER4, "B"),
        ("A, C because both hold", UPPER4, "AC"),
        ("2) it halves the cost", ("digit", 4), "2"),
        ("b) obviously", ("lower", 4), "b"),
        # Free text: every standalone label not negated.
        ("Option B is the one.", UPPER4, "B"),
        ("The answer is not B, it is C", UPPER4, "C"),
        ("I think A and C are correct, B is wrong", UPPER4, "AC"),
        ("A和C正确，B错", UPPER4, "AC"),
        ("Options E and F do not exist here, B does", UPPER4, "B"),
        ("I think the best one is 2", ("digit", 4), "2"),
    ],
)  # fmt: skip
def test_parse_mcq_choice(text: str, labels: tuple[str, int], expected: str) -> None:
    assert parse_mcq_choice(text, *labels) == frozenset(expected)


@pytest.mark.parametrize(
    ("text", "labels", "message"),
    [
        ("", UPPER4, "The reply is empty."),
        ("  \n ", UPPER4, "The reply is empty."),
        ("I am not sure.", UPPER4, "No option label (A–D) found in the reply ('I am not sure.')."),
        ("B is not correct", UPPER4, "No option label (A–D) found in the reply ('B is not correct')."),
        ("Neither A nor B", UPPER4, "No option label (A–D) found in the reply ('Neither A nor B')."),
        ("The answer is 12.5", ("digit", 4), "No option label (1–4) found in the reply ('The answer is 12.5')."),
        ("It costs 1,000 dollars", ("digit", 4), "No option label (1–4) found in the reply ('It costs 1,000 dollars')."),
        ("b", ("digit", 4), "No option label (1–4) found in the reply ('b')."),
        # A label beyond the count given as the answer is named, not dropped.
        ("E", UPPER4, "The reply chose 'E', which is not among the labels A–D."),
        ("(E)", UPPER4, "The reply chose 'E', which is not among the labels A–D."),
        ("A, E", UPPER4, "The reply chose 'E', which is not among the labels A–D."),
        ("Answer: F", UPPER4, "The reply chose 'F', which is not among the labels A–D."),
        ("The answer is e", ("lower", 4), "The reply chose 'e', which is not among the labels a–d."),
        ("5", ("digit", 4), "The reply chose '5', which is not among the labels 1–4."),
        ("0", ("digit", 4), "The reply chose '0', which is not among the labels 1–4."),
        ("答案：E", UPPER4, "The reply chose 'E', which is not among the labels A–D."),
    ],
)  # fmt: skip
def test_parse_mcq_choice_failures(text: str, labels: tuple[str, int], message: str) -> None:
    error = reply_error(parse_mcq_choice, text, *labels)
    assert (error.kind, error.message) == (UNPARSEABLE, message)


def test_parse_mcq_choice_clips_a_long_reply_in_its_message() -> None:
    message = reply_error(parse_mcq_choice, "no labels here " * 100, "upper", 4).message
    assert len(message) < 120


def test_parse_mcq_choice_refuses_a_bad_label_setting() -> None:
    with pytest.raises(ValueError, match="Label count for digit labels must be 1–9"):
        parse_mcq_choice("1", "digit", 12)


@pytest.mark.parametrize(
    ("chosen", "answer", "score"),
    [
        ({"B"}, {"B"}, 100.0),
        ({"A", "C"}, {"C", "A"}, 100.0),
        (frozenset(), frozenset(), 100.0),
        ({"A"}, {"A", "C"}, 0.0),
        ({"A", "C"}, {"A"}, 0.0),
        ({"B"}, {"C"}, 0.0),
        (frozenset(), {"A"}, 0.0),
        ({"A"}, frozenset(), 0.0),
    ],
)
def test_score_mcq(chosen: set, answer: set, score: float) -> None:
    assert score_mcq(chosen, answer) == score


@pytest.mark.parametrize(
    ("key", "kwargs", "expected"),
    [
        ("A,C", {}, "AC"),
        ("AC", {}, "AC"),
        ("A, C", {}, "AC"),
        ("A C", {}, "AC"),
        ("A和C", {}, "AC"),
        ("A and C", {}, "AC"),
        ('["A","C"]', {}, "AC"),
        ('["A", "C"]', {}, "AC"),
        (["A", "C"], {}, "AC"),
        ("2", {}, "2"),
        (2, {}, "2"),
        ("1,3", {}, "13"),
        ("13", {"label_type": "digit"}, "13"),
        ("[1, 3]", {}, "13"),
        (" b ", {}, "b"),
        ("a,c", {"label_type": "upper"}, "AC"),
        ("AC", {"label_type": "lower"}, "ac"),
        ("B", {"label_type": "upper", "label_count": 4}, "B"),
        ("N", {}, ""),
        ("None", {}, ""),
        ("[]", {}, ""),
        ("N", {"label_type": "upper", "label_count": 14}, "N"),
        ("Ｃ", {}, "C"),
    ],
)
def test_parse_answer_key(key: object, kwargs: dict, expected: str) -> None:
    assert parse_answer_key(key, **kwargs) == frozenset(expected)


@pytest.mark.parametrize(
    ("key", "kwargs", "message"),
    [
        ("", {}, "The answer key is empty."),
        ("   ", {}, "The answer key is empty."),
        (None, {}, "Answer key null is not a set of option labels."),
        (True, {}, "Answer key true is not a set of option labels."),
        # A dict is UltraEval's target_scores (tests/judges/test_target_scores.py).
        ({"a": 1}, {}, 'target_scores {"a": 1} has fewer than 2 options.'),
        ("[A, C", {}, "Answer key '[A, C' is not a valid JSON list."),
        ("A1", {}, "Answer key 'A1': 'A1' is not an option label."),
        ("A?", {}, "Answer key 'A?': 'A?' is not an option label."),
        ("2.5", {"label_type": "digit"}, "Answer key '2.5': '2.5' is not an option label."),
        ("0", {"label_type": "digit"}, "Answer key '0': '0' is not an option label."),
        (
            "E",
            {"label_type": "upper", "label_count": 4},
            "Answer key 'E' has E, outside the labels A–D.",
        ),
        ("A,F,E", {"label_count": 4}, "Answer key 'A,F,E' has E, F, outside the labels A–D."),
        ("5", {"label_count": 4}, "Answer key '5' has 5, outside the labels 1–4."),
    ],
)
def test_parse_answer_key_failures(key: object, kwargs: dict, message: str) -> None:
    with pytest.raises(AnswerKeyError) as caught:
        parse_answer_key(key, **kwargs)
    assert str(caught.value) == message


def test_answer_key_error_is_not_a_reply_error() -> None:
    assert not issubclass(AnswerKeyError, JudgeReplyError)


@pytest.mark.parametrize(
    ("labels", "text"),
    [({"C", "A"}, "A, C"), (frozenset(), "none"), ({"3", "1"}, "1, 3"), ({"b"}, "b")],
)
def test_format_labels(labels: set, text: str) -> None:
    assert format_labels(labels) == text


def test_rule_based_mode_scores_a_free_text_response_end_to_end() -> None:
    answer = parse_answer_key("A,C", "upper", 4)
    chosen = parse_mcq_choice("I think A and C are correct", "upper", 4)
    assert score_mcq(chosen, answer) == 100.0
    assert score_mcq(parse_mcq_choice("A good answer is B", "upper", 4), answer) == 0.0
