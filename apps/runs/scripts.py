"""Memory scripts (GoodAI's LTM benchmark): what a script item says, in what order, and the filler
that stands between a fact and the question about it.

A script item is a plain dataset row read through a run's `ScriptSetup`: its statements (one
text, or a JSON list of texts, each sent as a user turn of its own), the question asked about
them, the expected answer (the item's reference), and the information gap to leave between the
last statement and the question, in tokens (the setup's, or a gap column's per item). The gap
is filled with user turns of filler text (the item's filler column, else the bundled generic
filler, drawn with a seed), each answered by the model, until the tokens between the end of
the last statement and the question reach the gap. The run counts them with the endpoint's own
usage figures (`realised_gap`), so the gap recorded is the one the model actually saw, its own
answers included, as GoodAI counts it.

Plain Python, no Django: the kind (apps/runs/kinds/scripts.py) and its tests import it.
"""

import json
import math
import random
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FILLER_FILE = Path(__file__).resolve().parent / "data" / "filler.txt"
# One filler message at most this many (estimated) tokens: a long gap is many turns, as in
# GoodAI's runs, not one wall of text the model answers once.
FILLER_MESSAGE_TOKENS = 400
# A script asks at most this many filler turns per 1,000 tokens of gap (and 20 more): an
# endpoint that counts no tokens at all cannot keep a run asking forever.
MAX_FILLER_TURNS_PER_1000 = 10
MAX_GAP_TOKENS = 1_000_000


class ScriptError(ValueError):
    """A script item that cannot be run; the text names the column and what is wrong."""


@dataclass(frozen=True)
class Script:
    statements: list[str]
    question: str
    expected: str
    gap_tokens: int  # the scripted gap: filler tokens between the last statement and the question
    filler: str = ""  # the item's own filler text ("" for the bundled one)


def estimate_tokens(text: str) -> int:
    """Tokens in `text` by the usual rule of thumb for English (a token is ~0.75 words): how
    long a filler message is made, never what is recorded (that is the endpoint's count)."""
    return math.ceil(len(text.split()) * 4 / 3)


def _texts(value: Any, column: str) -> list[str]:
    """The statements of one cell: a text, a list of texts, or the JSON text of such a list."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise ScriptError(
                    f"column {column!r} starts like a JSON list but is not one ({exc.msg})"
                ) from None
        else:
            value = [value]
    if not isinstance(value, list):
        raise ScriptError(f"column {column!r} holds neither a text nor a list of texts")
    texts = []
    for n, entry in enumerate(value, 1):
        if not isinstance(entry, str) or not entry.strip():
            raise ScriptError(f"column {column!r}: statement {n} is empty or not a text")
        texts.append(entry)
    if not texts:
        raise ScriptError(f"column {column!r} has no statement")
    return texts


def gap_of(value: Any, column: str) -> int:
    """A gap cell as whole tokens (1500, "1500", 1500.0), or ScriptError."""
    if isinstance(value, bool):
        raise ScriptError(f"column {column!r} is true/false, not a number of tokens")
    if isinstance(value, str):
        try:
            value = float(value.strip().replace(",", "").replace("_", ""))
        except ValueError:
            raise ScriptError(f"column {column!r} is {value!r}, not a number of tokens") from None
    if not isinstance(value, int | float) or value != value or int(value) != value:
        raise ScriptError(f"column {column!r} is {value!r}, not a whole number of tokens")
    if not 0 <= value <= MAX_GAP_TOKENS:
        raise ScriptError(f"column {column!r} is {int(value)}: a gap is 0 to {MAX_GAP_TOKENS:,}")
    return int(value)


def script_of(
    fields: dict[str, Any],
    reference: str,
    *,
    statements_column: str,
    question_column: str,
    gap_tokens: int,
    gap_column: str = "",
    filler_column: str = "",
) -> Script:
    """The script of one item's fields, or ScriptError naming the column at fault."""
    for column in (statements_column, question_column, gap_column, filler_column):
        if column and column not in fields:
            raise ScriptError(f"the item has no column {column!r}")
    question = fields[question_column]
    if not isinstance(question, str) or not question.strip():
        raise ScriptError(f"column {question_column!r} (the question) is empty")
    gap = gap_of(fields[gap_column], gap_column) if gap_column else gap_tokens
    filler = fields[filler_column] if filler_column else ""
    if filler_column and (not isinstance(filler, str) or not filler.split()):
        raise ScriptError(f"column {filler_column!r} (the filler) is empty")
    return Script(
        _texts(fields[statements_column], statements_column), question, reference, gap, filler
    )


@cache
def bundled_filler() -> tuple[str, ...]:
    """The bundled generic filler: neutral sentences about nothing a script asks."""
    lines = FILLER_FILE.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip())


class Filler:
    """Filler messages for one script, drawn in a seeded order: the bundled sentences shuffled
    (or the item's own filler text, in order), cycled as long as the gap needs them. The same
    seed makes the same messages, so a script asked again asks the same (and the cache
    answers it)."""

    def __init__(self, seed: str, own_text: str = "") -> None:
        if own_text.strip():
            self.words = own_text.split()
            self.sentences: list[str] = []
        else:
            self.words = []
            self.sentences = list(bundled_filler())
            random.Random(seed).shuffle(self.sentences)
        self.at = 0

    def message(self, tokens: int) -> str:
        """About `tokens` tokens of filler (at least one sentence or word)."""
        tokens = max(1, min(tokens, FILLER_MESSAGE_TOKENS))
        if self.words:
            count = max(1, math.floor(tokens * 3 / 4))
            out = [self.words[(self.at + i) % len(self.words)] for i in range(count)]
            self.at = (self.at + count) % len(self.words)
            return " ".join(out)
        picked: list[str] = []
        while not picked or estimate_tokens(" ".join(picked)) < tokens:
            sentence = self.sentences[self.at % len(self.sentences)]
            if picked and estimate_tokens(" ".join([*picked, sentence])) > tokens:
                break
            picked.append(sentence)
            self.at += 1
        return " ".join(picked)


def max_filler_turns(gap_tokens: int) -> int:
    return 20 + MAX_FILLER_TURNS_PER_1000 * math.ceil(gap_tokens / 1000)


@dataclass
class GapMeter:
    """The tokens in the model's context between the end of the last statement and the start
    of the question. From the endpoint's usage: after turn k, prompt tokens of k's request +
    its completion tokens − prompt tokens of the last statement's request (which end with that
    statement). An endpoint that reports no usage is counted by the estimate instead, and the
    recorded gap says so."""

    base: int = 0  # prompt tokens of the last statement's request
    gap: int = 0
    estimated: bool = False

    def after_statement(self, prompt_tokens: int, answer: str, completion_tokens: int) -> None:
        self.base = prompt_tokens
        self.after_turn("", prompt_tokens, answer, completion_tokens, first=True)

    def after_turn(
        self,
        asked: str,
        prompt_tokens: int,
        answer: str,
        completion_tokens: int,
        *,
        first: bool = False,
    ) -> None:
        if not self.estimated and self.base and prompt_tokens:
            self.gap = prompt_tokens + completion_tokens - self.base
            return
        # No usage from the endpoint: what was said since, estimated.
        self.estimated = True
        said = completion_tokens or estimate_tokens(answer)
        self.gap += (0 if first else estimate_tokens(asked)) + said
