"""Reading judges' replies: rubric JSON objects and multiple-choice labels.

Pure Python (no Django) so it can be tested and reused anywhere. Every reply that cannot be
scored raises `JudgeReplyError(kind, message)`; `kind` is one of the `ErrorKind` values in
apps/runs/models.py (`unparseable`, `missing_subject`, `out_of_range`) and `message` names the
cause in plain words, so the failed-items page can show it as is.

Rubric replies (`parse_rubric_reply`):
- The JSON object is found tolerantly (`extract_json_object`): the whole reply, else a fenced
  ```json block, else the first balanced {...} in the text that parses. Single-quoted strings,
  trailing commas and Python's True/False/None are repaired outside strings only; anything else
  that is not JSON is a clear `unparseable` failure.
- Subject names match case-insensitively (and ignoring surrounding spaces). A subject is looked
  up at the top level first, then one level down in any nested object such as
  {"scores": {...}}; a subject's own value may itself be an object holding "score"/"value".
  Extra keys are ignored. Values may be numbers or numeric strings ("4", "4.5", "4/5" and
  "4 out of 5" give 4 / 4.5); the numerator is taken and checked against the range.
- The reason comes from a "reason"/"reasoning"/"explanation"/... key if present.

Multiple-choice replies (`parse_mcq_choice`): see its docstring for the reading order and for
how "A good answer is B" and "I choose C" are kept from being misread.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.datasets.options import LABEL_TYPES, labels_for
from apps.datasets.values import as_text

# The ErrorKind values (apps/runs/models.py) a judge reply can fail with.
UNPARSEABLE = "unparseable"
MISSING_SUBJECT = "missing_subject"
OUT_OF_RANGE = "out_of_range"
REPLY_ERROR_KINDS = (UNPARSEABLE, MISSING_SUBJECT, OUT_OF_RANGE)

REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "justification", "comment")
_SCORE_KEYS = ("score", "value", "rating", "points")
_MAX_OBJECT_STARTS = 500  # '{' positions tried in one reply: bounds the work on hostile text
_MAX_LENIENT_STARTS = 20  # of which this many also get the (slower) lenient repair,
_MAX_LENIENT_CHARS = 20_000  # for objects up to this long
_MAX_OBJECTS = 50  # objects considered per reply


class JudgeReplyError(ValueError):
    """A judge's reply that cannot be scored; `kind` is an ErrorKind value."""

    def __init__(self, kind: str, message: str) -> None:
        if kind not in REPLY_ERROR_KINDS:
            raise ValueError(f"Unknown judge reply error kind {kind!r}.")
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        # Keeps both arguments when the error crosses a process boundary (RQ pickles it).
        return (type(self), (self.kind, self.message))


class AnswerKeyError(ValueError):
    """An item's answer key is not a set of option labels: bad data, not a bad reply."""


def _clip(value: Any, limit: int = 60) -> str:
    """A short, single-line rendering of hostile text for error messages."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(number: float) -> str:
    return f"{number:g}"


# ---- JSON objects ---------------------------------------------------------------------------
_DECODER = json.JSONDecoder(strict=False)  # strict=False: raw newlines inside strings are fine
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
_BRACE_SCAN = re.compile(r"[{}\"'\\]")


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the '}' closing the '{' at `start`, skipping braces inside '...' or "...".

    Looks no further than _MAX_LENIENT_CHARS so hostile replies cannot make this quadratic.
    """
    depth = 0
    quote: str | None = None
    pos = start
    while True:
        match = _BRACE_SCAN.search(text, pos, start + _MAX_LENIENT_CHARS)
        if match is None:
            return None
        char, pos = match.group(), match.end()
        if quote:
            if char == "\\":
                pos += 1
            elif char == quote and (quote == '"' or _closes_single(text, pos)):
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return pos - 1


_AFTER_CLOSING_QUOTE = re.compile(r"\s*(?:[:,}\]]|$)")


def _closes_single(text: str, after: int) -> bool:
    """Whether the ' just before `after` closes a single-quoted string: in a dict a closing
    quote is followed by : , } or ], so the apostrophe of 'doesn't' stays inside the string."""
    return _AFTER_CLOSING_QUOTE.match(text, after) is not None


def _repair(candidate: str) -> str:
    """Single quotes → double quotes, drop trailing commas, Python literals → JSON.

    Only text outside strings is touched, so a reply's own words are never rewritten.
    """
    out: list[str] = []
    i, n = 0, len(candidate)
    while i < n:
        char = candidate[i]
        if char == '"':
            end = i + 1
            while end < n and candidate[end] != '"':
                end += 2 if candidate[end] == "\\" else 1
            out.append(candidate[i : end + 1])
            i = end + 1
        elif char == "'":
            chunk: list[str] = []
            i += 1
            while i < n and not (candidate[i] == "'" and _closes_single(candidate, i + 1)):
                if candidate[i] == "\\" and i + 1 < n:
                    nxt = candidate[i + 1]
                    chunk.append("'" if nxt == "'" else "\\" + nxt)
                    i += 2
                    continue
                chunk.append('\\"' if candidate[i] == '"' else candidate[i])
                i += 1
            out.append('"' + "".join(chunk) + '"')
            i += 1
        elif char == ",":
            rest = candidate[i + 1 :].lstrip()
            if not rest.startswith(("}", "]")):
                out.append(char)
            i += 1
        elif char.isalpha():
            end = i
            while end < n and (candidate[end].isalnum() or candidate[end] == "_"):
                end += 1
            word = candidate[i:end]
            out.append({"True": "true", "False": "false", "None": "null"}.get(word, word))
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _object_at(text: str, start: int, lenient: bool) -> tuple[dict[str, Any], int] | None:
    """The object starting at text[start] and the index just past it, if it parses."""
    try:
        obj, end = _DECODER.raw_decode(text, start)
        return (obj, end) if isinstance(obj, dict) else None
    except (ValueError, RecursionError):
        pass
    if not lenient:
        return None
    close = _balanced_end(text, start)
    if close is None:
        return None
    try:
        obj = _DECODER.decode(_repair(text[start : close + 1]))
    except (ValueError, RecursionError):
        return None
    return (obj, close + 1) if isinstance(obj, dict) else None


def _objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Each top-level object in text, left to right; an object's inner objects are skipped."""
    start = text.find("{")
    tried = 0
    while start != -1 and tried < _MAX_OBJECT_STARTS:
        found = _object_at(text, start, lenient=tried < _MAX_LENIENT_STARTS)
        tried += 1
        if found is not None:
            yield found[0]
            start = text.find("{", found[1])
        else:
            start = text.find("{", start + 1)


def iter_json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in a judge's reply, most likely first.

    Order: the whole reply (when it starts with "{"); each fenced ``` block (```json or bare);
    then every balanced {...} in the text that parses, left to right (braces inside strings do
    not confuse the scan). Single quotes, trailing commas and True/False/None are repaired
    outside strings only. The same object may come twice (a fenced one is also in the text).
    Raises JudgeReplyError("unparseable", ...) when no object parses at all.
    """
    if text is None or not text.strip():
        raise JudgeReplyError(UNPARSEABLE, "The reply is empty.")
    yielded = 0
    sources = [text.strip()] if text.strip().startswith("{") else []
    sources += [fence.group(1) for fence in _FENCE.finditer(text)]
    sources.append(text)
    for source in sources:
        for obj in _objects_in(source):
            yielded += 1
            yield obj
            if yielded >= _MAX_OBJECTS:
                return
    if yielded:
        return
    if "{" not in text:
        raise JudgeReplyError(UNPARSEABLE, "The reply contains no JSON object ({...}).")
    raise JudgeReplyError(
        UNPARSEABLE, "The reply's {...} is not valid JSON, even after repairing quotes and commas."
    )


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a judge's reply (see `iter_json_objects` for the order)."""
    return next(iter_json_objects(text))


