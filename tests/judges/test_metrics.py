"""Rule-based metrics and post-processors, checked against numbers computed by hand."""

import collections
import math
import random
import re
import string

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from apps.judges.metrics import (
    METRICS,
    POSTPROCESSORS,
    Metric,
    MetricError,
    evaluate,
    f1_tokens,
    get_metric,
    normalise,
    postprocess,
    register,
    validate_options,
)


# ---- the registry ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "display_name", "unit", "higher_is_better", "value_range", "needs_reference"),
    [
        ("exact_match", "Exact match", "%", True, (0.0, 100.0), True),
        ("accuracy", "Accuracy", "%", True, (0.0, 100.0), True),
        ("token_f1", "Token F1", "F1", True, (0.0, 100.0), True),
        ("bleu", "BLEU", "BLEU", True, (0.0, 100.0), True),
        ("regex_match", "Regex match", "%", True, (0.0, 100.0), False),
        ("numeric_match", "Numeric match", "%", True, (0.0, 100.0), True),
        ("macro_f1", "Label match", "%", True, (0.0, 100.0), True),
    ],
)
def test_every_metric_declares_itself(
    name: str,
    display_name: str,
    unit: str,
    higher_is_better: bool,
    value_range: tuple,
    needs_reference: bool,
) -> None:
    metric = get_metric(name)
    assert isinstance(metric, Metric)
    assert (
        metric.name,
        metric.display_name,
        metric.unit,
        metric.higher_is_better,
        metric.range,
        metric.needs_reference,
    ) == (name, display_name, unit, higher_is_better, value_range, needs_reference)
    assert metric.description


def test_registry_holds_exactly_the_documented_metrics_and_postprocessors() -> None:
    assert set(METRICS) == {
        "exact_match",
        "accuracy",
        "token_f1",
        "bleu",
        "regex_match",
        "numeric_match",
        "macro_f1",
    }
    assert set(POSTPROCESSORS) == {
        "extract_choice",
        "last_number",
        "first_line",
        "strip",
        "lowercase",
    }
    assert all(p.display_name for p in POSTPROCESSORS.values())


def test_register_adds_a_metric_with_its_direction_and_refuses_a_second_one() -> None:
    @register("edit_distance_test", display_name="Edits", unit="edits", higher_is_better=False,
              range=(0, 1000))  # fmt: skip
    def edits(prediction: str, references: list[str], options: dict) -> float:
        return float(min(abs(len(prediction) - len(ref)) for ref in references))

    try:
        metric = get_metric("edit_distance_test")
        assert (metric.higher_is_better, metric.range, metric.unit) == (
            False,
            (0.0, 1000.0),
            "edits",
        )
        assert evaluate("edit_distance_test", "abcd", ["ab", "abc"]) == 1.0
        with pytest.raises(ValueError, match="registered twice"):
            register("edit_distance_test", display_name="x", unit="x")(edits)
    finally:
        del METRICS["edit_distance_test"]


def test_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(MetricError) as caught:
        evaluate("rouge", "a", ["a"])
    assert str(caught.value) == (
        "Unknown metric 'rouge'; known metrics: accuracy, bleu, exact_match, macro_f1, numeric_match, regex_match, token_f1."
    )


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("exact_match", {"ignorecase": True},
         "Unknown option 'ignorecase' for exact_match; accepted: collapse_whitespace, ignore_articles, "
         "ignore_case, ignore_punctuation."),
        ("exact_match", {"ignore_case": "yes"}, "Option 'ignore_case' of exact_match must be true or false, not 'yes'."),
        ("accuracy", {"match": "fuzzy"}, "Option 'match' of accuracy must be exact or contains, not 'fuzzy'."),
        ("accuracy", {"separator": 1}, "Option 'separator' of accuracy must be text, not 1."),
        ("bleu", {"smooth": "magic"}, "Option 'smooth' of bleu must be one of exp, floor, add-k, none, not 'magic'."),
        ("bleu", {"max_n": 0}, "Option 'max_n' of bleu must be 1–9, not 0."),
        ("bleu", {"max_n": True}, "Option 'max_n' of bleu must be 1–9, not True."),
        ("bleu", {"tokenize": "mecab"}, "Option 'tokenize' of bleu must be one of auto, 13a, intl, zh, char, none, not 'mecab'."),
        ("regex_match", {}, "Regex match needs a non-empty 'pattern' option."),
        ("regex_match", {"pattern": "(unclosed"},
         "Regex pattern '(unclosed' does not compile: missing ), unterminated subpattern at position 0."),
    ],
)  # fmt: skip
def test_bad_options_are_refused_with_a_clear_message(
    name: str, options: dict, message: str
) -> None:
    with pytest.raises(MetricError) as caught:
        validate_options(name, options)
    assert str(caught.value) == message
    with pytest.raises(MetricError):
        evaluate(name, "x", ["x"], options)


