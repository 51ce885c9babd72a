"""Numeric answers (issue #29 point 5), blank references (point 6) and BLEU's tokenizer for
Japanese and Korean (point 8), pinned to the reference implementations: lm-evaluation-
harness's gsm8k filters, SQuAD v2's rule for blank gold answers, sacrebleu's own scores."""

import re

import pytest
import sacrebleu

from apps.judges.metrics import (
    MetricError,
    bleu_tokenizer,
    evaluate,
    last_number,
    numbers_in,
    usable_references,
    validate_options,
)


# ---- numbers -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        # Exact match drops punctuation from both sides: these are the issue's false matches.
        ("35", "3.5", 0), ("5", "-5", 0), ("10", "1.0", 0),
        ("-5", "-5", 100), ("\u22125", "-5", 100), ("The answer is \u22125.", "-5", 100),
        ("1,000", "1000", 100), ("1,000.", "1,000", 100), ("$1,000.00", "1000", 100),
        ("1\u202f000", "1000", 100), ("3/4", "0.75", 100), ("\\frac{3}{4}", "0.75", 100),
        ("-\\frac{1}{2}", "-0.5", 100), ("45%", "0.45", 100), ("45%", "45", 100), ("0.45", "45%", 100),
        ("4.5%", "45", 0), ("1e3", "1000", 100), (".5", "0.5", 100), ("5.", "5", 100),
        ("So she has 18 eggs left.\\n#### 18", "Janet sells 16 - 3 - 4 = 9 eggs... #### 18", 100),
        ("No number here.", "18", 0), ("", "18", 0),
        ("It takes 3 hours, i.e. 180 minutes.", "180", 100),
        ("It takes 180 minutes, i.e. 3 hours.", "180", 0),  # the last number is the answer
    ],
)  # fmt: skip
def test_numeric_match(prediction: str, reference: str, expected: float) -> None:
    assert evaluate("numeric_match", prediction, [reference]) == expected


def test_numeric_match_tolerances() -> None:
    assert evaluate("numeric_match", "3.14159", ["3.14"]) == 0
    assert evaluate("numeric_match", "3.14159", ["3.14"], {"tolerance": 0.01}) == 100
    assert evaluate("numeric_match", "1001", ["1000"], {"rel_tolerance": 0.01}) == 100
    assert evaluate("numeric_match", "1011", ["1000"], {"rel_tolerance": 0.01}) == 0
    assert evaluate("numeric_match", "x = 4", ["4"], {"extract": "whole"}) == 0
    assert evaluate("numeric_match", " 4. ", ["4"], {"extract": "whole"}) == 100


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"extract": "first"}, "Option 'extract' of numeric_match must be last or whole, not 'first'."),
        ({"tolerance": -1}, "Option 'tolerance' of numeric_match must be a number ≥ 0, not -1."),
        ({"rel_tolerance": "1%"}, "Option 'rel_tolerance' of numeric_match must be a number ≥ 0, not '1%'."),
    ],
)  # fmt: skip
def test_numeric_match_refuses_bad_options(options: dict, message: str) -> None:
    with pytest.raises(MetricError) as caught:
        validate_options("numeric_match", options)
    assert str(caught.value) == message


def test_numbers_in_reads_signs_separators_fractions_and_percentages() -> None:
    assert numbers_in("\u22121,234.5 then 3/4 and 45% of $2,000") == [
        (-1234.5, False),
        (0.75, False),
        (45.0, True),
        (2000.0, False),
    ]
    assert last_number("It fell to \u22125 degrees") == "-5"


# lm-evaluation-harness's gsm8k (v3) "flexible-extract" filter and exact_match settings, copied
# from its task file as the reference: the last match of the regex, then ignore_case and the
# regexes_to_ignore on both sides.
_LM_EVAL_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
_LM_EVAL_IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]


def lm_eval_gsm8k(response: str, target: str) -> float:
    matches = _LM_EVAL_FLEXIBLE.findall(response)
    if not matches:
        return 0.0
    extracted = next(m for m in matches[-1] if m).strip()
    pred, gold = extracted, target
    for pattern in _LM_EVAL_IGNORE:
        pred, gold = re.sub(pattern, "", pred), re.sub(pattern, "", gold)
    return 100.0 if pred.lower() == gold.lower() else 0.0


GSM8K = [
    # (model response, gsm8k target)
    ("Janet has 16 eggs, eats 3 and bakes with 4, so 9 remain. She earns 9 * 2 = $18.", "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n#### 18"),
    ("It takes 2 bolts of blue and 1 of white: 2 + 1 = 3.\n#### 3", "#### 3"),
    ("The profit is 70,000 dollars.", "#### 70000"),
    ("He runs 3 sprints 3 times a week, 60 m each: 3 * 3 * 60 = 540 meters.", "#### 540"),
    ("The answer is 20.", "#### 20"),
    ("So the final answer is $64.", "#### 64"),
    ("Total: 1,000,000", "#### 1000000"),
    ("She needs 5 more cups.", "#### 6"),
    ("The temperature dropped to -4 degrees.", "#### -4"),
    ("There are 260 people.\n\nI hope this helps!", "#### 260"),
    ("The answer is 160.5", "#### 160.5"),
    ("Each gets 12 cookies, so 12.", "#### 12"),
]  # fmt: skip