# ---- rubric replies -------------------------------------------------------------------------
@dataclass(frozen=True)
class RubricResult:
    """One parsed rubric reply: a value per subject (keyed by the judge's names) and a reason."""

    values: dict[str, float]
    reason: str = ""
    # Not one clean JSON object: read by the tolerant rules. Not part of what was read, so two
    # replies giving the same values and reason compare equal.
    repaired: bool = field(default=False, compare=False)
    # The judge's own confidence, 0–1, when it was asked for one (Judge.ask_confidence); None
    # when not asked or not given as a number in range (the scores still count).
    confidence: float | None = field(default=None, compare=False)
    # How the verdict was picked when the reply was not one clean verdict: the reasoning set
    # aside, which of several candidates was taken ("" when there was nothing to choose).
    reading: str = field(default="", compare=False)


@dataclass(frozen=True)
class Subject:
    name: str
    min: float
    max: float


def validate_subjects(subjects: Iterable[Mapping[str, Any]]) -> list[Subject]:
    """Check a judge's subject list; raises ValueError with a message naming the problem."""
    result: list[Subject] = []
    seen: set[str] = set()
    for position, raw in enumerate(subjects, start=1):
        if not isinstance(raw, Mapping):
            raise ValueError(f"Subject {position} must be an object with name, min and max.")
        name = str(raw.get("name") or "").strip()
        if not name:
            raise ValueError(f"Subject {position} has no name.")
        key = name.casefold()
        if key in seen:
            raise ValueError(f"Subject '{name}' is listed twice (names ignore case).")
        if key in REASON_KEYS:
            raise ValueError(f"'{name}' is reserved for the judge's reason; rename the subject.")
        seen.add(key)
        try:
            low, high = float(raw["min"]), float(raw["max"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"Subject '{name}' needs numeric min and max.") from None
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise ValueError(
                f"Subject '{name}': min {raw['min']} must not exceed max {raw['max']}."
            )
        result.append(Subject(name, low, high))
    if not result:
        raise ValueError("A rubric judge needs at least one subject.")
    return result


_NUMERIC = re.compile(
    r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:(?:/|out\s+of|of)\s*\d+(?:\.\d*)?)?\s*$", re.I
)


def _to_number(subject: str, raw: Any) -> float:
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if isinstance(key, str) and key.strip().casefold() in _SCORE_KEYS:
                return _to_number(subject, value)
        raise JudgeReplyError(
            UNPARSEABLE, f"'{subject}' is an object without a score ({_clip(raw)})."
        )
    if raw is None:
        raise JudgeReplyError(UNPARSEABLE, f"'{subject}' has no value (null).")
    if isinstance(raw, bool):
        raise JudgeReplyError(UNPARSEABLE, f"'{subject}' = {_clip(raw)} is not a number.")
    if isinstance(raw, int | float):
        number = float(raw)
    elif isinstance(raw, str):
        match = _NUMERIC.match(unicodedata.normalize("NFKC", raw))
        if match is None:
            raise JudgeReplyError(UNPARSEABLE, f"'{subject}' = {_clip(raw)!r} is not a number.")
        number = float(match.group(1))
    else:
        raise JudgeReplyError(UNPARSEABLE, f"'{subject}' = {_clip(raw)} is not a number.")
    if not math.isfinite(number):
        raise JudgeReplyError(UNPARSEABLE, f"'{subject}' = {_clip(raw)} is not a finite number.")
    return number


def _text_of(value: Any) -> str:
    return as_text(value).strip()


def _find_reason(obj: Mapping[str, Any], subject_values: Mapping[str, Any]) -> str:
    subject_keys = {name.casefold() for name in subject_values}
    scopes = [obj] + [
        value
        for key, value in obj.items()
        if isinstance(value, Mapping) and str(key).strip().casefold() not in subject_keys
    ]
    for scope in scopes:
        for key, value in scope.items():
            if str(key).strip().casefold() in REASON_KEYS:
                return _text_of(value)
    # Judges sometimes give a reason per subject: {"accuracy": {"score": 4, "reason": "..."}}.
    parts = []
    for name, value in subject_values.items():
        if isinstance(value, Mapping):
            for key, inner in value.items():
                if str(key).strip().casefold() in REASON_KEYS:
                    parts.append(f"{name}: {_text_of(inner)}")
    return "\n".join(parts)