def test_validate_options_fills_defaults() -> None:
    assert validate_options("bleu", {"lowercase": True}) == {
        "lowercase": True,
        "max_n": 4,
        "smooth": "exp",
        "tokenize": "auto",
    }
    assert validate_options("exact_match", None) == {
        "ignore_case": True,
        "ignore_punctuation": True,
        "collapse_whitespace": True,
        "ignore_articles": True,
    }


@pytest.mark.parametrize("name", ["exact_match", "accuracy", "token_f1", "bleu"])
def test_metrics_that_compare_need_a_reference(name: str) -> None:
    with pytest.raises(MetricError, match="needs at least one reference answer"):
        evaluate(name, "Paris", [])
    with pytest.raises(MetricError, match="needs at least one reference answer"):
        evaluate(name, "Paris", None)


def test_a_single_reference_string_is_accepted() -> None:
    assert evaluate("exact_match", "Paris", "paris") == 100.0


# ---- normalisation and exact match ----------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("  The  Quick, brown fox!  ", {}, "quick brown fox"),
        ("An apple a day", {}, "apple day"),
        ("The Fox", {"ignore_case": False}, "Fox"),
        ("fox, inc.", {"ignore_punctuation": False}, "fox, inc."),
        ("the  fox", {"collapse_whitespace": False, "ignore_articles": False}, "the  fox"),
        ("the fox", {"ignore_articles": False}, "the fox"),
        ("巴黎，法国。", {}, "巴黎法国"),
        ("ＡＢＣ", {}, "abc"),
        ("theatre", {}, "theatre"),
    ],
)
def test_normalise(text: str, options: dict, expected: str) -> None:
    assert normalise(text, **options) == expected


@pytest.mark.parametrize(
    ("prediction", "references", "options", "expected"),
    [
        ("Paris", ["paris"], {}, 100.0),
        ("The Paris!", ["paris"], {}, 100.0),
        ("  new   york ", ["New York"], {}, 100.0),
        ("London", ["Paris"], {}, 0.0),
        ("NYC", ["New York", "nyc"], {}, 100.0),
        ("巴黎。", ["巴黎"], {}, 100.0),
        ("Paris", ["paris"], {"ignore_case": False}, 0.0),
        ("paris!", ["paris"], {"ignore_punctuation": False}, 0.0),
        ("the paris", ["paris"], {"ignore_articles": False}, 0.0),
        ("new  york", ["new york"], {"collapse_whitespace": False}, 0.0),
        # An option letter "A" is not an article to be stripped away.
        ("A", ["A"], {}, 100.0),
        ("a", ["A"], {}, 100.0),
        ("", ["A"], {}, 0.0),
        ("B", ["A"], {}, 0.0),
        # A blank reference is dropped when there is another (SQuAD v2's rule).
        ("", ["Paris", ""], {}, 0.0),
        ("Paris is the capital", ["Paris"], {}, 0.0),
    ],
)
def test_exact_match(prediction: str, references: list, options: dict, expected: float) -> None:
    assert evaluate("exact_match", prediction, references, options) == expected


