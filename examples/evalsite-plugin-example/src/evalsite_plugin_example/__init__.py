"""Example evalsite plug-ins, one of each kind (docs/judges.md, "Python plug-ins").

Plain functions with no import of evalsite: evalsite finds them through the entry points in
pyproject.toml, shows their docstrings in the judge form, and records a hash of this module's
source on every judge version that uses them.
"""

import json
import re

_WORD = re.compile(r"\w+")
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)}


def _found(prediction: str, reference: str) -> tuple[int, int]:
    """(reference words found in the prediction, reference words)."""
    wanted = _words(reference)
    return len(wanted & _words(prediction)), len(wanted)


def word_recall(prediction: str, references: list[str], item: dict) -> float:
    """Word recall: the share of the reference's words (lower case) that the response uses,
    0–100, best over the references. An item without a reference scores 0."""
    best = 0.0
    for reference in references:
        found, wanted = _found(prediction, reference)
        if wanted:
            best = max(best, 100.0 * found / wanted)
    return best


# What the board shows: the name, the unit, the direction and the range of the values.
word_recall.display_name = "Word recall"
word_recall.unit = "%"
word_recall.higher_is_better = True
word_recall.range = (0, 100)


def corpus_word_recall(
    predictions: list[str], references: list[list[str]], items: list[dict]
) -> float:
    """Corpus word recall: reference words found over reference words, summed over the whole
    run (long references weigh more than in the mean of the items' word recall), 0–100, against
    each item's first reference."""
    found = wanted = 0
    for prediction, refs in zip(predictions, references, strict=True):
        if refs:
            hit, total = _found(prediction, refs[0])
            found, wanted = found + hit, wanted + total
    return 100.0 * found / wanted if wanted else 0.0


corpus_word_recall.display_name = "Corpus word recall"


def strip_think(text: str) -> str:
    """Drop <think>…</think> blocks (a reasoning model's draft) and the whitespace around what
    is left, so that only the final answer is scored."""
    return _THINK.sub("", text).strip()


strip_think.display_name = "Strip <think> blocks"


def answer_from_choices(item: dict) -> list[str]:
    """The answer text of a multiple-choice item: its `choices` field (a JSON list, or texts
    separated by “|”) at the 0-based index in its `label` field. {"choices": "red|green|blue",
    "label": 1} gives ["green"]. A missing field or an index out of range is an error that
    fails the item, naming the field."""
    choices = item["choices"]
    if isinstance(choices, str):
        choices = json.loads(choices) if choices.strip().startswith("[") else choices.split("|")
    index = int(item["label"])
    if not 0 <= index < len(choices):
        raise ValueError(f"label {index} is not an index of the {len(choices)} choices")
    return [str(choices[index]).strip()]


answer_from_choices.display_name = "Answer from choices and label"