def _lookup(
    obj: Mapping[str, Any], specs: Sequence[Subject]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """(raw value per subject found, subjects missing, keys given) for one reply object."""
    subject_keys = {spec.name.casefold() for spec in specs}
    top: dict[str, tuple[str, Any]] = {}
    nested: dict[str, tuple[str, Any]] = {}
    for key, value in obj.items():
        top.setdefault(str(key).strip().casefold(), (str(key), value))
    for key, value in obj.items():
        if isinstance(value, Mapping) and str(key).strip().casefold() not in subject_keys:
            for inner_key, inner in value.items():
                nested.setdefault(str(inner_key).strip().casefold(), (f"{key}.{inner_key}", inner))
    raw_values: dict[str, Any] = {}
    missing: list[str] = []
    for spec in specs:
        hit = top.get(spec.name.casefold()) or nested.get(spec.name.casefold())
        if hit is None:
            missing.append(spec.name)
        else:
            raw_values[spec.name] = hit[1]
    given = [
        shown
        for folded, (shown, value) in (top | nested).items()
        if folded not in REASON_KEYS and not isinstance(value, Mapping)
    ]
    return raw_values, missing, given


# ---- reply formats ----------------------------------------------------------------------------
# How a rubric judge's reply is read (Judge.reply_format). Each is (value, label, example).
REPLY_FORMATS: tuple[tuple[str, str, str], ...] = (
    ("json", "JSON object", '{"reason": "…", "accuracy": 4}'),
    ("brackets", "Double brackets (MT-Bench)", "Rating: [[8]]"),
    ("result", "[RESULT] N (Prometheus)", "Feedback: … [RESULT] 4"),
    ("score", "Score: N/M", "Score: 4/5"),
    ("last_number", "The last number", "… so I give it 4."),
    ("regex", "A regular expression", r"Accuracy: (?P<accuracy>\d+)"),
)
REPLY_FORMAT_NAMES = tuple(value for value, _, _ in REPLY_FORMATS)
# The formats that give one number: a judge using one of them scores a single subject.
SINGLE_VALUE_FORMATS = ("brackets", "result", "last_number")

# Reasoning that models put before their answer; what is inside is a draft, not the verdict.
_REASONING_TAGS = r"think|thinking|thought|reasoning|reflection|scratchpad|analysis"
_REASONING_BLOCK = re.compile(
    rf"<\s*({_REASONING_TAGS})\b[^>]*>.*?<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL
)
_REASONING_OPEN = re.compile(rf"<\s*({_REASONING_TAGS})\b[^>]*>", re.IGNORECASE)
_REASONING_CLOSE = re.compile(rf"<\s*/\s*({_REASONING_TAGS})\s*>", re.IGNORECASE)


def strip_reasoning(text: str) -> tuple[str, str]:
    """(the reply without its reasoning blocks, a note saying what was set aside).

    Closed blocks (<think>…</think>, <reasoning>…) go. A closing tag with no opening one (some
    servers drop the opening "<think>") sets aside everything before it. A reply that opens a
    block and never closes it stopped while still reasoning: it has no verdict, so a
    JudgeReplyError says so rather than reading a draft as the score.
    """
    tags = [match.group(1).lower() for match in _REASONING_BLOCK.finditer(text)]
    visible = _REASONING_BLOCK.sub("\n", text)
    closes = list(_REASONING_CLOSE.finditer(visible))
    if closes:
        tags.append(closes[-1].group(1).lower())
        visible = visible[closes[-1].end() :]
    opened = _REASONING_OPEN.match(visible.lstrip())
    if opened:
        # Only at the start: a "<think>" further on is more likely quoted from the response.
        raise JudgeReplyError(
            UNPARSEABLE,
            f"The reply ends inside an unclosed <{opened.group(1)}> block: it has no verdict "
            "after its reasoning.",
        )
    if not tags:
        return text, ""
    if not visible.strip():
        raise JudgeReplyError(
            UNPARSEABLE, "The reply is only reasoning (<think>…): no verdict after it."
        )
    shown = ", ".join(f"<{tag}>" for tag in dict.fromkeys(tags))
    return visible, f"set aside the reasoning ({shown})"


@dataclass(frozen=True)
class _Candidate:
    """One verdict found in a reply: its raw values per subject, where it was, as written."""

    raw: dict[str, Any]
    start: int
    shown: str
    source: Mapping[str, Any] | None = None  # the JSON object, for the reason and confidence
    reason: str = ""
    # (subject, the scale's top "M" as written) for "N/M" verdicts: checked against the range.
    scales: tuple[tuple[str, float], ...] = ()
    # Closed by a quotation mark: an example echoed from the prompt ('for example: "Rating:
    # [[5]]"'), a candidate only when the reply has no other.
    quoted: bool = False


_QUOTE_AFTER = re.compile(r"\s*(?:\*\*)?\s*[\"”'`」』]")
_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
_BRACKETS = re.compile(rf"\[\[\s*(?:\*\*)?\s*({_NUM})\s*(?:/\s*({_NUM})\s*)?(?:\*\*)?\s*\]\]")
# FastChat reads a single-bracketed "[8]" when there is no [[8]]; only after a rating label
# here, so a citation "[1]" is never a score.
_BRACKET_BACKUP = re.compile(
    rf"\b(?:rating|score)\s*[:：]?\s*(?:\*\*)?\s*\[\s*({_NUM})\s*(?:/\s*({_NUM})\s*)?\]",
    re.IGNORECASE,
)
_RESULT = re.compile(
    rf"\[\s*RESULT\s*\]\s*[:：=]?\s*(?:\*\*)?\s*[(\[]?\s*({_NUM})\s*(?:(?:/|out\s+of)\s*({_NUM}))?",
    re.IGNORECASE,
)
_ANY_NUMBER = re.compile(
    rf"({_NUM})(?:\s*(?:\*\*|__)?\s*(?:/|out\s+of)\s*({_NUM}))?", re.IGNORECASE
)
_SCORE_WORDS = r"score|rating|grade|评分|得分|分数|打分|評価|점수"


def _score_pattern(label: str) -> re.Pattern[str]:
    """'<label>: N', 'N/M' or 'N out of M', with Markdown emphasis anywhere around."""
    return re.compile(
        rf"(?<![A-Za-z0-9_])(?:{label})s?(?![A-Za-z0-9_])\s*(?:\*\*|__)?\s*(?:is|of|[:：=\-–—])?\s*(?:\*\*|__)?\s*"
        rf"({_NUM})(?![\d.]*%)(?:\s*(?:\*\*|__)?\s*(?:/|out\s+of|of)\s*({_NUM}))?",
        re.IGNORECASE,
    )


# CJK lenticular brackets, which NFKC leaves alone: "评分：【【7】】" is "[[7]]".
_CJK_BRACKETS = str.maketrans({"【": "[", "】": "]", "〖": "[", "〗": "]"})


def _plain(text: str) -> str:
    """NFKC (full-width digits and brackets), CJK lenticular brackets as [ ], U+2212 minus as
    '-'."""
    return unicodedata.normalize("NFKC", text).translate(_CJK_BRACKETS).replace("\u2212", "-")


# An example introduced as one ("the format is [[rating]], e.g. [[5]]"), in a reply that also
# holds its real verdict: set aside like a quoted one.
_EXAMPLE_BEFORE = re.compile(
    r"(?:\be\.\s?g\.|\bfor\s+(?:example|instance)|\bsuch\s+as|例如|比如)\s*[:：,，]?\s*"
    r"(?:\*\*)?\s*(?:rating|score)?\s*[:：]?\s*$",
    re.IGNORECASE,
)


def _pattern_candidates(pattern: re.Pattern[str], text: str, name: str) -> Iterator[_Candidate]:
    for match in pattern.finditer(text):
        scales = ((name, float(match.group(2))),) if match.group(2) else ()
        quoted = _QUOTE_AFTER.match(text, match.end()) is not None or (
            _EXAMPLE_BEFORE.search(text[max(0, match.start() - 40) : match.start()]) is not None
        )
        yield _Candidate(
            {name: match.group(1)},
            match.start(),
            match.group(0).strip(),
            scales=scales,
            quoted=quoted,
        )


def _last_number_candidates(text: str, name: str) -> list[_Candidate]:
    found = list(_pattern_candidates(_ANY_NUMBER, text, name))
    return found[-1:]  # only the last number is a verdict: earlier ones are not candidates


def _label_candidates(text: str, specs: Sequence[Subject]) -> list[_Candidate]:
    """'Score: N/M' verdicts. One subject: labelled score, rating, grade… or its name; several:
    each by its own name, and a verdict is the run of one label per subject in order."""
    if len(specs) == 1:
        label = f"{_SCORE_WORDS}|{re.escape(specs[0].name)}"
        return list(_pattern_candidates(_score_pattern(label), text, specs[0].name))
    # Every labelled value, in order; a verdict is complete once each subject has been given,
    # and a later value of a subject starts a new verdict (a draft before the final one).
    hits: list[tuple[int, Subject, re.Match[str]]] = []
    for spec in specs:
        for match in _score_pattern(re.escape(spec.name)).finditer(text):
            hits.append((match.start(), spec, match))
    hits.sort(key=lambda hit: hit[0])
    verdicts: list[_Candidate] = []
    current: dict[str, re.Match[str]] = {}
    for _, spec, match in hits:
        if spec.name in current:
            current = {}
        current[spec.name] = match
        if len(current) == len(specs):
            first = min(m.start() for m in current.values())
            last = max(m.end() for m in current.values())
            verdicts.append(
                _Candidate(
                    {name: m.group(1) for name, m in current.items()},
                    first,
                    " ".join(text[first:last].split()),
                    scales=tuple(
                        (name, float(m.group(2))) for name, m in current.items() if m.group(2)
                    ),
                )
            )
            current = {}
    return verdicts


def _group_name(subject: str) -> str:
    """The named group a regex format uses for a subject: its name as a Python identifier."""
    name = re.sub(r"\W", "_", subject.strip().casefold())
    return name if name and not name[0].isdigit() else f"_{name}"


def compile_reply_pattern(pattern: str, subjects: Sequence[Mapping[str, Any]]) -> re.Pattern[str]:
    """A regex reply format, checked: it compiles and has one named group per subject (the
    subject's name in lower case, other characters as _: "Task fit" → (?P<task_fit>…)); an
    optional (?P<reason>…) gives the reason. Raises ValueError naming the problem."""
    specs = validate_subjects(subjects)
    if not pattern or not pattern.strip():
        raise ValueError("A regular-expression reply format needs a pattern.")
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ValueError(f"The reply pattern does not compile: {error}.") from None
    groups = {name.casefold() for name in compiled.groupindex}
    missing = [spec.name for spec in specs if _group_name(spec.name) not in groups]
    if missing:
        wanted = ", ".join(f"(?P<{_group_name(name)}>…)" for name in missing)
        raise ValueError(f"The reply pattern needs a named group per subject: add {wanted}.")
    return compiled


def _regex_candidates(text: str, pattern: str, specs: Sequence[Subject]) -> list[_Candidate]:
    compiled = compile_reply_pattern(
        pattern, [{"name": s.name, "min": s.min, "max": s.max} for s in specs]
    )
    lookup = {name.casefold(): name for name in compiled.groupindex}
    found = []
    for match in compiled.finditer(text):
        raw = {spec.name: match.group(lookup[_group_name(spec.name)]) for spec in specs}
        if any(value is None for value in raw.values()):
            continue
        reason = match.group(lookup["reason"]) if "reason" in lookup else None
        found.append(
            _Candidate(raw, match.start(), _clip(match.group(0), 80), reason=(reason or "").strip())
        )
    return found


def _json_candidates(
    text: str, specs: Sequence[Subject]
) -> tuple[list[_Candidate], tuple[dict[str, Any], list[str], list[str]] | None]:
    """Every top-level JSON object holding all subjects, in order, and the closest to complete
    of the rest (for the missing-subject message). Raises when no object parses at all."""
    complete: list[_Candidate] = []
    closest: tuple[dict[str, Any], list[str], list[str]] | None = None
    objects = 0
    for start, end, obj in _objects_at(text):
        objects += 1
        raw_values, missing, given = _lookup(obj, specs)
        if not missing:
            complete.append(_Candidate(raw_values, start, _clip(text[start:end], 80), obj))
        elif closest is None or len(missing) < len(closest[1]):
            closest = (raw_values, missing, given)
        if objects >= _MAX_OBJECTS:
            break
    if not objects:
        list(iter_json_objects(text))  # raises the reason no object was found
    return complete, closest


def _objects_at(text: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(start, end, object) for each top-level object in text, left to right; a top-level
    JSON list of objects ('[{...}]') counts its objects."""
    start = text.find("{")
    tried = 0
    while start != -1 and tried < _MAX_OBJECT_STARTS:
        found = _object_at(text, start, lenient=tried < _MAX_LENIENT_STARTS)
        tried += 1
        if found is not None:
            yield start, found[1], found[0]
            start = text.find("{", found[1])
        else:
            start = text.find("{", start + 1)


def _missing_message(missing: list[str], given: list[str]) -> str:
    got = ", ".join(_clip(name, 40) for name in given[:20]) or "no scores"
    names = ", ".join(f"'{name}'" for name in missing)
    if len(missing) == 1:
        return f"Subject {names} is missing from the reply (got: {got})."
    return f"Subjects {names} are missing from the reply (got: {got})."


_NOT_FOUND = {
    "brackets": "No rating in the MT-Bench format [[N]] (e.g. “Rating: [[8]]”) in the reply",
    "result": "No “[RESULT] N” verdict in the reply",
    "score": "No “Score: N” verdict in the reply",
    "last_number": "No number in the reply",
    "regex": "The reply pattern matches nowhere in the reply",
}


def parse_rubric_reply(
    text: str,
    subjects: Sequence[Mapping[str, Any]],
    confidence: bool = False,
    reply_format: str = "json",
    pattern: str = "",
) -> RubricResult:
    """Scores for every subject from a judge's reply, read in its declared `reply_format`.

    Reasoning blocks (<think>…</think> and the like) are set aside first (`strip_reasoning`).
    Then every complete verdict in the rest is a candidate: a JSON object holding every subject
    ("json"), "[[8]]" ("brackets", MT-Bench; "Rating: [8]" when there is no [[N]]), "[RESULT] 4"
    ("result", Prometheus), "Score: 4/5" ("score"; with several subjects "Accuracy: 4/5" per
    subject), the last number ("last_number"), or a match of `pattern` with a named group per
    subject ("regex"). The last candidate wins, so a draft, a "Draft:" object or an echoed
    format example before the final verdict is not the score; `RubricResult.reading` says
    which candidate was taken and what was set aside, and `repaired` marks a reply that was not
    one clean verdict (several that disagree, or JSON that needed repair).
    Raises JudgeReplyError: `unparseable` (no verdict in the format, a reply that stops inside
    its reasoning, a value that is not a number), `missing_subject` (JSON: names every missing
    subject and the keys that were given, from the object closest to complete),
    `out_of_range` (names each subject, its value and its range; or a "N/M" on another scale).
    """
    specs = validate_subjects(subjects)
    if reply_format not in REPLY_FORMAT_NAMES:
        raise ValueError(
            f"Reply format must be one of {', '.join(REPLY_FORMAT_NAMES)}, not {reply_format!r}."
        )
    if reply_format in SINGLE_VALUE_FORMATS and len(specs) != 1:
        raise ValueError(f"The {reply_format} reply format gives one value: use one subject.")
    if text is None or not text.strip():
        raise JudgeReplyError(UNPARSEABLE, "The reply is empty.")
    visible, note = strip_reasoning(text)
    closest = None
    if reply_format == "json":
        candidates, closest = _json_candidates(visible, specs)
    else:
        plain = _plain(visible)
        name = specs[0].name
        if reply_format == "brackets":
            candidates = list(_pattern_candidates(_BRACKETS, plain, name)) or list(
                _pattern_candidates(_BRACKET_BACKUP, plain, name)
            )
        elif reply_format == "result":
            candidates = list(_pattern_candidates(_RESULT, plain, name))
        elif reply_format == "score":
            candidates = _label_candidates(plain, specs)
        elif reply_format == "last_number":
            candidates = _last_number_candidates(plain, name)
        else:
            candidates = _regex_candidates(plain, pattern, specs)
    if not candidates:
        if closest is not None:
            raise JudgeReplyError(MISSING_SUBJECT, _missing_message(closest[1], closest[2]))
        where = " after its reasoning" if note else ""
        raise JudgeReplyError(
            UNPARSEABLE, f"{_NOT_FOUND[reply_format]}{where} ({_clip(visible)!r})."
        )
    examples = [c for c in candidates if c.quoted]
    if examples and len(examples) < len(candidates):
        candidates = [c for c in candidates if not c.quoted]
    else:
        examples = []
    taken = candidates[-1]
    values = {spec.name: _to_number(spec.name, taken.raw[spec.name]) for spec in specs}
    _check_scales(taken, specs)
    outside = [
        f"'{spec.name}' = {_fmt(values[spec.name])} is outside {_fmt(spec.min)}–{_fmt(spec.max)}"
        for spec in specs
        if not spec.min <= values[spec.name] <= spec.max
    ]
    if outside:
        raise JudgeReplyError(OUT_OF_RANGE, "; ".join(outside) + ".")
    notes = [note] if note else []
    if examples:
        shown = "; ".join(_clip(c.shown, 40) for c in examples[-3:])
        notes.append(f"skipped {len(examples)} quoted example(s) ({shown})")
    earlier = [c.shown for c in candidates[:-1]]
    if earlier:
        shown = "; ".join(_clip(c, 40) for c in earlier[-3:])
        notes.append(
            f"took the last of {len(candidates)} verdicts, {taken.shown!r} (earlier: {shown})"
        )
    disagree = any(c.raw != taken.raw for c in candidates[:-1])
    if taken.source is not None:
        reason = _find_reason(taken.source, taken.raw)
        repaired = disagree or not _is_clean_json(visible)
        stated = _confidence(taken.source) if confidence else None
    else:
        reason = taken.reason or visible.strip()
        repaired = disagree
        stated = None
    return RubricResult(
        values=values, reason=reason, repaired=repaired, confidence=stated, reading="; ".join(notes)
    )


def _check_scales(taken: _Candidate, specs: Sequence[Subject]) -> None:
    """A verdict written "N/M" is on a 0–M scale: refused when M is not the subject's top."""
    by_name = {spec.name: spec for spec in specs}
    for name, top in taken.scales:
        spec = by_name[name]
        if top != spec.max:
            raise JudgeReplyError(
                OUT_OF_RANGE,
                f"'{name}' is given out of {_fmt(top)} ({taken.shown!r}), but its range is "
                f"{_fmt(spec.min)}–{_fmt(spec.max)}.",
            )


def _confidence(obj: Mapping[str, Any]) -> float | None:
    """A stated confidence as a share: 0–1 as given, 1–100 read as a percentage."""
    raw = next((v for k, v in obj.items() if str(k).strip().lower() == "confidence"), None)
    try:
        value = float(str(raw).strip().rstrip("%")) if raw is not None else None
    except ValueError:
        return None
    if value is None or not math.isfinite(value) or not 0 <= value <= 100:
        return None
    return value / 100 if value > 1 else value


def _is_clean_json(text: str) -> bool:
    """Whether the whole reply is one JSON object, as asked (whitespace aside)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def response_format_for(
    subjects: Sequence[Mapping[str, Any]], confidence: bool = False
) -> dict[str, Any]:
    """The `response_format` for endpoints with structured output (OpenAI json_schema).

    Strict mode requires every property to be listed as required, so the optional reason is
    required-but-nullable. The reason comes first so the model explains before it scores.
    Ranges are stated in descriptions rather than minimum/maximum, which some strict-mode
    servers reject; `parse_rubric_reply` checks them anyway.
    """
    specs = validate_subjects(subjects)
    properties: dict[str, Any] = {
        "reason": {"type": ["string", "null"], "description": "A short justification."}
    }
    for spec in specs:
        properties[spec.name] = {
            "type": "number",
            "description": f"Score for {spec.name}, from {_fmt(spec.min)} to {_fmt(spec.max)}.",
        }
    if confidence:
        properties["confidence"] = {
            "type": "number",
            "description": "How sure you are of these scores, from 0 to 1.",
        }
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "judge_scores",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


# ---- multiple choice ------------------------------------------------------------------------
def format_labels(labels: Iterable[str]) -> str:
    """Labels as "A, C" in label order; "none" for the empty set."""
    ordered = sorted(labels, key=lambda label: (len(label), label))
    return ", ".join(ordered) if ordered else "none"


def score_mcq(chosen: Iterable[str], answer: Iterable[str]) -> float:
    """100 when exactly the answer's labels were chosen, else 0 (no partial credit)."""
    return 100.0 if set(chosen) == set(answer) else 0.0


@dataclass
class _Tok:
    text: str
    start: int
    kind: str  # "alnum" | "space" | "char"


_TOKEN = re.compile(r"[A-Za-z0-9]+|\s+|.", re.DOTALL)
# Skipped around labels: brackets, quotes and markdown emphasis.
_DECOR = set("()[]{}<>*_~`#|\"'“”‘’「」『』【】《》〈〉")
# Between labels of one list: "A, C", "A和C", "A、C", "A/C", "A & C", "A and C".
_SEP_CHARS = set(",;/&+、和与及跟")
_SEP_WORDS = {"and"}
# Skipped after an answer marker before the labels: "Answer: B", "答案是B", "is → B".
_LEAD_CHARS = _DECOR | set(":=-–—→>：")
# Ends a leading label: "B) because", "A. Paris", "C: ...".
_LEAD_END = set(").:,;、。!！-—")
# Words after "A"/"I" that show it is a label, not the article or the pronoun:
# "A and C", "A is correct" — whereas "A good answer", "I think".
_ARTICLE_FOLLOWERS = {
    "and", "or", "is", "are", "was", "were", "seems", "appears", "looks", "would", "should",
    "could", "might", "must", "also", "too", "fits", "works",
}  # fmt: skip
_PRONOUN_FOLLOWERS = {"and", "or", "is", "are"}
_NONE_WORDS = {
    "none", "none of the above", "none of them", "none of these", "no option", "no answer",
    "nothing", "null", "nil", "n/a", "[]", "无", "没有", "都不是", "都不对", "以上都不是", "以上都不对",
}  # fmt: skip
_STRONG_MARKERS = re.compile(
    r"(?:\b(?:final|correct|right|best)\s+(?:answer|option|choice)s?\b|\banswers?\b)"
    r"(?:\s+(?:is|are|was|were|would\s+be|should\s+be|will\s+be|must\s+be)\b)?"
    r"(?:\s+(?:options?|choices?|letters?)\b)?"
    r"|(?:正确)?答案(?:应该|应)?(?:是|为|選|选)?|答え(?:は)?|正解(?:は)?|정답(?:은|는)?",
    re.IGNORECASE,
)
# A conclusion drawn in a chain of thought: "…, so A.", "Therefore C.", "so it must be B".
_CONCLUSIONS = re.compile(
    r"\b(?:so|therefore|thus|hence|consequently)\b,?"
    r"(?:\s+(?:it|this|that)\s*(?:must\s+be|has\s+to\s+be|should\s+be|is|'s))?"
    r"|\bmust\s+be\b|\b(?:that\s+)?(?:leaves|leaving)(?:\s+(?:only|us\s+with))?\b"
    r"|\bit(?:'s|’s|\s+is)\b|所以(?:选择?|是)?|因此(?:选择?|是)?|故(?:选择?)?",
    re.IGNORECASE,
)
# What follows an option stated as the right one: "C is correct", "A and C are correct",
# "B is the best choice", "C fits best", "C) right", "选项 C 正确". A bare "correct" counts
# only after a list mark ("C: correct", "C) right").
_AFFIRMED = re.compile(
    r"(?P<verb>\s*(?:is|are|seems|seem|looks|appears|would\s+be|must\s+be)\s+"
    r"(?:both\s+|all\s+|also\s+|clearly\s+|definitely\s+)?(?:the\s+)?)?"
    r"(?:correct|right|true|best|most\s+(?:accurate|appropriate|likely)"
    r"|only\s+(?:one|option|choice)\s+(?:consistent|that|which|compatible))\b"
    r"|\s*(?P<fits>fits|works)\s+best\b|\s*(?P<zh>(?<!不)(?:是)?正确|是对的)",
    re.IGNORECASE,
)
_BOXED = re.compile(r"\\boxed\s*\{\s*(?:\\(?:text|mathrm|textbf)\s*\{)?\s*([^{}]{1,40}?)\s*\}")
_BOLD = re.compile(r"\*\*([^*\n]{1,60}?)\*\*")
_MEDIUM_MARKERS = re.compile(
    r"\b(?:choose|chose|chosen|select|selected|pick|picked|go\s+with|going\s+with|opt\s+for)\b"
    r"(?:\s+(?:options?|choices?|letters?|answers?)\b)?"
    r"|选择?|選擇?",
    re.IGNORECASE,
)
_NEGATION_BEFORE = re.compile(r"(?:\bnot|n't|\bnever)\s*$", re.IGNORECASE)
# In free text, "not B" / "B is wrong" / "B错" do not choose B.
_NEGATED_BEFORE = re.compile(
    r"(?:\bnot|\bno|n't|\bnever|\bneither|\bnor|\bexcept|不是|不选|排除|除了)\s*"
    r"(?:(?:options?|choices?|answer)\s*)?[(\[\"'*]*\s*$",
    re.IGNORECASE,
)
_NEGATED_AFTER = re.compile(
    r"[)\]\"'*]*\s*(?:(?:is|are|was|were|seems|looks)\s+(?:not\b|wrong|incorrect|false)"
    r"|(?:is|are|was|were)n't|是?(?:错|不对|不正确))",
    re.IGNORECASE,
)
# Closing marks after a label that opens the reply: "**B** …", "(B) …", "【B】…".
_CLOSERS = set(")]}*】」』》\"'”’")


class _Reader:
    """Reads option labels out of tokenised text for one label type and count."""

    def __init__(self, text: str, label_type: str, label_count: int) -> None:
        self.label_type = label_type
        self.labels = labels_for(label_type, label_count)
        self.valid = set(self.labels)
        self.text = text
        self.toks = [
            _Tok(m.group(), m.start(), "alnum" if m.group().isalnum() and m.group().isascii()
                 else "space" if m.group().isspace() else "char")
            for m in _TOKEN.finditer(text)
        ]  # fmt: skip
        self.starts = [tok.start for tok in self.toks]

    def tok(self, i: int) -> _Tok | None:
        return self.toks[i] if 0 <= i < len(self.toks) else None

    # ---- token classification ----
    def canon(self, char: str) -> str:
        if self.label_type == "upper":
            return char.upper()
        return char.lower() if self.label_type == "lower" else char

    def alphabet_case(self, run: str) -> bool:
        """Whether a run is written in this label type's alphabet and case."""
        if self.label_type == "digit":
            return run.isdigit()
        return run.isalpha() and (run.isupper() if self.label_type == "upper" else run.islower())

    def is_separator(self, i: int) -> bool:
        tok = self.tok(i)
        if tok is None:
            return False
        return (tok.kind == "char" and tok.text in _SEP_CHARS) or tok.text.lower() in _SEP_WORDS

    def classify(self, i: int, any_case: bool) -> tuple[list[str], list[str]] | None:
        """(labels, out-of-range labels) if token i reads as labels, else None (a word)."""
        tok = self.tok(i)
        if tok is None or tok.kind != "alnum" or tok.text.lower() in _SEP_WORDS:
            return None
        run = tok.text
        if self.label_type != "digit" and run.isalpha() and any_case and len(run) == 1:
            run = self.canon(run)
        if not self.alphabet_case(run) or self.glued(i):
            return None
        if len(run) == 1:
            return ([run], []) if run in self.valid else ([], [run])
        # "AC" is two labels; a run with repeats or letters beyond the count is a word.
        if len(set(run)) == len(run) and all(char in self.valid for char in run):
            return list(run), []
        return None

    def glued(self, i: int) -> bool:
        """Part of a bigger word or number: "don't", "I'm", "X-ray", "2.5", "1,000"."""
        prev, prev2 = self.tok(i - 1), self.tok(i - 2)
        nxt, nxt2 = self.tok(i + 1), self.tok(i + 2)
        for joiner, other in ((prev, prev2), (nxt, nxt2)):
            if joiner and other and joiner.text in "'’-" and other.kind == "alnum":
                return True
        if self.label_type == "digit":
            run = self.toks[i].text
            if prev and prev2 and prev.text == "." and prev2.text.isdigit():
                return True
            if nxt and nxt2 and nxt.text == "." and nxt2.text.isdigit():
                return True
            if nxt and nxt2 and nxt.text == "," and nxt2.text.isdigit() and len(nxt2.text) == 3:
                return True
            if prev and prev2 and prev.text == "," and prev2.text.isdigit() and len(run) == 3:
                return True
        return False

    def is_article(self, i: int) -> bool:
        """Whether token i is the article or the pronoun ("A good answer", "I think")."""
        word = self.toks[i].text
        if word not in {"A", "a", "I", "i"}:
            return False
        space, follower = self.tok(i + 1), self.tok(i + 2)
        if space is None or space.kind != "space" or "\n" in space.text:
            return False
        if follower is None or follower.kind != "alnum" or not follower.text.isalpha():
            return False
        followers = _PRONOUN_FOLLOWERS if word in {"I", "i"} else _ARTICLE_FOLLOWERS
        if follower.text.lower() in followers or self.is_separator(i + 2):
            return False
        return self.classify(i + 2, any_case=False) is None

    def is_none_word(self, i: int) -> bool:
        tok = self.toks[i]
        if tok.kind == "alnum":
            if tok.text.lower() in {"none", "nothing"}:
                return True
            return tok.text in {"N", "n"} and self.canon("N") not in self.valid
        return tok.text in {"无", "没"}

    # ---- readers ----
    def skip(self, i: int, chars: set[str], newlines: bool = True) -> int:
        while (tok := self.tok(i)) is not None:
            space = tok.kind == "space" and (newlines or "\n" not in tok.text)
            if space or (tok.kind == "char" and tok.text in chars):
                i += 1
            elif tok.text == "\\" and (word := self.tok(i + 1)) and word.kind == "alnum":
                i += 2  # \boxed{B}, \text{B}
            else:
                break
        return i

    def read_list(self, i: int, any_case: bool) -> tuple[list[str], list[str], int] | None:
        """A label list starting at token i: "A", "A, C", "(A) and (C)", "A C", "AC"."""
        labels: list[str] = []
        bad: list[str] = []
        while (read := self.classify(i, any_case)) is not None and not self.is_article(i):
            labels += read[0]
            bad += read[1]
            after = self.skip(i + 1, _DECOR, newlines=False)
            if self.is_separator(after):
                i = self.skip(after + 1, _DECOR)
                continue
            gap = self.toks[i + 1 : after]
            if gap and all(tok.kind == "space" for tok in gap) and self.classify(after, any_case):
                i = after  # space-separated labels on one line: "A C"
                continue
            i += 1
            break
        if not labels and not bad:
            return None
        return labels, bad, i

    def result(self, labels: list[str], bad: list[str]) -> frozenset[str]:
        if bad:
            shown = ", ".join(f"'{label}'" for label in dict.fromkeys(bad))
            raise JudgeReplyError(
                UNPARSEABLE,
                f"The reply chose {shown}, which is not among the labels "
                f"{self.labels[0]}–{self.labels[-1]}.",
            )
        return frozenset(labels)

    def whole_reply(self) -> frozenset[str] | None:
        """The reply is nothing but labels: "B", "A, C", "A.", "(B)", "**B**", "A和C"."""
        read = self.read_list(self.skip(0, _DECOR), any_case=True)
        if read is None:
            return None
        rest = self.skip(read[2], _DECOR | set(".。!！"))
        return self.result(read[0], read[1]) if rest == len(self.toks) else None

    def by_markers(self, pattern: re.Pattern[str]) -> frozenset[str] | None:
        """Labels after the last marker that is followed by labels ("not choose A" is skipped)."""
        for match in reversed(list(pattern.finditer(self.text))):
            if _NEGATION_BEFORE.search(self.text[max(0, match.start() - 8) : match.start()]):
                continue
            i = self.skip(bisect_left(self.starts, match.end()), _LEAD_CHARS)
            if i < len(self.toks) and self.is_none_word(i):
                return frozenset()
            read = self.read_list(i, any_case=True)
            if read is not None:
                return self.result(read[0], read[1])
        return None

    def leading(self) -> frozenset[str] | None:
        """Labels opening the reply, closed by a mark: "B) because", "A. Paris", "**C** is"."""
        read = self.read_list(self.skip(0, _DECOR), any_case=False)
        if read is None:
            return None
        after = read[2]
        if (
            (space := self.tok(after)) is not None
            and space.kind == "space"
            and "\n" not in space.text
        ):
            after += 1  # "C — the others…": a dash after a space closes it too
            if (dash := self.tok(after)) is None or dash.text not in "-–—":
                after -= 1
        nxt = self.tok(after)
        if nxt is None or "\n" in nxt.text or nxt.text in _LEAD_END or nxt.text in _CLOSERS:
            return self.result(read[0], read[1])
        return None

    def valid_list(self, i: int, any_case: bool) -> tuple[list[str], int] | None:
        """A label list at token i with every label in range (else None: a word, not a pick)."""
        read = self.read_list(i, any_case)
        if read is None or read[1] or not read[0]:
            return None
        return read[0], read[2]

    def by_conclusion(self) -> frozenset[str] | None:
        """Labels right after the last conclusion word: "…, so A.", "Therefore C", "所以选D"."""
        for match in reversed(list(_CONCLUSIONS.finditer(self.text))):
            i = self.skip(bisect_left(self.starts, match.end()), _LEAD_CHARS)
            read = self.valid_list(i, any_case=False)
            if read is None:
                continue
            nxt = self.tok(read[1])
            # "so A." or "so A" at the end, not "so A lot": a word after it is prose.
            if nxt is None or nxt.kind != "alnum" or self.is_separator(read[1]):
                return frozenset(read[0])
        return None

    def back_list(self, j: int) -> list[str]:
        """The labels written just before token j+1, read backwards: "A and C", "选项 C"."""
        labels: list[str] = []
        while j >= 0:
            tok = self.toks[j]
            if tok.kind == "space" or (tok.kind == "char" and tok.text in _DECOR):
                j -= 1
                continue
            read = self.classify(j, any_case=False)
            if read is None or read[1] or self.is_article(j):
                break
            labels = read[0] + labels
            j -= 1
            while j >= 0 and (self.toks[j].kind == "space" or self.toks[j].text in _DECOR):
                j -= 1
            if j >= 0 and self.is_separator(j):
                j -= 1
                continue
            break
        return labels

    def by_affirmation(self) -> frozenset[str] | None:
        """The last option stated to be the right one: "C is correct", "A and C are correct",
        "B is the best choice", "C fits best", "C) right", "选项 C 正确"."""
        for match in reversed(list(_AFFIRMED.finditer(self.text))):
            j = bisect_left(self.starts, match.start()) - 1
            marks = False
            while j >= 0 and (
                self.toks[j].kind == "space" or self.toks[j].text in _DECOR | set(":：)-–—.")
            ):
                marks = marks or self.toks[j].text in set(":：)-–—")
                j -= 1
            if not (match.group("verb") or match.group("fits") or match.group("zh") or marks):
                continue  # a bare "correct" after a label that is not a list mark: prose
            labels = self.back_list(j)
            if labels:
                return frozenset(labels)
        return None

    def by_boxed(self) -> frozenset[str] | None:
        """The last \\boxed{C} (or \\boxed{\\text{C}}) holding only labels."""
        for match in reversed(list(_BOXED.finditer(self.text))):
            inner = _Reader(match.group(1), self.label_type, len(self.labels))
            found = inner.whole_reply()
            if found:
                return found
        return None

    def by_bold(self) -> frozenset[str] | None:
        """The last bold span opening with labels: "**C**", "**(B)**", "**D.** Paris"."""
        for match in reversed(list(_BOLD.finditer(self.text))):
            if _NEGATED_AFTER.match(self.text, match.end()):
                continue
            inner = _Reader(match.group(1), self.label_type, len(self.labels))
            read = inner.valid_list(inner.skip(0, _DECOR), any_case=False)
            if read is None:
                continue
            rest = inner.skip(read[1], _DECOR)
            nxt = inner.tok(rest)
            if nxt is None or nxt.text in _LEAD_END:
                return frozenset(read[0])
        return None

    def scan(self) -> frozenset[str]:
        """Every standalone in-range label in the text that is not negated (the last resort)."""
        found = set()
        for i, tok in enumerate(self.toks):
            if tok.kind != "alnum" or tok.text not in self.valid:
                continue
            if self.glued(i) or self.is_article(i):
                continue
            end = tok.start + len(tok.text)
            before = self.text[max(0, tok.start - 24) : tok.start]
            if _NEGATED_BEFORE.search(before) or _NEGATED_AFTER.match(self.text, end):
                continue
            found.add(tok.text)
        return frozenset(found)


def parse_mcq_choice(text: str, label_type: str, label_count: int) -> frozenset[str]:
    """Which option labels a reply chose (an LLM judge's answer, or a free-text response).

    Read in this order; the first that yields labels wins:
    1. a "none" reply: "N" (when N is not a label), "None", "[]", "无"… → the empty set;
    2. the whole reply is labels: "B", "A, C", "A.", "(B)", "**B**", "A和C", "1, 3"
       (letters in either case here: "b" is B for upper labels);
    3. after the last answer marker that is followed by labels: "Answer: AC", "The answer is (C).",
       "答案是B", "答案：A和C", "correct answers are A and C", "answer is none";
    4. labels opening the reply, closed by punctuation: "B) because…", "A. Paris…";
    5. after the last choice verb: "I choose C", "I'd pick B", "选C" ("not choose" is skipped);
    6. every standalone label in the text that is not negated ("not B", "B is wrong", "B错"):
       "I think A and C are correct, B is wrong" → {A, C}.
    Single letters after a marker may be in either case ("answer: b" is B).
    A capital "A"/"I" (or "a"/"i") followed by an ordinary word is the article or the
    pronoun, not an option: "A good answer is B" → {B}; "A is correct" and "A and C" still
    count. A label beyond `label_count` that the reply explicitly gives as its answer (steps
    2–5) makes the reply unparseable, naming it, rather than being dropped silently; in the
    free-text scan (6) such letters are treated as ordinary text.
    Raises JudgeReplyError("unparseable", ...) for an empty reply or when no label is found.
    """
    reader = _Reader(unicodedata.normalize("NFKC", text or ""), label_type, label_count)
    if not reader.text.strip():
        raise JudgeReplyError(UNPARSEABLE, "The reply is empty.")
    core = re.sub(r"[\s\"'`*_.。!！]+", " ", reader.text).strip().casefold()
    if core in _NONE_WORDS or (core == "n" and reader.canon("N") not in reader.valid):
        return frozenset()
    for step in (
        reader.whole_reply,
        reader.by_boxed,
        lambda: reader.by_markers(_STRONG_MARKERS),
        reader.by_affirmation,
        reader.by_conclusion,
        reader.by_bold,
        reader.leading,
        lambda: reader.by_markers(_MEDIUM_MARKERS),
    ):
        found = step()
        if found is not None:
            return found
    found = reader.scan()
    if found:
        return found
    raise JudgeReplyError(
        UNPARSEABLE,
        f"No option label ({reader.labels[0]}–{reader.labels[-1]}) found in the reply "
        f"({_clip(reader.text)!r}).",
    )


def target_scores_labels(
    scores: dict[str, Any], label_type: str, label_count: int | None = None
) -> list[str]:
    """The labels of UltraEval's target_scores (option → 1 right, 0 wrong), the options labelled
    in the dict's order as its transforms write them ("(A) yes (B) no"). A score other than 0 or
    1, or more options than labels, raises AnswerKeyError naming it."""
    shown = _clip(json.dumps(scores, ensure_ascii=False))
    if len(scores) < 2:
        raise AnswerKeyError(f"target_scores {shown} has fewer than 2 options.")
    count = len(scores) if label_count is None else label_count
    if len(scores) > count:
        raise AnswerKeyError(
            f"target_scores {shown} has {len(scores)} options, more than the judge's {count}."
        )
    try:
        labels = labels_for(label_type, len(scores))
    except ValueError as exc:
        raise AnswerKeyError(f"target_scores {shown}: {exc}") from None
    for option, score in scores.items():
        if isinstance(score, bool) or score not in (0, 1):
            raise AnswerKeyError(
                f"target_scores {shown} gives option {option!r} the score {score!r}: use 1 "
                "for a right option and 0 for a wrong one."
            )
    return [label for label, score in zip(labels, scores.values(), strict=True) if score == 1]


def parse_answer_key(
    value: Any, label_type: str | None = None, label_count: int | None = None
) -> frozenset[str]:
    """An item's answer key as a set of labels: "A,C", "AC", "A C", '["A","C"]', "2", 2, ["A"],
    or UltraEval's target_scores '{"Yes": 1, "No": 0}' (the options in order, the ones scored 1
    correct: here A).

    Without `label_type` the type is inferred (digits, else the letters' case); with it,
    letters are brought to its case. "N", "None" and "[]" mean no option is correct (unless N
    is itself a label). With `label_count`, labels beyond it are an error. Raises
    AnswerKeyError with a message naming the bad key.
    """
    shown = _clip(value)
    if isinstance(value, bool) or value is None:
        raise AnswerKeyError(f"Answer key {shown} is not a set of option labels.")
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, str):
        text = unicodedata.normalize("NFKC", value).strip()
        if not text:
            raise AnswerKeyError("The answer key is empty.")
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError:
                raise AnswerKeyError(f"Answer key {shown!r} is not a valid JSON object.") from None
        elif text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise AnswerKeyError(f"Answer key {shown!r} is not a valid JSON list.") from None
        else:
            value = [p for p in re.split(r"(?:\s*(?:[,;/&+、和与及]|\band\b)\s*|\s+)", text) if p]
    if isinstance(value, dict):
        label_type = label_type or "upper"
        value = target_scores_labels(value, label_type, label_count)
        if not value:
            return frozenset()
    if not isinstance(value, list | tuple | set | frozenset):
        raise AnswerKeyError(f"Answer key {shown} is not a set of option labels.")
    pieces = [str(piece).strip() for piece in value]
    if label_type is None:
        joined = "".join(pieces)
        label_type = "digit" if joined.isdigit() else "lower" if joined.islower() else "upper"
    if label_type not in LABEL_TYPES:
        raise ValueError(f"Label type must be one of {', '.join(LABEL_TYPES)}, not {label_type!r}.")
    valid = set(labels_for(label_type, label_count)) if label_count is not None else None
    folded = [piece.casefold() for piece in pieces]
    if folded == ["none"] or (folded == ["n"] and not (valid and valid & {"N", "n"})):
        return frozenset()
    labels: set[str] = set()
    for piece in pieces:
        if label_type == "digit":
            ok = piece.isdigit() and "0" not in piece
            chars = list(piece)
        else:
            ok = piece.isascii() and piece.isalpha()
            chars = [c.upper() if label_type == "upper" else c.lower() for c in piece]
        if not ok:
            raise AnswerKeyError(f"Answer key {shown!r}: {piece!r} is not an option label.")
        labels.update(chars)
    if valid is not None and not labels <= valid:
        outside = format_labels(labels - valid)
        raise AnswerKeyError(
            f"Answer key {shown!r} has {outside}, outside the labels "
            f"{min(valid, key=lambda x: (len(x), x))}–{max(valid, key=lambda x: (len(x), x))}."
        )
    return frozenset(labels)


# ---- pairwise replies -----------------------------------------------------------------------
VERDICT_KEYS = ("verdict", "winner", "better", "choice", "preference", "preferred", "answer")
_VERDICT_WORDS = {
    "a": "A",
    "b": "B",
    "tie": "tie",
    "c": "tie",  # MT-Bench writes a tie as [[C]]
    "equal": "tie",
    "draw": "tie",
    "both": "tie",
    "neither": "tie",
    "none": "tie",
}
_BRACKETED = re.compile(r"\[\[\s*(A|B|C|tie)\s*\]\]", re.IGNORECASE)
_LABELLED = re.compile(
    r"^\W*(?:final\s+)?(?:verdict|winner|better(?:\s+answer)?|choice|preference)\s*[:=\-]\s*"
    r"\W*(?:answer|response|assistant)?\s*\(?(A|B|tie|equal|draw|neither|both)\b",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class PairwiseResult:
    """One pairwise reply: which answer was better as shown ("A", "B" or "tie"), and why.
    `repaired` says the verdict came from free text rather than a JSON object."""

    verdict: str
    reason: str = ""
    repaired: bool = False


def _verdict_word(value: Any) -> str | None:
    word = as_text(value).strip().strip("[]()'\".").casefold()
    word = word.removeprefix("answer ").removeprefix("response ").removeprefix("assistant ")
    return _VERDICT_WORDS.get(word)


def parse_pairwise_reply(text: str) -> PairwiseResult:
    """Which of two answers a judge preferred, read tolerantly, in this order:

    1. a JSON object (found as for rubric replies) with a verdict key ("verdict", "winner",
       "better", …) whose value is A, B or a tie word (tie, C, equal, draw, both, neither);
    2. MT-Bench's bracketed verdict, the last one in the text: [[A]], [[B]], [[C]] (a tie);
    3. a line "Verdict: A" (or "Winner:", "Better answer:", "Final verdict -", …).
    Anything else is an `unparseable` failure naming what was expected.
    """
    try:
        objects = list(iter_json_objects(text))
    except JudgeReplyError:
        objects = []  # no JSON: the bracketed or labelled verdict may still be there
    for obj in objects:
        for key, value in obj.items():
            if str(key).strip().casefold() in VERDICT_KEYS:
                verdict = _verdict_word(value)
                if verdict is not None:
                    reason = next(
                        (
                            _text_of(v)
                            for k, v in obj.items()
                            if str(k).strip().casefold() in REASON_KEYS
                        ),
                        "",
                    )
                    return PairwiseResult(verdict, reason)
    bracketed = _BRACKETED.findall(text)
    if bracketed:
        verdict = _VERDICT_WORDS[bracketed[-1].casefold()]
        return PairwiseResult(verdict, _BRACKETED.sub("", text).strip(), repaired=True)
    labelled = _LABELLED.findall(text)
    if labelled:
        verdict = _VERDICT_WORDS[labelled[-1].casefold()]
        return PairwiseResult(verdict, text.strip(), repaired=True)
    raise JudgeReplyError(
        UNPARSEABLE,
        'No verdict in the reply: expected JSON with a "verdict" of A, B or tie, or [[A]], '
        f"[[B]] or [[C]] (a tie); got {_clip(text)}.",
    )


__all__ = [
    "MISSING_SUBJECT",
    "OUT_OF_RANGE",
    "REASON_KEYS",
    "UNPARSEABLE",
    "AnswerKeyError",
    "JudgeReplyError",
    "PairwiseResult",
    "RubricResult",
    "Subject",
    "extract_json_object",
    "format_labels",
    "iter_json_objects",
    "labels_for",
    "parse_answer_key",
    "parse_mcq_choice",
    "parse_pairwise_reply",
    "parse_rubric_reply",
    "response_format_for",
    "score_mcq",
    "validate_subjects",
]