# ---- accuracy over acceptable answers -------------------------------------------------------
@pytest.mark.parametrize(
    ("prediction", "references", "options", "expected"),
    [
        ("paris", ["Paris", "City of Paris"], {}, 100.0),
        ("City of Paris.", ["Paris", "City of Paris"], {}, 100.0),
        ("Lyon", ["Paris", "City of Paris"], {}, 0.0),
        ("city of paris", ['["Paris", "City of Paris"]'], {}, 100.0),
        ("lyon", ['["Paris", "City of Paris"]'], {}, 0.0),
        ("42", ["[42, 42.0]"], {}, 100.0),
        ("nyc", ["New York|NYC"], {"separator": "|"}, 100.0),
        ("nyc", ["New York|NYC"], {}, 0.0),
        ("[not json", ["[not json"], {}, 100.0),
        ("The capital is Paris.", ["Paris"], {"match": "contains"}, 100.0),
        ("The capital is Paris.", ["Paris"], {}, 0.0),
        ("Parisian food", ["Paris"], {"match": "contains"}, 0.0),
        ("It is New York City", ["new york"], {"match": "contains"}, 100.0),
        ("anything", ["Paris", ""], {"match": "contains"}, 0.0),
        ("PARIS", ["paris"], {"ignore_case": False}, 0.0),
    ],
)
def test_accuracy(prediction: str, references: list, options: dict, expected: float) -> None:
    assert evaluate("accuracy", prediction, references, options) == expected


# ---- token F1 -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("cat sat", ["cat", "sat"]),
        ("我爱北京", ["我", "爱", "北", "京"]),
        ("我爱 nlp", ["我", "爱", "nlp"]),
        ("ひらがなカタ", ["ひ", "ら", "が", "な", "カ", "タ"]),
        ("한국어 문장", ["한국어", "문장"]),
        ("", []),
    ],
)
def test_f1_tokens_split_cjk_characters(text: str, tokens: list[str]) -> None:
    assert f1_tokens(text) == tokens


@pytest.mark.parametrize(
    ("prediction", "references", "options", "expected"),
    [
        # "the" is dropped: pred [cat, sat], ref [cat, sat, on, mat]; 2 shared.
        # P = 2/2 = 1, R = 2/4 = 1/2, F1 = 2·1·(1/2) / (1 + 1/2) = 2/3.
        ("the cat sat", ["cat sat on mat"], {}, 200 / 3),
        # Articles kept: pred [the, cat, sat]; P = 2/3, R = 2/4, F1 = 2·(1/3) / (7/6) = 4/7.
        ("the cat sat", ["cat sat on mat"], {"ignore_articles": False}, 400 / 7),
        # Best over references: 0 against "dog", 2/3 against the second.
        ("the cat sat", ["dog", "cat sat on mat"], {}, 200 / 3),
        # 我 爱 北 京 vs 我 爱 上 海: 2 shared of 4 each, P = R = 1/2, F1 = 1/2.
        ("我爱北京", ["我爱上海"], {}, 50.0),
        ("我爱 NLP。", ["我 爱 nlp"], {}, 100.0),
        # Counts are clipped: [the, the, the] vs [the]; 1 shared, P = 1/3, R = 1, F1 = 1/2.
        ("the the the", ["the"], {"ignore_articles": False}, 50.0),
        ("Cat SAT", ["cat sat"], {}, 100.0),
        ("Cat SAT", ["cat sat"], {"ignore_case": False}, 0.0),
        ("dog", ["cat"], {}, 0.0),
        ("", ["cat", ""], {}, 0.0),
        ("", ["cat"], {}, 0.0),
        ("cat", ["cat", ""], {}, 100.0),
        # A reference of only an article is compared with articles kept: "the" vs "a".
        ("the", ["a"], {}, 0.0),
        ("A", ["a"], {}, 100.0),
    ],
)
def test_token_f1(prediction: str, references: list, options: dict, expected: float) -> None:
    assert math.isclose(evaluate("token_f1", prediction, references, options), expected)


# ---- token F1 against the SQuAD v2.0 evaluation script ---------------------------------------
def squad_normalize_answer(s: str) -> str:
    """normalize_answer of the official SQuAD v2.0 evaluation script, verbatim in substance."""

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def squad_f1(a_gold: str, a_pred: str) -> float:
    """compute_f1 of the official SQuAD v2.0 evaluation script."""
    gold_toks = squad_normalize_answer(a_gold).split()
    pred_toks = squad_normalize_answer(a_pred).split()
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def _answer(rng: random.Random, article_only: bool = False) -> str:
    words = [
        "The",
        "cat",
        "an",
        "Apple's",
        "U.S.",
        "state-of-the-art",
        "1,000",
        "(big)",
        "a",
        "mat",
        "don't",
        "Paris",
        "the",
        "river",
        "3.5%",
        "!",
        "well...",
        "Eiffel",
    ]
    if article_only:
        return rng.choice(["", " ", "..."])
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))


