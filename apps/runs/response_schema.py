"""The shape a generation run can ask of each response (Dynabench's `verify_response`).

A run's `response_schema` is {"keys": {name: type, ...}, "answer": name}: every response must be
one JSON object with each key of the given type (string, number, integer, boolean, array,
object, or any), other keys allowed; "answer" (optional) names the key whose value judges score,
as Dynabench's pred_field_converter takes "pred". A response that fails is invalid: its text is
kept, the run's pages say why, and judges fail the item with that reason, so boards count it as
their scoring rule says (strict: the subject's worst value). Pure Python, no Django.
"""

import json
import re
from collections.abc import Mapping
from typing import Any

TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "any": (object,),
}
# A response wrapped in one Markdown code fence (```json … ```), as chat models write JSON.
_FENCE = re.compile(r"\A```[\w-]*\s*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def clean_schema(schema: Any) -> dict[str, Any]:
    """The schema as stored ({} for none), or ValueError naming the problem (for forms)."""
    if not schema:
        return {}
    if not isinstance(schema, Mapping):
        raise ValueError('Give a JSON object: {"keys": {"pred": "string"}, "answer": "pred"}.')
    unknown = sorted(set(schema) - {"keys", "answer"})
    if unknown:
        raise ValueError(f"Unknown entry {', '.join(map(repr, unknown))}: use keys and answer.")
    keys = schema.get("keys")
    if not isinstance(keys, Mapping) or not keys:
        raise ValueError('"keys" must map each required key to its type, e.g. {"pred": "string"}.')
    for name, kind in keys.items():
        if kind not in TYPES:
            raise ValueError(f"Key {name!r} has type {kind!r}; types are {', '.join(TYPES)}.")
    answer = schema.get("answer") or ""
    if answer and answer not in keys:
        raise ValueError(f'"answer" must be one of the keys, not {answer!r}.')
    cleaned: dict[str, Any] = {"keys": dict(keys)}
    if answer:
        cleaned["answer"] = answer
    return cleaned


def describe(schema: Mapping[str, Any]) -> str:
    """The schema in words: 'JSON with pred (string), prob (array); judged: pred'."""
    keys = ", ".join(f"{name} ({kind})" for name, kind in schema.get("keys", {}).items())
    answer = schema.get("answer")
    return f"JSON with {keys}" + (f"; judges score “{answer}”" if answer else "")


def _of_type(value: Any, kind: str) -> bool:
    if kind in ("number", "integer") and isinstance(value, bool):
        return False  # JSON's true is no number
    return isinstance(value, TYPES[kind])


def _type_name(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _of_type(value, name):
            return name
    return "null"


def check(text: str, schema: Mapping[str, Any] | None) -> tuple[str, Any]:
    """("", the parsed object) when `text` meets the schema (or there is none: ("", None));
    else (why, None), e.g. "missing key 'pred'"."""
    if not schema or not schema.get("keys"):
        return "", None
    body = text.strip()
    if fenced := _FENCE.match(body):
        body = fenced["body"].strip()
    try:
        found = json.loads(body)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at character {exc.pos})", None
    if not isinstance(found, dict):
        return f"not a JSON object but {_type_name(found)}", None
    missing = [name for name in schema["keys"] if name not in found]
    if missing:
        return f"missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}", None
    for name, kind in schema["keys"].items():
        if not _of_type(found[name], kind):
            return f"key {name!r} must be {kind}, not {_type_name(found[name])}", None
    return "", found


def judged_text(text: str, schema: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """What judges score of a response: (text, "") — the answer key's value when the schema
    names one, else the whole response — or (None, why it is invalid)."""
    problem, found = check(text, schema)
    if problem:
        return (
            None,
            f"The response is invalid: {problem} (the run asks for {describe(schema or {})}).",
        )
    answer = (schema or {}).get("answer")
    if found is None or not answer:
        return text, ""
    value = found[answer]
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)), ""
