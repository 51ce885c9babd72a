"""Rule-based metrics (no LLM) and the post-processors applied to a response before them.

Pure Python, no Django. Each metric is registered with `@register(...)` and declares its name,
display name, unit, direction, value range and accepted options (with defaults), so forms can
list them and leaderboards can sort in the right direction. Call them through `evaluate`:

    evaluate("token_f1", prediction, ["reference", ...], {"ignore_articles": False},
             postprocess=["first_line"])

Unknown metric names, unknown options and bad option values raise `MetricError` (a ValueError)
with a message naming the problem; a metric never fails because of what a model wrote.
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    # Imported where a BLEU judge scores (_bleu_scorer), not at start-up: every process
    # imports this module (through the run kinds), sacrebleu costs ~0.15 s of CPU to import
    # and few judges are BLEU (#26.7).
    from sacrebleu.metrics import BLEU

from apps.judges.parsing import JudgeReplyError, parse_mcq_choice

MetricFunc = Callable[[str, list[str], dict[str, Any]], float]


class MetricError(ValueError):
    """A metric asked for wrongly: unknown name or option, or a bad option value."""


@dataclass(frozen=True)
class Metric:
    name: str
    display_name: str
    unit: str
    higher_is_better: bool
    range: tuple[float, float]
    func: MetricFunc
    options: Mapping[str, Any] = field(default_factory=dict)  # accepted options → defaults
    needs_reference: bool = True
    description: str = ""


@dataclass(frozen=True)
class PostProcessor:
    name: str
    display_name: str
    func: Callable[[str], str]


METRICS: dict[str, Metric] = {}
POSTPROCESSORS: dict[str, PostProcessor] = {}


def register(
    name: str,
    *,
    display_name: str,
    unit: str,
    higher_is_better: bool = True,
    range: tuple[float, float] = (0.0, 100.0),
    options: Mapping[str, Any] | None = None,
    needs_reference: bool = True,
    description: str = "",
) -> Callable[[MetricFunc], MetricFunc]:
    """Add a metric to the registry; the decorated function stays callable as is."""

    def decorate(func: MetricFunc) -> MetricFunc:
        if name in METRICS:
            raise ValueError(f"Metric {name!r} is registered twice.")
        METRICS[name] = Metric(
            name=name,
            display_name=display_name,
            unit=unit,
            higher_is_better=higher_is_better,
            range=(float(range[0]), float(range[1])),
            func=func,
            options=dict(options or {}),
            needs_reference=needs_reference,
            description=description,
        )
        return func

    return decorate


def register_postprocessor(
    name: str, *, display_name: str
) -> Callable[[Callable[[str], str]], Callable[[str], str]]:
    def decorate(func: Callable[[str], str]) -> Callable[[str], str]:
        if name in POSTPROCESSORS:
            raise ValueError(f"Post-processor {name!r} is registered twice.")
        POSTPROCESSORS[name] = PostProcessor(name, display_name, func)
        return func

    return decorate


def get_metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        known = ", ".join(sorted(METRICS))
        raise MetricError(f"Unknown metric {name!r}; known metrics: {known}.") from None


def validate_options(name: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metric's options with defaults filled in; unknown keys or bad values are refused."""
    metric = get_metric(name)
    given = dict(options or {})
    unknown = sorted(set(given) - set(metric.options))
    if unknown:
        accepted = ", ".join(sorted(metric.options)) or "none"
        raise MetricError(
            f"Unknown option {', '.join(map(repr, unknown))} for {name}; accepted: {accepted}."
        )
    merged = {**metric.options, **given}
    for key, default in metric.options.items():
        value = merged[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            raise MetricError(f"Option {key!r} of {name} must be true or false, not {value!r}.")
        if isinstance(default, str) and not isinstance(value, str):
            raise MetricError(f"Option {key!r} of {name} must be text, not {value!r}.")
    if name == "regex_match":
        _compile_pattern(merged)
    if name == "bleu":
        if merged["smooth"] not in _SMOOTHING:
            raise MetricError(
                f"Option 'smooth' of bleu must be one of {', '.join(_SMOOTHING)}, "
                f"not {merged['smooth']!r}."
            )
        max_n = merged["max_n"]
        if isinstance(max_n, bool) or not isinstance(max_n, int) or not 1 <= max_n <= 9:
            raise MetricError(f"Option 'max_n' of bleu must be 1–9, not {merged['max_n']!r}.")
        if merged["tokenize"] not in _BLEU_TOKENIZERS:
            raise MetricError(
                f"Option 'tokenize' of bleu must be one of {', '.join(_BLEU_TOKENIZERS)}, "
                f"not {merged['tokenize']!r}."
            )
    if name == "numeric_match":
        if merged["extract"] not in ("last", "whole"):
            raise MetricError(
                f"Option 'extract' of numeric_match must be last or whole, not {merged['extract']!r}."
            )
        for key in ("tolerance", "rel_tolerance"):
            value = merged[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 <= value < 1e300
            ):
                raise MetricError(
                    f"Option {key!r} of numeric_match must be a number ≥ 0, not {value!r}."
                )
    if name == "accuracy" and merged["match"] not in ("exact", "contains"):
        raise MetricError(
            f"Option 'match' of accuracy must be exact or contains, not {merged['match']!r}."
        )
    return merged


def postprocess(names: str | Sequence[str] | None, text: str) -> str:
    """Apply post-processors in order; None, "" or [] leave the text as it is."""
    if not names:
        return text
    for name in [names] if isinstance(names, str) else names:
        try:
            processor = POSTPROCESSORS[name]
        except KeyError:
            known = ", ".join(sorted(POSTPROCESSORS))
            raise MetricError(
                f"Unknown post-processor {name!r}; known post-processors: {known}."
            ) from None
        text = processor.func(text)
    return text


def evaluate(
    metric_name: str,
    prediction: str,
    references: Sequence[str] | str | None,
    options: Mapping[str, Any] | None = None,
    postprocess: str | Sequence[str] | None = None,
    *,
    postprocess_reference: bool = False,
) -> float:
    """Score one prediction against its references (a list, or one string).

    The prediction is post-processed first, and with `postprocess_reference` each reference
    too (UltraEval's processed_output). A metric that needs a reference raises MetricError
    when none is given, naming the metric; so does a reference post-processed to nothing.
    """
    metric = get_metric(metric_name)
    merged = validate_options(metric_name, options)
    if references is None:
        refs: list[str] = []
    elif isinstance(references, str):
        refs = [references]
    else:
        refs = ["" if ref is None else str(ref) for ref in references]
    if metric.needs_reference and not refs:
        raise MetricError(f"{metric.display_name} needs at least one reference answer.")
    if postprocess_reference:
        refs = processed_references(postprocess, refs)
    if metric.needs_reference:
        refs = usable_references(refs)
    text = "" if prediction is None else str(prediction)
    return float(metric.func(_postprocess(postprocess, text), refs, merged))


_postprocess = postprocess  # `evaluate` takes a parameter of the same name


def processed_references(names: str | Sequence[str] | None, references: Sequence[str]) -> list[str]:
    """The references post-processed like the prediction. A reference the post-processing
    leaves blank (no number for Last number) is dropped when others are left; when none is
    left, MetricError says which reference and which post-processing."""
    processed = [postprocess(names, ref) for ref in references]
    kept = [ref for ref in processed if not is_blank(ref)]
    if references and not kept:
        named = ", ".join([names] if isinstance(names, str) else list(names or []))
        raise MetricError(
            f"Post-processing the reference ({named}) left nothing of "
            f"{references[0][:80]!r}: there is nothing to compare with."
        )
    return processed


def is_blank(reference: str | None) -> bool:
    """Nothing but whitespace and punctuation (or None): not an answer anyone could give."""
    return reference is None or not normalise(str(reference), ignore_articles=False)


def usable_references(references: Sequence[str | None]) -> list[str]:
    """The references that are answers: blank ones are dropped when others exist, as SQuAD
    v2's evaluation script drops gold answers that normalise to nothing, so ["Paris", ""] does
    not give 100 to an empty prediction. Only blank references raise MetricError: the item
    cannot be scored, and says why."""
    kept = [str(ref) for ref in references if not is_blank(ref)]
    if references and not kept:
        shown = ", ".join(repr(ref) for ref in list(references)[:3])
        raise MetricError(
            f"The reference answer is blank ({shown}): there is nothing to compare with."
        )
    return kept


# ---- normalisation --------------------------------------------------------------------------
NORMALISE_OPTIONS = {
    "ignore_case": True,
    "ignore_punctuation": True,
    "collapse_whitespace": True,
    "ignore_articles": True,
}
_ARTICLES = re.compile(r"\b(?:a|an|the)\b", re.IGNORECASE)


def _is_punctuation(char: str) -> bool:
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def normalise(
    text: str,
    ignore_case: bool = True,
    ignore_punctuation: bool = True,
    collapse_whitespace: bool = True,
    ignore_articles: bool = True,
) -> str:
    """SQuAD-style normalisation, each step switchable: lower case, drop punctuation (ASCII
    and Unicode, so "，。" go too), drop English articles, collapse whitespace."""
    text = unicodedata.normalize("NFKC", text)
    if ignore_case:
        text = text.lower()
    if ignore_punctuation:
        text = "".join(char for char in text if not _is_punctuation(char))
    if ignore_articles:
        text = _ARTICLES.sub(" ", text)
    if collapse_whitespace:
        text = " ".join(text.split())
    return text.strip()


def _normalise_pair(prediction: str, reference: str, options: Mapping[str, Any]) -> tuple[str, str]:
    flags = {key: options[key] for key in NORMALISE_OPTIONS}
    pred, ref = normalise(prediction, **flags), normalise(reference, **flags)
    if flags["ignore_articles"] and reference.strip() and not ref:
        # A reference that is only an article ("A" as an option letter) must not become ""
        # and match every empty prediction.
        flags["ignore_articles"] = False
        pred, ref = normalise(prediction, **flags), normalise(reference, **flags)
    return pred, ref


# ---- metrics --------------------------------------------------------------------------------
@register(
    "exact_match",
    display_name="Exact match",
    unit="%",
    options=NORMALISE_OPTIONS,
    description="100 when the prediction equals a reference after normalisation, else 0.",
)
def exact_match(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    return max(
        (100.0 if pred == ref else 0.0)
        for pred, ref in (_normalise_pair(prediction, r, options) for r in references)
    )


def acceptable_answers(references: Iterable[str], separator: str = "") -> list[str]:
    """Expand references: a JSON list '["Paris", "City of Paris"]' or `separator`-joined text."""
    answers: list[str] = []
    for ref in references:
        stripped = ref.strip()
        if stripped.startswith("["):
            try:
                items = json.loads(stripped)
            except ValueError:
                items = None
            if isinstance(items, list):
                answers += ["" if item is None else str(item) for item in items]
                continue
        answers += ref.split(separator) if separator else [ref]
    return answers


@register(
    "accuracy",
    display_name="Accuracy",
    unit="%",
    options={**NORMALISE_OPTIONS, "match": "exact", "separator": ""},
    description=(
        "100 when the prediction matches any acceptable answer (a list, a JSON list in a "
        "reference, or references joined by `separator`); `match` is exact or contains."
    ),
)
def accuracy(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    for answer in usable_references(acceptable_answers(references, options["separator"])):
        pred, ref = _normalise_pair(prediction, answer, options)
        if options["match"] == "contains":
            if ref and f" {ref} " in f" {pred} ":
                return 100.0
        elif pred == ref:
            return 100.0
    return 0.0


# Scripts written without spaces between words: each character is its own token.
_CJK = (
    "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u312f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
)
_F1_TOKEN = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")


def f1_tokens(text: str) -> list[str]:
    """Whitespace tokens, with every CJK character a token of its own: "我爱 NLP" → 我, 爱, nlp."""
    return _F1_TOKEN.findall(text)


def _token_f1(pred_tokens: list[str], ref_tokens: list[str]) -> float:
    if not pred_tokens or not ref_tokens:
        return 100.0 if pred_tokens == ref_tokens else 0.0
    same = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 100.0 * 2 * precision * recall / (precision + recall)


@register(
    "token_f1",
    display_name="Token F1",
    unit="F1",
    options=NORMALISE_OPTIONS,
    description="SQuAD-style token overlap F1 (0–100), best over the references.",
)
def token_f1(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    return max(
        _token_f1(f1_tokens(pred), f1_tokens(ref))
        for pred, ref in (_normalise_pair(prediction, r, options) for r in references)
    )


_SMOOTHING = ("exp", "floor", "add-k", "none")
# sacrebleu's tokenizers that need no extra package. "auto" chooses by script: Japanese (any
# kana) and Korean (any Hangul) character by character ("char": sacrebleu's "zh" leaves kana
# runs whole, so 「これはペンです」 against 「これはペンだ」 scored 0; its ja-mecab and ko-mecab
# need MeCab, which evalsite does not install), Chinese (other CJK text) "zh", the rest "13a".
_BLEU_TOKENIZERS = ("auto", "13a", "intl", "zh", "char", "none")
_HAS_CJK = re.compile(rf"[{_CJK}]")
_HAS_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HAS_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
AUTO_BLEU_TOKENIZER = (
    "by script: 13a; Chinese “zh” (a token per character); Japanese and Korean character by "
    "character (“char”)"
)


def bleu_tokenizer(texts: Sequence[str], tokenize: str = "auto") -> str:
    """The sacrebleu tokenizer BLEU uses for these texts (see _BLEU_TOKENIZERS)."""
    if tokenize != "auto":
        return tokenize
    if any(_HAS_KANA.search(text) or _HAS_HANGUL.search(text) for text in texts):
        return "char"
    return "zh" if any(_HAS_CJK.search(text) for text in texts) else "13a"


def describe_bleu_tokenizer(options: Mapping[str, Any] | None) -> str:
    """What a BLEU judge's tokenizer option means, for boards and judge pages."""
    tokenize = (options or {}).get("tokenize", "auto")
    return AUTO_BLEU_TOKENIZER if tokenize == "auto" else f"sacrebleu's “{tokenize}”"


@functools.lru_cache(maxsize=64)
def _bleu_scorer(lowercase: bool, max_n: int, smooth: str, tokenize: str) -> BLEU:
    from sacrebleu.metrics import BLEU

    return BLEU(
        lowercase=lowercase,
        max_ngram_order=max_n,
        smooth_method=smooth,
        tokenize=tokenize,
        effective_order=True,  # sentence level: orders longer than the sentence left out
    )


@register(
    "bleu",
    display_name="BLEU",
    unit="BLEU",
    options={"lowercase": False, "max_n": 4, "smooth": "exp", "tokenize": "auto"},
    description="Sentence BLEU (0–100) by sacrebleu: up to 4-grams, exponential smoothing, "
    "13a tokens (Chinese, Japanese and Korean text by character); the board adds corpus BLEU, "
    "the number papers report.",
)
def bleu(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    """sacrebleu's own sentence BLEU (its tokeniser keeps "don't" and "3.5" whole where a word
    regex would split them). Papers report corpus BLEU, which is not the mean of these: boards
    show it beside the mean (BleuTable)."""
    tokenize = bleu_tokenizer([prediction, *references], options["tokenize"])
    scorer = _bleu_scorer(options["lowercase"], options["max_n"], options["smooth"], tokenize)
    return float(scorer.sentence_score(prediction, list(references)).score)


def _compile_pattern(options: Mapping[str, Any]) -> re.Pattern[str]:
    pattern = options.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise MetricError("Regex match needs a non-empty 'pattern' option.")
    try:
        return re.compile(pattern, re.IGNORECASE if options.get("ignore_case") else 0)
    except re.error as error:
        raise MetricError(f"Regex pattern {pattern!r} does not compile: {error}.") from None


@register(
    "regex_match",
    display_name="Regex match",
    unit="%",
    options={"pattern": "", "ignore_case": False, "full": False},
    needs_reference=False,
    description="100 when `pattern` is found in the prediction (or matches all of it with `full`).",
)
def regex_match(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    compiled = _compile_pattern(options)
    found = compiled.fullmatch(prediction) if options["full"] else compiled.search(prediction)
    return 100.0 if found else 0.0


# ---- numbers ---------------------------------------------------------------------------------
# A number as people and models write it: a sign (ASCII or U+2212, made ASCII before this runs),
# thousands separated by commas or thin/no-break spaces ("1,000", "1 000"), decimals, a fraction "3/4", a
# percentage, a currency sign before it. lm-evaluation-harness's gsm8k "flexible-extract" takes
# the last such token; so does `extract: "last"` here.
_NUMBER_TOKEN = re.compile(
    r"(?<![\w.])(?P<sign>[-+])?\s?[$€£¥]?\s?(?P<int>\d{1,3}(?:,\d{3})+|\d+)?"
    r"(?:\.(?P<frac>\d+))?(?(int)|(?(frac)|(?!)))(?:\s?/\s?(?P<den>\d+)(?![\d.]))?"
    r"(?:[eE](?P<exp>[-+]?\d+))?(?P<pct>\s?%)?"
)
_LATEX_FRAC = re.compile(r"(?P<sign>-)?\\[dt]?frac\{\s*(?P<num>\d+)\s*\}\{\s*(?P<den>\d+)\s*\}")


_NARROW_SPACE = re.compile(r"(?<=\d)[\u00a0\u202f\u2009](?=\d{3}(?!\d))")


def _plain_numbers(text: str) -> str:
    # "1 000" with a no-break or thin space (as French and SI write it) is one number; an
    # ordinary space is not ("day 5 100 people").
    text = unicodedata.normalize("NFKC", _NARROW_SPACE.sub("", text)).replace("\u2212", "-")
    return _LATEX_FRAC.sub(lambda m: f"{m['sign'] or ''}{m['num']}/{m['den']}", text)


def numbers_in(text: str) -> list[tuple[float, bool]]:
    """Each number in text, left to right, as (value, written as a percentage): "−1,234.5" →
    -1234.5, "3/4" → 0.75, "\\frac{1}{2}" → 0.5, "45%" → (45, True), "$1,000" → 1000."""
    found = []
    for match in _NUMBER_TOKEN.finditer(_plain_numbers(text)):
        whole = (match["int"] or "0").replace(",", "").replace(" ", "")
        value = float(f"{whole}.{match['frac'] or '0'}")
        if match["exp"]:
            value *= 10.0 ** int(match["exp"])
        if match["den"]:
            den = float(match["den"])
            if den == 0:
                continue
            value /= den
        if match["sign"] == "-":
            value = -value
        found.append((value, bool(match["pct"])))
    return found


def read_number(text: str, extract: str = "last") -> tuple[float, bool] | None:
    """The number a text gives: the whole text as one number ("whole"), or the last number in
    it ("last"; gsm8k's "…#### 72" gives 72). None when there is none."""
    if extract == "whole":
        plain = _plain_numbers(text).strip().rstrip(".")
        match = _NUMBER_TOKEN.fullmatch(plain)
        return numbers_in(plain)[0] if match and match.group(0) else None
    numbers = numbers_in(text)
    return numbers[-1] if numbers else None


def numbers_equal(
    a: tuple[float, bool], b: tuple[float, bool], tolerance: float, rel_tolerance: float
) -> bool:
    """Equal within the tolerances; a percentage matches as written or as a share ("45%" =
    45 = 0.45), as math-verify reads it."""
    options_a = [a[0], a[0] / 100] if a[1] else [a[0]]
    options_b = [b[0], b[0] / 100] if b[1] else [b[0]]
    return any(
        math.isclose(x, y, rel_tol=rel_tolerance, abs_tol=tolerance)
        for x in options_a
        for y in options_b
    )


@register(
    "numeric_match",
    display_name="Numeric match",
    unit="%",
    options={"extract": "last", "tolerance": 0.0, "rel_tolerance": 1e-9},
    description=(
        "100 when the prediction's number equals a reference's number: signs (also U+2212), "
        "decimals, thousands separators, fractions, percentages (45% = 0.45 = 45) and "
        "currency signs are understood; `extract` is last (the last number in the response, "
        "as lm-evaluation-harness's gsm8k flexible-extract) or whole; `tolerance` is "
        "absolute, `rel_tolerance` relative."
    ),
)
def numeric_match(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    predicted = read_number(prediction, options["extract"])
    if predicted is None:
        return 0.0
    for reference in references:
        # A reference is read whole when it is one number, else by its last number ("#### 72").
        expected = read_number(reference, "whole") or read_number(reference, "last")
        if expected is not None and numbers_equal(
            predicted, expected, float(options["tolerance"]), float(options["rel_tolerance"])
        ):
            return 100.0
    return 0.0


@register(
    "macro_f1",
    display_name="Label match",
    unit="%",
    options=NORMALISE_OPTIONS,
    description=(
        "For classification (labels such as entailment / neutral / contradiction): 100 when "
        "the predicted label equals the reference label after normalisation, else 0, so the "
        "mean is accuracy; the board adds macro-F1 over the labels of the whole corpus "
        "(Dynabench's f1 for nli and sentiment, sklearn's f1_score(average=\"macro\"))."
    ),
)
def label_match(prediction: str, references: list[str], options: dict[str, Any]) -> float:
    return exact_match(prediction, references, options)


# ---- corpus-level metrics ---------------------------------------------------------------------
# Some metrics are reported over the whole corpus, not as a mean of per-item values: corpus BLEU
# sums n-gram matches over every segment before taking the geometric mean (the mean of sentence
# BLEU was 1.9 points below it on the board's example), and macro-F1 counts each label's
# precision and recall over every item. Each is computed from per-item statistics that add up,
# so a bootstrap over items only re-weights them: `CorpusTable.value(counts)` with each item's
# count in the resample.
@dataclass(frozen=True)
class CorpusMetric:
    name: str
    display_name: str
    reference: str  # the implementation nobody on this project wrote that the tests pin it to


CORPUS_METRICS: dict[str, CorpusMetric] = {
    "bleu": CorpusMetric("corpus_bleu", "Corpus BLEU", "sacrebleu.corpus_bleu"),
    "macro_f1": CorpusMetric("macro_f1", "Macro-F1", 'sklearn f1_score(average="macro")'),
}


class CorpusTable:
    """Per-item statistics of a corpus metric; `value(counts)` is the metric over the items
    drawn `counts` times each (all ones: the corpus itself)."""

    name: str = ""
    n: int = 0

    def value(self, counts: np.ndarray) -> float:
        raise NotImplementedError


class BleuTable(CorpusTable):
    """sacrebleu's segment statistics [hyp length, closest ref length, matches per order,
    n-grams per order], summed over the corpus and scored by sacrebleu's own `compute_bleu`
    (no effective order at corpus level, as `corpus_bleu`)."""

    name = "corpus_bleu"

    def __init__(
        self, predictions: Sequence[str], references: Sequence[Sequence[str]], options: dict
    ) -> None:
        texts = [*predictions, *(ref for refs in references for ref in refs)]
        self.tokenize = bleu_tokenizer(texts, options["tokenize"])
        self.max_n = int(options["max_n"])
        self.smooth = str(options["smooth"])
        scorer = _bleu_scorer(options["lowercase"], self.max_n, self.smooth, self.tokenize)
        rows = []
        for prediction, refs in zip(predictions, references, strict=True):
            score = scorer.sentence_score(prediction, list(refs))
            rows.append([score.sys_len, score.ref_len, *score.counts, *score.totals])
        self.stats = np.array(rows, dtype=float).reshape(len(rows), 2 + 2 * self.max_n)
        self.n = len(rows)

    def value(self, counts: np.ndarray) -> float:
        from sacrebleu.metrics import BLEU

        total = counts @ self.stats
        n = self.max_n
        return float(
            BLEU.compute_bleu(
                correct=[int(x) for x in total[2 : 2 + n]],
                total=[int(x) for x in total[2 + n :]],
                sys_len=int(total[0]),
                ref_len=int(total[1]),
                smooth_method=self.smooth,
                effective_order=False,
                max_ngram_order=n,
            ).score
        )


class MacroF1Table(CorpusTable):
    """Each item's reference label (its first reference) and predicted label, normalised as
    the metric's options say. Macro-F1 over every label that occurs as a reference or a
    prediction (sklearn's default), each label's F1 = 2·TP / (2·TP + FP + FN)."""

    name = "macro_f1"

    def __init__(
        self, predictions: Sequence[str], references: Sequence[Sequence[str]], options: dict
    ) -> None:
        flags = {key: options[key] for key in NORMALISE_OPTIONS}
        pairs = [
            _normalise_pair(prediction, refs[0], flags)
            for prediction, refs in zip(predictions, references, strict=True)
        ]
        labels = sorted({label for pair in pairs for label in pair})
        index = {label: i for i, label in enumerate(labels)}
        self.k = len(labels)
        self.pred = np.array([index[p] for p, _ in pairs], dtype=np.int64)
        self.true = np.array([index[t] for _, t in pairs], dtype=np.int64)
        self.hit = (self.pred == self.true).astype(float)
        self.n = len(pairs)

    def value(self, counts: np.ndarray) -> float:
        counts = counts.astype(float)
        tp = np.bincount(self.true, weights=counts * self.hit, minlength=self.k)
        as_true = np.bincount(self.true, weights=counts, minlength=self.k)
        as_pred = np.bincount(self.pred, weights=counts, minlength=self.k)
        present = (as_true + as_pred) > 0  # FN = as_true − TP, FP = as_pred − TP
        if not present.any():
            return float("nan")
        f1 = 2 * tp[present] / (as_true[present] + as_pred[present])
        return float(100.0 * f1.mean())


def corpus_table(
    metric_name: str,
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    options: Mapping[str, Any] | None = None,
) -> CorpusTable:
    """The corpus statistics of a metric that has a corpus form (CORPUS_METRICS); each item's
    references are its usable ones, already post-processed."""
    if metric_name not in CORPUS_METRICS:
        raise MetricError(f"{metric_name} has no corpus-level form.")
    merged = validate_options(metric_name, options)
    if metric_name == "bleu":
        return BleuTable(predictions, references, merged)
    return MacroF1Table(predictions, references, merged)


def corpus_bootstrap(table: CorpusTable, resamples: int, seed: int) -> np.ndarray:
    """The corpus metric over `resamples` resamples of the items (with replacement, n of n,
    one `rng.integers(0, n, n)` per resample, so a reference can draw the same items)."""
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    for b in range(resamples):
        drawn = rng.integers(0, table.n, size=table.n)
        out[b] = table.value(np.bincount(drawn, minlength=table.n))
    return out


# ---- post-processors ------------------------------------------------------------------------
@register_postprocessor("extract_choice", display_name="Extract the chosen option (A–Z)")
def extract_choice(text: str) -> str:
    """ "(B)" → "B", "Answer: C" → "C", "A and C" → "AC"; "" when no option is found."""
    try:
        return "".join(sorted(parse_mcq_choice(text, "upper", 26)))
    except JudgeReplyError:
        return ""


_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


@register_postprocessor("last_number", display_name="Last number")
def last_number(text: str) -> str:
    """ "... so 42.5 apples" → "42.5", "−5" → "-5" (U+2212 minus); thousands commas dropped;
    "" when there is none."""
    numbers = _NUMBER.findall(unicodedata.normalize("NFKC", text).replace("\u2212", "-"))
    return numbers[-1].replace(",", "").lstrip("+") if numbers else ""


@register_postprocessor("first_line", display_name="First non-empty line")
def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


@register_postprocessor("strip", display_name="Strip surrounding whitespace")
def strip(text: str) -> str:
    return text.strip()


@register_postprocessor("lowercase", display_name="Lower case")
def lowercase(text: str) -> str:
    return text.lower()