def test_token_f1_is_the_squad_scripts_on_generated_english_cases() -> None:
    """400 generated answers with articles, punctuation, case and empty strings: the SQuAD
    v2.0 script's F1 (max over the non-blank references, × 100) exactly, with the default
    options."""
    rng = random.Random(11)
    for _ in range(400):
        prediction = _answer(rng, article_only=rng.random() < 0.05)
        references = [_answer(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            references[0] = prediction.upper()
        if any(not squad_normalize_answer(r) and r.strip() for r in references):
            continue  # an article-only reference: we keep its article on purpose (see below)
        # SQuAD v2's script keeps the gold answers that normalise to something; with none
        # left it compares with "", where evaluate refuses the item (tested elsewhere).
        references = [r for r in references if squad_normalize_answer(r)] or references
        if not any(squad_normalize_answer(r) for r in references):
            with pytest.raises(MetricError, match="The reference answer is blank"):
                evaluate("token_f1", prediction, references)
            continue
        expected = 100 * max(squad_f1(ref, prediction) for ref in references)
        assert evaluate("token_f1", prediction, references) == pytest.approx(expected), (
            prediction,
            references,
        )


def test_token_f1_departs_from_squad_only_where_it_says() -> None:
    # An option letter "A" is a reference, not an article: SQuAD would make it "" and match
    # any empty prediction; CJK text has no spaces: SQuAD would see one token.
    assert evaluate("token_f1", "", ["A"]) == 0.0 and squad_f1("A", "") == 1
    assert evaluate("token_f1", "我爱北京", ["我爱上海"]) == pytest.approx(50.0)
    assert squad_f1("我爱上海", "我爱北京") == 0


# ---- BLEU -----------------------------------------------------------------------------------
def test_bleu_of_the_classic_example_by_hand() -> None:
    # hyp: the cat is on the mat / ref: the cat sat on the mat (6 tokens each, so BP = 1)
    # 1-grams 5/6 (the×2, cat, on, mat); 2-grams 3/5 (the cat, on the, the mat);
    # 3-grams 1/4 (on the mat); 4-grams 0/3 → exp smoothing gives 1/(2·3) = 1/6.
    # BLEU = (5/6 · 3/5 · 1/4 · 1/6)^(1/4) = (1/48)^(1/4) = 0.379918…
    expected = 100 * (1 / 48) ** 0.25
    assert math.isclose(
        evaluate("bleu", "the cat is on the mat", ["the cat sat on the mat"]), expected
    )
    assert math.isclose(expected, 37.991784282579634)


def test_bleu_without_smoothing_by_hand() -> None:
    # hyp: the cat sat on a mat → 1-grams 5/6, 2-grams 3/5, 3-grams 2/4, 4-grams 1/3.
    # (5/6 · 3/5 · 2/4 · 1/3)^(1/4) = (1/12)^(1/4) = 0.537284…
    value = evaluate("bleu", "the cat sat on a mat", ["the cat sat on the mat"], {"smooth": "none"})
    assert math.isclose(value, 100 * (1 / 12) ** 0.25)


def test_bleu_brevity_penalty_by_hand() -> None:
    # hyp "the cat" (2 tokens) has 1-grams 2/2 and 2-grams 1/1; orders 3 and 4 do not exist
    # (effective order 2). BP = exp(1 - 6/2) = e^-2.
    assert math.isclose(evaluate("bleu", "the cat", ["the cat sat on the mat"]), 100 * math.exp(-2))


# Values from sacrebleu's sentence_bleu (13a tokenizer; "zh" for Chinese) on the same inputs,
# recorded once: a change of sacrebleu's numbers shows up here.
@pytest.mark.parametrize(
    ("hypothesis", "references", "options", "expected"),
    [
        ("the cat sat on the mat", ["the cat sat on the mat"], {}, 100.0),
        ("foo bar baz qux", ["the cat sat on the mat"], {}, 0.0),
        ("the the the the the the the", ["the cat is on the mat", "there is a cat on the mat"], {}, 7.80985),
        ("Hello, world! It is sunny.", ["Hello world, it is sunny!"], {}, 14.535768),
        ("我爱北京天安门", ["我爱北京的天安门"], {}, 51.544868),
        (
            "It is a guide to action which ensures that the military always obeys the commands of the party.",
            [
                "It is a guide to action that ensures that the military will forever heed Party commands.",
                "It is the guiding principle which guarantees the military forces always being under the "
                "command of the Party.",
                "It is the practical guide for the army always to heed the directions of the party.",
            ],
            {},
            54.017259,
        ),
        ("a", ["a"], {}, 100.0),
        ("cat", ["the cat"], {}, 36.787944),
        ("the cat is on the mat", ["the cat sat on the mat"], {"smooth": "add-k"}, 48.549177),
        ("the cat is on the mat", ["the cat sat on the mat"], {"smooth": "floor"}, 25.406637),
        ("the cat is on the mat", ["the cat sat on the mat"], {"smooth": "none"}, 0.0),
        ("The Cat sat on the mat", ["the cat sat on the mat"], {}, 50.813275),
        ("The Cat sat on the mat", ["the cat sat on the mat"], {"lowercase": True}, 100.0),
        ("", ["the cat"], {}, 0.0),
    ],
)  # fmt: skip
def test_bleu_matches_sacrebleu(
    hypothesis: str, references: list, options: dict, expected: float
) -> None:
    assert round(evaluate("bleu", hypothesis, references, options), 6) == expected


def test_bleu_max_n_two_by_hand() -> None:
    # 1-grams 5/6, 2-grams 3/5: sqrt(5/6 · 3/5) = sqrt(1/2).
    assert math.isclose(evaluate("bleu", "the cat is on the mat", ["the cat sat on the mat"],
                                 {"max_n": 2}), 100 * math.sqrt(0.5))  # fmt: skip


def test_bleu_keeps_contractions_and_decimals_whole_as_sacrebleu_does() -> None:
    # The word-regex tokeniser this replaced split "don't" and "3.5": 17.97 here, not 27.53.
    assert round(evaluate("bleu", "I don't know.", ["I do not know."]), 2) == 27.53
    assert evaluate("bleu", "It costs 3.5 dollars.", ["It costs 3.5 dollars."]) == pytest.approx(
        100
    )


def _sentence(rng: random.Random) -> str:
    words = [
        "the",
        "cat",
        "don't",
        "state-of-the-art",
        "3.5",
        "model",
        "isn't",
        "a",
        "mat",
        "sat",
        "on",
        "well-known",
        "U.S.",
        "$10",
        "e.g.",
        "it's",
        "(big)",
        "fast",
        "runs",
    ]
    text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
    return text[0].upper() + text[1:] + rng.choice(["", ".", "!", "?", " ..."])


def test_bleu_is_sacrebleus_sentence_bleu_on_generated_cases() -> None:
    """300 generated English cases (contractions, hyphens, decimals, abbreviations), options
    varied, against sacrebleu's function API called here: the options must map one to one."""
    rng = random.Random(20261123)
    for _ in range(300):
        hypothesis = _sentence(rng)
        references = [_sentence(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            references[0] = hypothesis.replace("cat", "dog")
        smooth = rng.choice(["exp", "floor", "add-k", "none"])
        lowercase, max_n = rng.random() < 0.5, rng.randint(1, 4)
        expected = sacrebleu.sentence_bleu(
            hypothesis,
            references,
            smooth_method=smooth,
            lowercase=lowercase,
            tokenize="13a",
            use_effective_order=True,
        )
        if max_n != 4:  # the function API fixes 4-grams; the class takes the order
            expected = BLEU(
                lowercase=lowercase, max_ngram_order=max_n, smooth_method=smooth,
                effective_order=True,
            ).sentence_score(hypothesis, references)  # fmt: skip
        options = {"smooth": smooth, "lowercase": lowercase, "max_n": max_n}
        got = evaluate("bleu", hypothesis, references, options)
        assert got == pytest.approx(expected.score, abs=1e-9), (hypothesis, references, options)


def test_bleu_tokenises_cjk_by_character_unless_told() -> None:
    by_char = evaluate("bleu", "我爱北京天安门", ["我爱北京的天安门"])
    assert by_char == pytest.approx(
        sacrebleu.sentence_bleu("我爱北京天安门", ["我爱北京的天安门"], tokenize="zh").score
    )
    whole = evaluate("bleu", "我爱北京天安门", ["我爱北京的天安门"], {"tokenize": "13a"})
    assert whole == 0.0  # one "word" each, and they differ


# ---- regex match ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prediction", "options", "expected"),
    [
        ("The answer is 42.", {"pattern": r"\b42\b"}, 100.0),
        ("The answer is 420.", {"pattern": r"\b42\b"}, 0.0),
        ("YES", {"pattern": "yes"}, 0.0),
        ("YES", {"pattern": "yes", "ignore_case": True}, 100.0),
        ("yes, sure", {"pattern": "yes", "full": True}, 0.0),
        ("yes", {"pattern": "yes|no", "full": True}, 100.0),
    ],
)
def test_regex_match(prediction: str, options: dict, expected: float) -> None:
    assert evaluate("regex_match", prediction, [], options) == expected


# ---- post-processors ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("extract_choice", "(B)", "B"),
        ("extract_choice", "Answer: C", "C"),
        ("extract_choice", "The answer is (D) because", "D"),
        ("extract_choice", "A good answer is B", "B"),
        ("extract_choice", "答案是B", "B"),
        ("extract_choice", "C and A", "AC"),
        ("extract_choice", "b", "B"),
        ("extract_choice", "no idea", ""),
        ("extract_choice", "", ""),
        ("last_number", "... so 42.5 apples", "42.5"),
        ("last_number", "3 boxes of 12 make 36.", "36"),
        ("last_number", "It fell to -3 degrees", "-3"),
        ("last_number", "Total: 1,234,567.89 dollars", "1234567.89"),
        ("last_number", "values 1,2,3", "3"),
        ("last_number", "about .5 of it", ".5"),
        ("last_number", "+7 points", "7"),
        ("last_number", "答案是４２", "42"),
        ("last_number", "no numbers", ""),
        ("last_number", "It fell to \u22125 degrees", "-5"),
        ("first_line", "\n\n  Paris  \nbecause ...", "Paris"),
        ("first_line", "only", "only"),
        ("first_line", "   \n  ", ""),
        ("strip", "  Paris \n", "Paris"),
        ("lowercase", "PaRiS", "paris"),
    ],
)
def test_postprocessors(name: str, text: str, expected: str) -> None:
    assert postprocess(name, text) == expected


def test_postprocessors_chain_in_order() -> None:
    assert postprocess(["first_line", "lowercase"], "  The Answer: B\nmore") == "the answer: b"
    assert postprocess(["lowercase", "extract_choice"], "Answer: B") == "B"
    assert postprocess(None, " x ") == " x "
    assert postprocess("", " x ") == " x "
    assert postprocess([], " x ") == " x "


def test_unknown_postprocessor_names_the_known_ones() -> None:
    with pytest.raises(MetricError) as caught:
        postprocess("uppercase", "x")
    assert str(caught.value) == (
        "Unknown post-processor 'uppercase'; known post-processors: extract_choice, first_line, "
        "last_number, lowercase, strip."
    )


@pytest.mark.parametrize(
    ("metric", "prediction", "references", "post", "expected"),
    [
        ("exact_match", "After thinking, the answer is (B).", ["B"], "extract_choice", 100.0),
        ("exact_match", "After thinking, the answer is (B).", ["B"], None, 0.0),
        ("exact_match", "So she has 42.5 apples.", ["42.5"], "last_number", 100.0),
        ("accuracy", "Paris\nIt is the capital.", ["paris"], "first_line", 100.0),
        ("exact_match", "Answer: C", ["B"], "extract_choice", 0.0),
    ],
)
def test_evaluate_postprocesses_the_prediction_only(
    metric: str, prediction: str, references: list, post: str | None, expected: float
) -> None:
    assert evaluate(metric, prediction, references, postprocess=post) == expected


def test_references_are_not_postprocessed() -> None:
    # "42" is the last number of the prediction, the reference text stays as written.
    assert (
        evaluate("exact_match", "it is 42", ["the value is 42"], postprocess="last_number") == 0.0
    )
