"""Keeping API keys out of every string that leaves the LLM client (replies and errors)."""

import os
import re

from django.conf import settings

from apps.runs.models import Endpoint

NO_KEY = "no-key-configured"


# ---- keeping the key out of every string ----------------------------------------------------------
SCRUBBED = "[api key]"
KEY_CHAR = r"[A-Za-z0-9_\-]"  # what API keys are made of (ASCII: CJK text is no key)
# Below this a key is too short to tell from ordinary words: only an echoed header shows it.
SHORT_KEY = 4
# From this length a key is replaced wherever it stands, and any run of this many of its
# characters (a key cut short by a length limit, or split at a separator) goes too.
FRAGMENT = 8
# A masked key: stars, bullets, three dots or an ellipsis between a start and an end of it (of
# which OpenAI shows 8 and 4 characters).
MASK = re.compile(r"[*•…]+(?:\.{3}[*•…]*)*|\.{3}[*•…]*")
KEY_CHARS = re.compile(f"{KEY_CHAR}*")


def _key_chars_at(text: str, position: int) -> str:
    """The run of key characters starting at `position` (maybe empty: `*` always matches)."""
    match = KEY_CHARS.match(text, position)
    return match.group() if match else ""


KEY_RUN = re.compile(f"{KEY_CHAR}{{{FRAGMENT},}}")
# Error text only: a model's reply may well explain "Authorization: Bearer YOUR_KEY".
BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s\"'`,;<>\\]+")


def known_keys(endpoint: Endpoint) -> list[str]:
    """Every key this process might send to the endpoint: its stored key, its environment
    variable and the OpenAI default, whichever `Endpoint.api_key` picks today."""
    return [
        endpoint.api_key_secret,
        os.environ.get(endpoint.api_key_env or "OPENAI_API_KEY", ""),
        os.environ.get("OPENAI_API_KEY", ""),
        settings.OPENAI_API_KEY or "",
    ]


class Scrubber:
    """Replaces API keys, whole or in recognisable pieces, with "[api key]".

    `scrub(text)` is for what a model answered, on every reply: our keys whole, at the cost of
    a substring search per key. `scrub.error(text)` is for error text, where a server quotes
    what it was sent: also a key masked around stars or dots (OpenAI's 401), any run of
    `FRAGMENT` characters of a key (cut off by a length limit), and any echoed bearer
    credential, ours or not. A reply may well say "Authorization: Bearer YOUR_KEY" or use a
    word that is part of a key: that is the model's answer, kept as it is.
    """

    def __init__(self, keys: list[str] | tuple[str, ...]) -> None:
        usable = {k for k in keys if len(k) >= SHORT_KEY and k != NO_KEY}
        # Longer keys first, so that no key replaces the middle of another.
        self.keys = sorted(usable, key=len, reverse=True)
        self.long = [k for k in self.keys if len(k) >= FRAGMENT]
        bounded = [re.escape(k) for k in self.keys if len(k) < FRAGMENT]
        # A short key goes only where it stands alone: "abcd" in "abcdef" is no key.
        self.short = (
            re.compile(rf"(?<!{KEY_CHAR})(?:{'|'.join(bounded)})(?!{KEY_CHAR})")
            if bounded
            else None
        )

    def __call__(self, text: str) -> str:
        if not self.keys or not text:
            return text
        for key in self.long:
            if key in text:
                text = text.replace(key, SCRUBBED)
        if self.short is not None:
            text = self.short.sub(SCRUBBED, text)
        return text

    def error(self, text: str) -> str:
        text = self(BEARER.sub(rf"\1 {SCRUBBED}", text))
        if not self.keys or not text:
            return text
        if "*" in text or "..." in text or "…" in text or "•" in text:
            text = self._masks(text)
        return KEY_RUN.sub(self._fragment, text) if self.long else text

    def _masks(self, text: str) -> str:
        """Each mask with a start of one of our keys before it and/or an end of it after it,
        at least `SHORT_KEY` characters in all ("ab***" may be anything), goes whole."""
        out, done, backwards = [], 0, text[::-1]
        for mask in MASK.finditer(text):
            start, end = mask.span()
            head = _key_chars_at(backwards, len(text) - start)[::-1]
            tail = _key_chars_at(text, end)
            if start - len(head) < done or len(head) + len(tail) < SHORT_KEY:
                continue
            if any(k.startswith(head) and k.endswith(tail) for k in self.keys):
                out += [text[done : start - len(head)], SCRUBBED]
                done = end + len(tail)
        return "".join(out) + text[done:] if out else text

    def _fragment(self, match: re.Match[str]) -> str:
        run = match.group()
        return SCRUBBED if any(run in key for key in self.long) else run