@pytest.mark.parametrize(("response", "target"), GSM8K)
def test_numeric_match_agrees_with_lm_eval_gsm8k(response: str, target: str) -> None:
    assert evaluate("numeric_match", response, [target]) == lm_eval_gsm8k(response, target)


@pytest.mark.parametrize(
    ("response", "target"),
    [
        ("The answer is \u22124.", "#### -4"),  # lm-eval's regex does not know U+2212
        ("The total is $18.00", "#### 18"),  # lm-eval compares the strings "18.00" and "18"
        ("So 3/4 of the cake, i.e. 0.75", "#### 0.75"),  # the same for both
    ],
)
def test_numeric_match_reads_what_lm_eval_misses(response: str, target: str) -> None:
    assert evaluate("numeric_match", response, [target]) == 100


# ---- blank references --------------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["exact_match", "token_f1", "accuracy", "numeric_match", "bleu"])
@pytest.mark.parametrize("references", [["Paris", ""], ["Paris", None], ["Paris", " . "]])
@pytest.mark.parametrize("prediction", ["", "The"])
def test_blank_references_are_dropped(metric: str, references: list, prediction: str) -> None:
    # SQuAD v2's script keeps gold answers whose normalised text is non-empty; an empty answer
    # then scores 0 against "Paris", instead of 100 against the blank one.
    assert evaluate(metric, prediction, references) == 0
    if metric != "numeric_match":
        assert evaluate(metric, "Paris", references) == pytest.approx(100)


@pytest.mark.parametrize(
    ("reference", "options"),
    [("Paris|", {"separator": "|"}), ('["Paris", null]', {}), ('["Paris", ""]', {})],
)
def test_accuracy_drops_blank_acceptable_answers(reference: str, options: dict) -> None:
    assert evaluate("accuracy", "", [reference], options) == 0
    assert evaluate("accuracy", "The", [reference], options) == 0
    assert evaluate("accuracy", "Paris", [reference], options) == 100


@pytest.mark.parametrize("references", [[""], [None], ["", " "], ["."]])
def test_a_reference_that_is_only_blank_fails_with_the_reason(references: list) -> None:
    with pytest.raises(MetricError, match="The reference answer is blank"):
        evaluate("exact_match", "", references)
    with pytest.raises(MetricError, match="The reference answer is blank"):
        usable_references(references)


def test_article_only_references_are_kept() -> None:
    # "A" is an option letter, not blank (normalisation keeps it when it is all there is).
    assert usable_references(["A", ""]) == ["A"]
    assert evaluate("exact_match", "A", ["A", ""]) == 100
    assert evaluate("exact_match", "", ["A", ""]) == 0


# ---- BLEU by script -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("texts", "tokenizer"),
    [
        (["これはペンです", "これはペンだ"], "char"),
        (["我爱北京", "我爱上海"], "zh"),
        (["東京に行きます"], "char"),  # kanji with kana: Japanese
        (["나는 학교에 갑니다"], "char"),
        (["the cat sat"], "13a"),
    ],
)
def test_bleu_chooses_its_tokenizer_by_script(texts: list[str], tokenizer: str) -> None:
    assert bleu_tokenizer(texts) == tokenizer


@pytest.mark.parametrize(
    ("hypothesis", "reference"),
    [
        ("これはペンです", "これはペンだ"),
        ("나는 학교에 갑니다", "나는 학교에 간다"),
        ("我爱北京", "我爱上海"),
    ],
)
def test_bleu_on_japanese_and_korean_is_sacrebleus_by_character(hypothesis, reference) -> None:
    tokenize = bleu_tokenizer([hypothesis, reference])
    expected = sacrebleu.sentence_bleu(hypothesis, [reference], tokenize=tokenize).score
    assert evaluate("bleu", hypothesis, [reference]) == pytest.approx(expected)
    assert expected > 0


def test_the_issues_japanese_pair_no_longer_scores_zero() -> None:
    # sacrebleu's "zh" keeps the kana run whole: 0.00 (the issue's number).
    assert sacrebleu.sentence_bleu("これはペンです", ["これはペンだ"], tokenize="zh").score == 0
    assert round(evaluate("bleu", "これはペンです", ["これはペンだ"]), 2) == 61.48


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_judge_run_fails_an_item_whose_references_are_all_blank(task):
    from django.db import transaction

    from apps.judges.launching import create_judge_run
    from apps.judges.models import Judge, Score
    from apps.runs.models import ErrorKind
    from tests.base import work_here
    from tests.factories import make_answers_dataset, make_judge

    references = ['["Paris", ""]', '["", null]', "Paris"]
    dataset = make_answers_dataset(
        task, 3, reference=lambda i: references[i], response=lambda i: ["", "", "Paris"][i]
    )
    judge = make_judge(task, Judge.Kind.METRIC, name="em")
    with transaction.atomic():
        run = create_judge_run(judge, dataset=dataset, source_column="response")
    work_here()
    scores = {s.item.position: s for s in Score.objects.filter(run=run).select_related("item")}
    assert scores[0].judge_value == 0  # the empty answer no longer matches the blank one
    assert scores[2].judge_value == 100
    assert scores[1].judge_value is None
    assert scores[1].error_kind == ErrorKind.INTERNAL
    assert scores[1].error == (
        "Bad item data: The reference answer is blank ('', ''): there is nothing to compare with."
    )
