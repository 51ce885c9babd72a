"""A loopback OpenAI-compatible chat-completions server for tests and benchmarks.

It answers `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models` and the Batch
API (`/v1/files`, `/v1/batches`: tests/llm_batches.py) like the real API, and misbehaves on
demand: latency, HTTP errors with Retry-After, non-JSON bodies, hangs, "fail the first N",
replies scripted per prompt, error bodies that quote the caller's API key back, and
requests-/tokens-per-minute limits with OpenAI's `x-ratelimit-*` headers (`rpm`, `tpm`: see
RateWindow). Everything
it received is counted and logged so tests can assert what the application sent and how many
requests were in flight at once.

Two ways to run it:

    with LLMServer() as server:              # in a background thread of this process
        server.configure(latency=0.1, script={"capital of France": "Paris"})
        ... AsyncOpenAI(base_url=server.base_url, api_key="k") ...
        server.stats()["peak_concurrency"]

    with LLMServer.spawn() as server:        # in a subprocess: no GIL shared with the client
        ...same API, spoken over the control endpoints...

Other processes (RQ workers) reach the same server through `base_url`, and can reconfigure it
through the control API: `POST /_control/config` (JSON knobs, merged), `GET /_control/config`,
`GET /_control/stats[?log=0|&last=N]`, `POST /_control/reset`.

The completions endpoint (legacy OpenAI / vLLM shape) serves prompt log-probabilities with
`echo` + `logprobs`, scriptable so tests can compute expected values by hand: a token is a
whitespace-delimited word with the whitespace before it (" Mars"; `text_offset` is where it
starts), its log-probability is `word_logprobs[word]` when the word is listed, else
-(1 + 0.25 × len(word)); the first token of a prompt has none (null), as in the real API.
`completions` makes it a chat-only server ("absent": 404) or one with the llama.cpp bug of
reporting every log-probability as 0 ("zero") or none at all ("null"); `text_offset_shift`
moves the offsets away from the tokens' text. `llama_cpp` behaves like llama-cpp-python's
server, quirk for quirk (see DEFAULTS; bench/bench_llama_cpp.py checks them against the real
one).

Run by hand: `python -m tests.llm_server --port 8999`. Never imports Django.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import random
import re
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from tests import llm_batches

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PORT_LINE = "LLM_SERVER_PORT="

DEFAULTS: dict[str, Any] = {
    # Seconds every answer waits before it is sent (asyncio.sleep, so requests overlap).
    "latency": 0.0,
    # Extra seconds drawn uniformly from [0, latency_jitter] per request.
    "latency_jitter": 0.0,
    # {status: probability}, e.g. {"429": 0.1, "500": 0.05}; statuses 400-599.
    "error_rate": {},
    # Seconds sent as Retry-After (and retry-after-ms) on 429 and 503; None sends no header.
    "retry_after": 0.1,
    # Probability of a 200 whose body is not JSON.
    "garbage_rate": 0.0,
    "garbage_body": "<html><body><h1>502 Bad Gateway</h1></body></html>",
    "garbage_content_type": "application/json",
    # Probability of a hang: the answer comes only after hang_seconds (longer than any client
    # timeout by default; when the client gives up, the request is logged with status None).
    "timeout_rate": 0.0,
    "hang_seconds": 300.0,
    # The next N chat requests (counted from when this knob is set) get fail_first_status.
    "fail_first_n": 0,
    "fail_first_status": 500,
    # Rules tried in order against each request; see Rule. A dict {substring: reply-or-rule}
    # is accepted as shorthand.
    "script": [],
    # Reply when no script rule answers; {last_user}, {model}, {n} and {seed} are substituted.
    "default_reply": "echo: {last_user}",
    "finish_reason": "stop",
    # Seeds the random draws (faults and jitter) so a run is repeatable; set again to restart.
    "seed": 0,
    "models": ["test-model"],
    # When set, requests whose bearer token differs get 401.
    "require_key": None,
    # Like a careless provider or gateway: 401 and 500 bodies quote the request's Authorization
    # header, the key in it, and the key masked the way OpenAI's own 401 shows it.
    "echo_auth": False,
    # How many recent chat requests stats()["log"] keeps.
    "log_size": 1000,
    # POST /v1/completions: "logprobs" (served, with log-probabilities), "absent" (404, a
    # chat-only server), "zero" (every log-probability 0.0) or "null" (logprobs: null).
    "completions": "logprobs",
    # {word: log-probability} for completion tokens; other words get -(1 + 0.25 * len(word)).
    "word_logprobs": {},
    # Behave like llama-cpp-python's server (bench/bench_llama_cpp.py checks these against the
    # real one): true for all of its quirks, or a list of some of LLAMA_CPP_QUIRKS.
    "llama_cpp": False,
    # Characters added to every echoed text_offset after the first (a server whose offsets
    # point elsewhere than its tokens' text).
    "text_offset_shift": 0,
    # Requests / tokens per minute, enforced over a sliding 60 s window (see RateWindow); None
    # is no limit, and then no x-ratelimit-* header is sent either.
    "rpm": None,
    "tpm": None,
    # The window's length in seconds: `rpm` / `tpm` are then per this many seconds (a short
    # window shows in seconds what a minute's limit does in minutes).
    "rate_window": 60.0,
    # False: the limits are enforced without a word of them (no x-ratelimit-* header; a 429
    # still says retry-after), as some gateways and self-hosted servers do.
    "rate_headers": True,
}
COMPLETIONS_MODES = ("logprobs", "absent", "zero", "null")
LLAMA_CPP_QUIRKS = {
    # A completions prompt that is a list of more than one: 500 with an empty message.
    "lists": "a list of prompts answers 500",
    # Every echoed text_offset after the first one character late, the first token showing a
    # space the text lacks (its tokenizer's space prefix, counted in the offsets).
    "offsets": "offsets one late",
    # max_tokens 0: no limit (up to the end of its context).
    "max_tokens": "max_tokens 0 means no limit",
    # A chat response_format of type json_schema: 500 quoting a validation error (it knows
    # "text" and "json_object", the latter with an optional "schema").
    "json_schema": "json_schema refused",
}
ACTIONS = ("reply", "status", "garbage", "hang")
RULE_KEYS = {"match", "regex", "scope", "model", "times", "latency", "retry_after", "finish_reason"}
ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
}


class ConfigError(ValueError):
    """A knob or script rule that the server cannot use; the message names it."""


@dataclass
class Rule:
    """One script rule: when it matches, it answers with exactly one action.

    match/regex: substring / re.search pattern tested against the last user message
    (scope="last_user", default) or against every message's content (scope="any"); neither
    matches every request. model: only requests for this model. times: the rule answers only
    its first K matches, then later rules (or the default) take over, so
    [{"match": "item 3", "status": 500, "times": 2}] makes item 3 fail twice then succeed.
    Actions: reply (text, same placeholders as default_reply), status (an HTTP error), garbage
    (true), hang (true). latency overrides the configured latency for the request;
    retry_after and finish_reason override theirs. A scripted reply can still be hit by the
    random error/garbage/timeout rates; a scripted fault always happens.
    """

    action: str
    value: Any
    match: str | None = None
    regex: re.Pattern[str] | None = None
    scope: str = "last_user"
    model: str | None = None
    times: int | None = None
    used: int = 0
    latency: float | None = None
    retry_after: float | None = None
    finish_reason: str | None = None

    @classmethod
    def parse(cls, raw: Any, where: str) -> Rule:
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: a rule must be an object, got {type(raw).__name__}")
        unknown = set(raw) - RULE_KEYS - set(ACTIONS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
        actions = [a for a in ACTIONS if a in raw]
        if len(actions) != 1:
            raise ConfigError(f"{where}: give exactly one of {list(ACTIONS)}, got {actions}")
        action = actions[0]
        value = raw[action]
        if action == "reply" and not isinstance(value, str):
            raise ConfigError(f"{where}: reply must be a string")
        if action == "status" and not (isinstance(value, int) and 400 <= value <= 599):
            raise ConfigError(f"{where}: status must be an int 400-599, got {value!r}")
        if action in ("garbage", "hang") and value is not True:
            raise ConfigError(f"{where}: {action} must be true")
        if "match" in raw and "regex" in raw:
            raise ConfigError(f"{where}: give match or regex, not both")
        scope = raw.get("scope", "last_user")
        if scope not in ("last_user", "any"):
            raise ConfigError(f"{where}: scope must be 'last_user' or 'any', got {scope!r}")
        times = raw.get("times")
        if times is not None and not (isinstance(times, int) and times >= 0):
            raise ConfigError(f"{where}: times must be a non-negative int")
        try:
            regex = re.compile(raw["regex"], re.S) if "regex" in raw else None
        except re.error as exc:
            raise ConfigError(f"{where}: bad regex: {exc}") from None
        return cls(
            action=action,
            value=value,
            match=raw.get("match"),
            regex=regex,
            scope=scope,
            model=raw.get("model"),
            times=times,
            latency=_opt_float(raw.get("latency"), f"{where}.latency"),
            retry_after=_opt_float(raw.get("retry_after"), f"{where}.retry_after"),
            finish_reason=raw.get("finish_reason"),
        )

    def matches(self, model: str, last_user: str, all_text: str) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.model is not None and model != self.model:
            return False
        text = last_user if self.scope == "last_user" else all_text
        if self.match is not None:
            return self.match in text
        if self.regex is not None:
            return self.regex.search(text) is not None
        return True

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {self.action: self.value, "scope": self.scope, "used": self.used}
        if self.match is not None:
            out["match"] = self.match
        if self.regex is not None:
            out["regex"] = self.regex.pattern
        for key in ("model", "times", "latency", "retry_after", "finish_reason"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def _opt_float(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


def _parse_script(raw: Any) -> list[Rule]:
    if isinstance(raw, dict):
        rules = []
        for key, value in raw.items():
            body = {"reply": value} if isinstance(value, str) else value
            if not isinstance(body, dict):
                raise ConfigError(f"script[{key!r}]: value must be a reply string or a rule")
            rules.append(Rule.parse({"match": key, **body}, f"script[{key!r}]"))
        return rules
    if isinstance(raw, list):
        return [Rule.parse(item, f"script[{i}]") for i, item in enumerate(raw)]
    raise ConfigError("script must be a list of rules or a {substring: reply} object")


def _text(content: Any) -> str:
    """The text of a message's content, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _last_user(messages: list[dict[str, Any]]) -> str:
    return next(
        (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )


def _words(text: str) -> int:
    return len(text.split())


def _max_tokens(body: dict[str, Any]) -> int | None:
    """The completion tokens a request reserves (max_completion_tokens, else max_tokens)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _render(template: str, last_user: str, model: str, n: int) -> str:
    # Plain replace, not str.format: scripted replies are often JSON full of braces.
    return (
        template.replace("{last_user}", last_user).replace("{model}", model).replace("{n}", str(n))
    )


RATE_WINDOW = 60.0  # seconds


def go_duration(seconds: float) -> str:
    """A duration the way OpenAI writes x-ratelimit-reset-* (Go's time.Duration): "20ms",
    "1.5s", "6m0s", "1h2m3s"."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:.3f}".rstrip("0").rstrip(".") + "ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


class RateWindow:
    """The `rpm` / `tpm` knobs: what the last 60 s admitted, as a log of [time, tokens].

    A sliding window, stricter than OpenAI's own limiter (a bucket that refills continuously
    and may hold a whole minute): here no 60-second span ever holds more than the limits, so a
    client that keeps to this server keeps to OpenAI. Tokens are counted like OpenAI counts
    them at request time: the prompt (in this server's tokens, the words of every message,
    as its usage reports them) plus max_tokens (or max_completion_tokens), reserved whatever
    the reply uses; a request without either has its completion's words added when it is
    answered. A refused request (429) is not counted.

    Headers on every reply, as OpenAI sends them: x-ratelimit-limit-{requests,tokens},
    x-ratelimit-remaining-* (after this request) and x-ratelimit-reset-* (Go durations: the
    time until all that is counted now has left the window, OpenAI's "resets to its initial
    state"); a 429 also gets retry-after / retry-after-ms, the time until this request fits.
    """

    def __init__(self) -> None:
        self.log: deque[list[float]] = deque()
        self.tokens = 0.0
        self.limited = 0
        self.admitted = 0
        self.admitted_tokens = 0.0
        self.first: float | None = None
        self.last: float | None = None

    window = RATE_WINDOW

    def _expire(self, now: float) -> None:
        while self.log and self.log[0][0] <= now - self.window:
            self.tokens -= self.log.popleft()[1]

    def _fits_at(self, now: float, rpm: int | None, tpm: int | None, cost: int) -> float:
        """Seconds from now until a request of `cost` tokens fits the window."""
        at = now
        if rpm is not None and len(self.log) + 1 > rpm:
            at = max(at, self.log[len(self.log) - rpm][0] + self.window)
        if tpm is not None and self.tokens + cost > tpm:
            used = self.tokens
            for when, tokens in self.log:
                used -= tokens
                if used + cost <= tpm:
                    at = max(at, when + self.window)
                    break
            else:
                at = max(at, (self.log[-1][0] if self.log else now) + self.window)
        return at - now

    def admit(
        self, now: float, rpm: int | None, tpm: int | None, cost: int
    ) -> tuple[list[float] | None, dict[str, str], float | None]:
        """(the log entry, headers, None) for an admitted request, or (None, headers, retry
        after) for a refused one."""
        self._expire(now)
        wait = self._fits_at(now, rpm, tpm, cost)
        entry = None
        if wait <= 0:
            entry = [now, float(cost)]
            self.log.append(entry)
            self.tokens += cost
            self.admitted += 1
            self.admitted_tokens += cost
            self.first = now if self.first is None else self.first
            self.last = now
        else:
            self.limited += 1
        reset = (self.log[-1][0] + self.window - now) if self.log else 0.0
        headers: dict[str, str] = {}
        for kind, limit, used in (("requests", rpm, len(self.log)), ("tokens", tpm, self.tokens)):
            if limit is not None:
                headers[f"x-ratelimit-limit-{kind}"] = str(limit)
                headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(limit - used)))
                headers[f"x-ratelimit-reset-{kind}"] = go_duration(reset)
        return entry, headers, (wait if entry is None else None)

    def add_completion(self, entry: list[float], tokens: int) -> None:
        entry[1] += tokens
        if self.log and entry[0] >= self.log[0][0]:
            self.tokens += tokens
        self.admitted_tokens += tokens

    def stats(self) -> dict[str, Any]:
        return {
            "limited": self.limited,
            "admitted": self.admitted,
            "admitted_tokens": int(self.admitted_tokens),
            "first": self.first,
            "last": self.last,
            "window_requests": len(self.log),
            "window_tokens": int(self.tokens),
        }


@dataclass
class Decision:
    outcome: str  # reply | error | garbage | hang | bad_request | format_refused
    status: int
    delay: float
    text: str = ""
    retry_after: float | None = None
    finish_reason: str = "stop"
    # x-ratelimit-* headers (only with the rpm/tpm knobs), and the request's entry in the
    # rate window when its completion is still to be counted.
    headers: dict[str, str] | None = None
    rate_entry: list[float] | None = None


class State:
    """Configuration, counters and request log, shared by the handlers and the controller."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    # ---- configuration ------------------------------------------------------------------
    def reset(self) -> None:
        with self.lock:
            self.config: dict[str, Any] = copy.deepcopy(DEFAULTS)
            self.rules: list[Rule] = []
            self.error_rate: list[tuple[int, float]] = []
            self.fail_first_left = 0
            self._seed(0)
            self._clear_stats()

    def reset_stats(self) -> None:
        with self.lock:
            self._clear_stats()

    def _clear_stats(self) -> None:
        # Requests that arrived before a reset belong to an older generation: when they end
        # they must not touch the fresh counters (in-flight would go negative).
        self.generation = getattr(self, "generation", 0) + 1
        self.requests = 0
        self.models_requests = 0
        self.in_flight = 0
        self.peak = 0
        self.by_status: dict[str, int] = {}
        self.by_outcome: dict[str, int] = {}
        self.log: deque[dict[str, Any]] = deque(maxlen=self.config["log_size"])
        self.rate = RateWindow()

    def _seed(self, seed: Any) -> None:
        self.fault_rng = random.Random(f"faults-{seed}")
        self.jitter_rng = random.Random(f"jitter-{seed}")

    def configure(self, knobs: dict[str, Any]) -> dict[str, Any]:
        """Merge knobs into the configuration; all or nothing (ConfigError names the bad one)."""
        unknown = set(knobs) - set(DEFAULTS)
        if unknown:
            raise ConfigError(f"unknown knob(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        new: dict[str, Any] = {}
        if "rate_window" in knobs:
            window = knobs["rate_window"]
            if not isinstance(window, int | float) or isinstance(window, bool) or window <= 0:
                raise ConfigError(f"rate_window must be a positive number, got {window!r}")
            new["rate_window"] = float(window)
        for name in ("latency", "latency_jitter", "hang_seconds"):
            if name in knobs:
                new[name] = _opt_float(knobs[name], name) or 0.0
        if "retry_after" in knobs:
            new["retry_after"] = _opt_float(knobs["retry_after"], "retry_after")
        for name in ("garbage_rate", "timeout_rate"):
            if name in knobs:
                rate = _opt_float(knobs[name], name) or 0.0
                if rate > 1:
                    raise ConfigError(f"{name} must be between 0 and 1, got {rate}")
                new[name] = rate
        error_rate = None
        if "error_rate" in knobs:
            error_rate = self._parse_error_rate(knobs["error_rate"])
            new["error_rate"] = {str(s): p for s, p in error_rate}
        for name in ("fail_first_n", "log_size"):
            if name in knobs:
                value = knobs[name]
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ConfigError(f"{name} must be a non-negative int, got {value!r}")
                new[name] = value
        if "text_offset_shift" in knobs:
            value = knobs["text_offset_shift"]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"text_offset_shift must be an int, got {value!r}")
            new["text_offset_shift"] = value
        for name in ("rpm", "tpm"):
            if name in knobs:
                value = knobs[name]
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 1
                ):
                    raise ConfigError(f"{name} must be a positive int or null, got {value!r}")
                new[name] = value
        if "fail_first_status" in knobs:
            status = knobs["fail_first_status"]
            if not (isinstance(status, int) and 400 <= status <= 599):
                raise ConfigError(f"fail_first_status must be an int 400-599, got {status!r}")
            new["fail_first_status"] = status
        for name in ("default_reply", "finish_reason", "garbage_body", "garbage_content_type"):
            if name in knobs:
                if not isinstance(knobs[name], str):
                    raise ConfigError(f"{name} must be a string")
                new[name] = knobs[name]
        if "rate_headers" in knobs:
            if not isinstance(knobs["rate_headers"], bool):
                raise ConfigError(f"rate_headers must be a bool, got {knobs['rate_headers']!r}")
            new["rate_headers"] = knobs["rate_headers"]
        if "echo_auth" in knobs:
            if not isinstance(knobs["echo_auth"], bool):
                raise ConfigError("echo_auth must be true or false")
            new["echo_auth"] = knobs["echo_auth"]
        if "llama_cpp" in knobs:
            quirks = knobs["llama_cpp"]
            if isinstance(quirks, bool):
                quirks = sorted(LLAMA_CPP_QUIRKS) if quirks else []
            if not isinstance(quirks, list) or not set(quirks) <= set(LLAMA_CPP_QUIRKS):
                raise ConfigError(f"llama_cpp must be a bool or a list of {list(LLAMA_CPP_QUIRKS)}")
            new["llama_cpp"] = quirks
        if "require_key" in knobs:
            if knobs["require_key"] is not None and not isinstance(knobs["require_key"], str):
                raise ConfigError("require_key must be a string or null")
            new["require_key"] = knobs["require_key"]
        if "completions" in knobs:
            if knobs["completions"] not in COMPLETIONS_MODES:
                raise ConfigError(
                    f"completions must be one of {list(COMPLETIONS_MODES)}, "
                    f"got {knobs['completions']!r}"
                )
            new["completions"] = knobs["completions"]
        if "word_logprobs" in knobs:
            table = knobs["word_logprobs"]
            if not isinstance(table, dict) or not all(
                isinstance(k, str)
                and isinstance(v, int | float)
                and not isinstance(v, bool)
                and v <= 0
                for k, v in table.items()
            ):
                raise ConfigError("word_logprobs must map words to log-probabilities <= 0")
            new["word_logprobs"] = {k: float(v) for k, v in table.items()}
        if "models" in knobs:
            models = knobs["models"]
            if not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
                raise ConfigError("models must be a list of strings")
            new["models"] = list(models)
        rules = _parse_script(knobs["script"]) if "script" in knobs else None
        if "seed" in knobs:
            new["seed"] = knobs["seed"]

        with self.lock:
            merged = {**self.config, **new}
            total = (
                merged["timeout_rate"]
                + merged["garbage_rate"]
                + sum(float(p) for p in merged["error_rate"].values())
            )
            if total > 1 + 1e-9:
                raise ConfigError(f"timeout_rate + garbage_rate + error rates = {total:.3f} > 1")
            self.config = merged
            if error_rate is not None:
                self.error_rate = error_rate
            if rules is not None:
                self.rules = rules
            if "fail_first_n" in new:
                self.fail_first_left = new["fail_first_n"]
            if "seed" in new:
                self._seed(new["seed"])
            if "log_size" in new:
                self.log = deque(self.log, maxlen=new["log_size"])
            return self._describe_config()

    @staticmethod
    def _parse_error_rate(raw: Any) -> list[tuple[int, float]]:
        if not isinstance(raw, dict):
            raise ConfigError('error_rate must be an object like {"429": 0.1, "500": 0.05}')
        out = []
        for key, prob in raw.items():
            try:
                status = int(key)
            except (TypeError, ValueError):
                raise ConfigError(f"error_rate: {key!r} is not an HTTP status") from None
            if not 400 <= status <= 599:
                raise ConfigError(f"error_rate: status {status} is not 400-599")
            rate = _opt_float(prob, f"error_rate[{key}]") or 0.0
            if rate > 1:
                raise ConfigError(f"error_rate[{key}] must be between 0 and 1")
            out.append((status, rate))
        return sorted(out)

    def describe_config(self) -> dict[str, Any]:
        with self.lock:
            return self._describe_config()

    def _describe_config(self) -> dict[str, Any]:
        out = copy.deepcopy(self.config)
        out["script"] = [rule.describe() for rule in self.rules]
        out["fail_first_left"] = self.fail_first_left
        return out

    def stats(self, log: bool = True, last: int | None = None) -> dict[str, Any]:
        with self.lock:
            entries = list(self.log) if log else []
            if last is not None:
                entries = entries[-last:] if last else []
            out = {
                "requests": self.requests,
                "in_flight": self.in_flight,
                "peak_concurrency": self.peak,
                "by_status": dict(self.by_status),
                "by_outcome": dict(self.by_outcome),
                "models_requests": self.models_requests,
                "rate_limited": self.rate.limited,
                "rate": self.rate.stats(),
                "log": entries,
            }
            # A JSON round trip gives callers a private copy shaped exactly like the control
            # API's answer, whichever mode the server runs in.
            return json.loads(json.dumps(out))

    # ---- per request --------------------------------------------------------------------
    def arrive(self) -> tuple[int, int]:
        """Count a chat request in; returns (request number, generation)."""
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return self.requests, self.generation

    def record(self, entry: dict[str, Any], generation: int) -> None:
        with self.lock:
            if generation == self.generation:
                self.log.append(entry)

    def finish(
        self, entry: dict[str, Any], generation: int, status: int | None, outcome: str
    ) -> None:
        """Count the answer just before it is written, so a client that has it sees it counted."""
        key = str(status) if status is not None else "closed"
        with self.lock:
            entry["status"] = status
            entry["outcome"] = outcome
            entry["end"] = time.time()
            if generation == self.generation:
                self.by_status[key] = self.by_status.get(key, 0) + 1
                self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + 1

    def count_completion(self, rate_entry: list[float], generation: int, tokens: int) -> None:
        """A request without max_tokens: its completion counts against `tpm` once answered."""
        with self.lock:
            if generation == self.generation:
                self.rate.add_completion(rate_entry, tokens)

    def depart(self, generation: int) -> None:
        """The last byte is written (or the client hung up): the request is no longer in flight."""
        with self.lock:
            if generation == self.generation:
                self.in_flight -= 1

    def decide(
        self, entry: dict[str, Any], generation: int, body: dict[str, Any], key: str | None
    ) -> Decision:
        messages = body["messages"]
        with self.lock:
            if generation == self.generation:
                self.log.append(entry)
            cfg = self.config
            draw = self.fault_rng.random()  # one draw per request keeps a seeded run repeatable
            delay = cfg["latency"]
            if cfg["latency_jitter"]:
                delay += self.jitter_rng.uniform(0, cfg["latency_jitter"])
            retry_after = cfg["retry_after"]
            finish_reason = cfg["finish_reason"]

            if cfg["require_key"] is not None and key != cfg["require_key"]:
                return Decision("error", 401, delay)
            headers = None
            rate_entry = None
            if cfg["rpm"] is not None or cfg["tpm"] is not None:
                reserved = _max_tokens(body)
                cost = sum(_words(_text(m.get("content"))) for m in messages) + (reserved or 0)
                self.rate.window = cfg["rate_window"]
                admitted, headers, wait = self.rate.admit(time.time(), cfg["rpm"], cfg["tpm"], cost)
                if not cfg["rate_headers"]:
                    headers = {}
                entry["rate_tokens"] = cost
                if admitted is None:
                    # Refused at once, as OpenAI does: no model time spent.
                    return Decision("rate_limited", 429, 0.0, retry_after=wait, headers=headers)
                rate_entry = admitted if reserved is None else None
            decision = self._decide(entry, body, cfg, draw, delay, retry_after, finish_reason)
            decision.headers = headers
            decision.rate_entry = rate_entry
            return decision

    def _decide(
        self,
        entry: dict[str, Any],
        body: dict[str, Any],
        cfg: dict[str, Any],
        draw: float,
        delay: float,
        retry_after: float | None,
        finish_reason: str,
    ) -> Decision:
        """The rest of `decide`, under the lock."""
        model = body["model"]
        messages = body["messages"]
        last_user = _last_user(messages)
        n = entry["n"]
        if self.fail_first_left > 0:
            self.fail_first_left -= 1
            return Decision("error", cfg["fail_first_status"], delay, retry_after=retry_after)

        rule = None
        if self.rules:
            all_text = "\n".join(_text(m.get("content")) for m in messages)
            rule = next((r for r in self.rules if r.matches(model, last_user, all_text)), None)
        template = cfg["default_reply"]
        if rule is not None:
            rule.used += 1
            if rule.latency is not None:
                delay = rule.latency
            if rule.retry_after is not None:
                retry_after = rule.retry_after
            if rule.finish_reason is not None:
                finish_reason = rule.finish_reason
            if rule.action == "status":
                return Decision("error", rule.value, delay, retry_after=retry_after)
            if rule.action == "garbage":
                return Decision("garbage", 200, delay)
            if rule.action == "hang":
                return Decision("hang", 200, delay + cfg["hang_seconds"])
            template = rule.value

        threshold = cfg["timeout_rate"]
        if draw < threshold:
            return Decision("hang", 200, delay + cfg["hang_seconds"])
        threshold += cfg["garbage_rate"]
        if draw < threshold:
            return Decision("garbage", 200, delay)
        for status, rate in self.error_rate:
            threshold += rate
            if draw < threshold:
                return Decision("error", status, delay, retry_after=retry_after)
        text = _render(template, last_user, model, n)
        return Decision("reply", 200, delay, text=text, finish_reason=finish_reason)


# ---- HTTP -------------------------------------------------------------------------------
def _error_response(status: int, message: str, retry_after: float | None = None) -> web.Response:
    err_type, code = ERROR_TYPES.get(status, ("server_error", None))
    body = {"error": {"message": message, "type": err_type, "param": None, "code": code}}
    headers = {}
    if retry_after is not None and status in (429, 503):
        headers["Retry-After"] = f"{retry_after:g}"
        headers["retry-after-ms"] = str(math.ceil(retry_after * 1000))
    return web.json_response(body, status=status, headers=headers)


def masked_key(key: str) -> str:
    """A key the way OpenAI's 401 quotes it: its start, stars, its end."""
    return f"{key[:6]}{'*' * 12}...{key[-4:]}" if len(key) > 10 else "***"


def _echo_auth(message: str, status: int, authorization: str) -> str:
    """What a careless provider says: the header as received, the key, and a masked key."""
    key = authorization.partition(" ")[2].strip() or authorization
    if status == 401:
        return (
            f"Incorrect API key provided: {masked_key(key)}. You sent {key!r} "
            f"(headers: {{'authorization': '{authorization}'}})."
        )
    return f"{message} Request: POST /v1/chat/completions authorization={authorization} key={key}"


def _bearer(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def build_app(state: State) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        n, generation = state.arrive()
        key = _bearer(request)
        retry_count = request.headers.get("x-stainless-retry-count")
        entry: dict[str, Any] = {
            "n": n,
            "time": time.time(),
            "end": None,
            "model": None,
            "messages": None,
            "params": {},
            "had_key": key is not None,
            # Never keep a key whole: the last 4 characters of a long key are enough to tell
            # which endpoint's key was used.
            "key_last4": key[-4:] if key and len(key) >= 8 else None,
            "retry_count": int(retry_count) if retry_count and retry_count.isdigit() else None,
            "status": None,
            "outcome": None,
            "reply": None,
        }
        outcome = "bad_request"
        finished = False
        try:
            body, problem = _parse_body(await request.read())
            with state.lock:
                quirks = set(state.config["llama_cpp"] or ())
            if body is not None:
                entry["model"] = body["model"]
                entry["messages"] = body["messages"]
                entry["params"] = {k: v for k, v in body.items() if k not in ("model", "messages")}
            refusal = _llama_cpp_format_refusal(body) if body and "json_schema" in quirks else ""
            if refusal:
                state.record(entry, generation)
                decision = Decision("format_refused", 500, 0.0, text=refusal)
            elif body is not None:
                decision = state.decide(entry, generation, body, key)
            else:
                state.record(entry, generation)
                decision = Decision("bad_request", 400, 0.0, text=problem)
            outcome = decision.outcome
            if decision.delay:
                await asyncio.sleep(decision.delay)
            authorization = request.headers.get("Authorization", "")
            if decision.outcome == "format_refused":
                response = _llama_cpp_error(500, decision.text, "internal_server_error")
            else:
                response = _respond(decision, body, n, entry, state, authorization)
            if decision.headers:
                response.headers.update(decision.headers)
            if decision.rate_entry is not None and entry["reply"] is not None:
                state.count_completion(decision.rate_entry, generation, _words(entry["reply"]))
            state.finish(entry, generation, response.status, outcome)
            finished = True
            await response.prepare(request)
            await response.write_eof()
            return response
        finally:
            # Also runs when the client hung up and aiohttp cancelled us (status None); in
            # flight spans arrival to the last byte written.
            if not finished:
                state.finish(entry, generation, None, outcome)
            state.depart(generation)

    async def completions(request: web.Request) -> web.StreamResponse:
        """The legacy completions API, with prompt log-probabilities (echo + logprobs)."""
        n, generation = state.arrive()
        key = _bearer(request)
        entry: dict[str, Any] = {
            "n": n,
            "time": time.time(),
            "end": None,
            "api": "completions",
            "model": None,
            "prompt": None,
            "messages": None,
            "params": {},
            "had_key": key is not None,
            "key_last4": key[-4:] if key and len(key) >= 8 else None,
            "retry_count": None,
            "status": None,
            "outcome": None,
            "reply": None,
        }
        outcome = "bad_request"
        finished = False
        try:
            with state.lock:
                mode = state.config["completions"]
                table = dict(state.config["word_logprobs"])
                quirks = set(state.config["llama_cpp"] or ())
                shift = state.config["text_offset_shift"]
            body, problem = _parse_completion_body(await request.read())
            if body is not None:
                entry["model"] = body["model"]
                entry["prompt"] = body["prompt"]
                entry["params"] = {k: v for k, v in body.items() if k not in ("model", "prompt")}
            if "lists" in quirks and body is not None and len(_prompts(body)) > 1:
                # llama-cpp-python: `assert len(body.prompt) <= 1`, an AssertionError whose
                # message is empty, answered as a server error.
                state.record(entry, generation)
                outcome = "list_refused"
                response = _llama_cpp_error(500, "", "internal_server_error")
            elif mode == "absent":
                state.record(entry, generation)
                outcome = "absent"
                response = _error_response(
                    404, "Unknown request URL: POST /v1/completions (this server serves chat only)."
                )
            else:
                if body is None:
                    state.record(entry, generation)
                    decision = Decision("bad_request", 400, 0.0, text=problem)
                else:
                    prompts = _prompts(body)
                    # The chat machinery decides faults, latency and keys for this request too.
                    seen = {"model": body["model"], "messages": [
                        {"role": "user", "content": "\n".join(prompts)}
                    ]}  # fmt: skip
                    decision = state.decide(entry, generation, seen, key)
                outcome = decision.outcome
                if decision.delay:
                    await asyncio.sleep(decision.delay)
                if decision.outcome in ("reply", "hang") and body is not None:
                    response = _completion_response(body, n, entry, mode, table, quirks, shift)
                else:
                    authorization = request.headers.get("Authorization", "")
                    response = _respond(decision, None, n, entry, state, authorization)
            state.finish(entry, generation, response.status, outcome)
            finished = True
            await response.prepare(request)
            await response.write_eof()
            return response
        finally:
            if not finished:
                state.finish(entry, generation, None, outcome)
            state.depart(generation)

    async def models(request: web.Request) -> web.Response:
        with state.lock:
            state.models_requests += 1
            names = list(state.config["models"])
            required = state.config["require_key"]
            echo = state.config["echo_auth"]
        if required is not None and _bearer(request) != required:
            message = "Incorrect API key provided."
            if echo:
                message = _echo_auth(message, 401, request.headers.get("Authorization", ""))
            return _error_response(401, message)
        created = int(time.time())
        data = [
            {"id": m, "object": "model", "created": created, "owned_by": "evalsite-test"}
            for m in names
        ]
        return web.json_response({"object": "list", "data": data})

    async def get_config(request: web.Request) -> web.Response:
        return web.json_response(state.describe_config())

    async def post_config(request: web.Request) -> web.Response:
        try:
            knobs = json.loads(await request.read() or b"{}")
            if not isinstance(knobs, dict):
                raise ConfigError("the body must be a JSON object of knobs")
            return web.json_response(state.configure(knobs))
        except (ValueError, ConfigError) as exc:
            return web.json_response({"error": str(exc)}, status=400)

    async def get_stats(request: web.Request) -> web.Response:
        log = request.query.get("log", "1") not in ("0", "false", "no")
        last = request.query.get("last")
        return web.json_response(state.stats(log=log, last=int(last) if last else None))

    async def post_reset(request: web.Request) -> web.Response:
        if request.query.get("stats_only") in ("1", "true"):
            state.reset_stats()
        else:
            state.reset()
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/_control/config", get_config)
    app.router.add_post("/_control/config", post_config)
    app.router.add_get("/_control/stats", get_stats)
    app.router.add_post("/_control/reset", post_reset)
    llm_batches.install(app, state)  # /v1/files and /v1/batches (tests/llm_batches.py)
    return app


def _parse_body(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        body = json.loads(raw)
    except ValueError:
        return None, "We could not parse the JSON body of your request."
    if not isinstance(body, dict):
        return None, "The request body must be a JSON object."
    if not isinstance(body.get("model"), str):
        return None, "you must provide a model parameter"
    messages = body.get("messages")
    if not (isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages)):
        return None, "'messages' must be a non-empty array of message objects"
    if body.get("stream"):
        return None, "stream=true is not supported by the evalsite test server"
    return body, ""


def _parse_completion_body(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        body = json.loads(raw)
    except ValueError:
        return None, "We could not parse the JSON body of your request."
    if not isinstance(body, dict):
        return None, "The request body must be a JSON object."
    if not isinstance(body.get("model"), str):
        return None, "you must provide a model parameter"
    prompt = body.get("prompt")
    if not (
        isinstance(prompt, str)
        or (isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt))
    ):
        return None, "'prompt' must be a string or a non-empty array of strings"
    logprobs = body.get("logprobs")
    if logprobs is not None and (
        isinstance(logprobs, bool) or not isinstance(logprobs, int) or not 0 <= logprobs <= 5
    ):
        return None, "'logprobs' must be an integer from 0 to 5"
    max_tokens = body.get("max_tokens", 16)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        return None, "'max_tokens' must be a non-negative integer"
    if max_tokens == 0 and not body.get("echo"):
        return None, "max_tokens=0 is only allowed with echo=true"
    if body.get("stream"):
        return None, "stream=true is not supported by the evalsite test server"
    return body, ""


_TOKEN = re.compile(r"\s*\S+|\s+")


def completion_tokens(text: str) -> list[tuple[str, int]]:
    """The server's tokens of `text` with their offsets: each word with the whitespace before it
    (trailing whitespace is a token of its own)."""
    return [(m.group(), m.start()) for m in _TOKEN.finditer(text)]


def word_logprob(token: str, table: dict[str, float]) -> float:
    """A token's log-probability: the table's value for its word, else -(1 + 0.25 len(word))."""
    word = token.strip()
    if word in table:
        return table[word]
    return -(1.0 + 0.25 * len(word))


def _prompts(body: dict[str, Any]) -> list[str]:
    return body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]


def _llama_cpp_error(status: int, message: str, kind: str) -> web.Response:
    """An error body as llama-cpp-python's server words it."""
    error = {"message": message, "type": kind, "param": None, "code": None}
    return web.json_response({"error": error}, status=status)


def _llama_cpp_format_refusal(body: dict[str, Any]) -> str:
    """llama-cpp-python's message for a response_format it does not know (it knows "text" and
    "json_object"): its validation error, answered as a server error; blank when the body has
    none such."""
    wanted = body.get("response_format")
    kind = wanted.get("type") if isinstance(wanted, dict) else None
    if kind is None or kind in ("text", "json_object"):
        return ""
    detail = {
        "type": "literal_error",
        "loc": ("body", "response_format", "type"),
        "msg": "Input should be 'text' or 'json_object'",
        "input": kind,
        "ctx": {"expected": "'text' or 'json_object'"},
    }
    return f"1 validation error:\n  {detail!r}\n\n    POST /v1/chat/completions"


def _llama_cpp_shift(shown: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """llama-cpp-python's tokens and offsets: each offset is the length of the text of the
    tokens before it, which starts with the space prefix its tokenizer adds (so every offset
    after the first is one late), and the first token shows that space."""
    if not shown:
        return shown
    (first, at), *rest = shown
    return [(first if first[:1].isspace() else " " + first, at)] + [
        (tok, at + 1) for tok, at in rest
    ]


# Tokens the server makes for max_tokens 0 with the llama_cpp "max_tokens" quirk (its "no
# limit": up to the end of its context).
UNLIMITED_TOKENS = 21


def _completion_response(
    body: dict[str, Any],
    n: int,
    entry: dict[str, Any],
    mode: str,
    table: dict[str, float],
    quirks: set[str] | None = None,
    shift: int = 0,
) -> web.Response:
    prompts = _prompts(body)
    echo = bool(body.get("echo"))
    wanted = body.get("logprobs")
    max_tokens = body.get("max_tokens", 16)
    quirks = quirks or set()
    if "max_tokens" in quirks and max_tokens == 0:
        max_tokens = UNLIMITED_TOKENS
    choices = []
    prompt_count = completion_count = 0
    for index, prompt in enumerate(prompts):
        generated = "".join(tok for tok, _ in completion_tokens(f" ok{' ok' * 20}")[:max_tokens])
        prompt_tokens = completion_tokens(prompt)
        made = [(tok, len(prompt) + at) for tok, at in completion_tokens(generated)]
        prompt_count += len(prompt_tokens)
        completion_count += len(made)
        shown = (prompt_tokens if echo else []) + made
        if "offsets" in quirks and echo:
            shown = _llama_cpp_shift(shown)
        if shift:
            shown = shown[:1] + [(tok, at + shift) for tok, at in shown[1:]]
        logprobs: dict[str, Any] | None = None
        if wanted is not None and mode != "null":
            values: list[float | None] = []
            for position, (tok, _) in enumerate(shown):
                if mode == "zero":
                    values.append(0.0)
                elif echo and position == 0:
                    values.append(None)  # nothing before the first token to condition on
                else:
                    values.append(word_logprob(tok, table))
            logprobs = {
                "tokens": [tok for tok, _ in shown],
                "token_logprobs": values,
                "top_logprobs": [
                    None if value is None else {tok: value}
                    for (tok, _), value in zip(shown, values, strict=True)
                ],
                "text_offset": [at for _, at in shown],
            }
        choices.append(
            {
                "index": index,
                "text": (prompt if echo else "") + generated,
                "logprobs": logprobs,
                "finish_reason": "length",
            }
        )
    entry["reply"] = [choice["text"] for choice in choices]
    payload = {
        "id": f"cmpl-evalsite-{n}",
        "object": "text_completion",
        "created": int(entry["time"]),
        "model": body["model"],
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_count,
            "completion_tokens": completion_count,
            "total_tokens": prompt_count + completion_count,
        },
    }
    return web.Response(
        body=json.dumps(payload).encode(),
        content_type="application/json",
        headers={"x-request-id": f"req-evalsite-{n}"},
    )


def _respond(
    decision: Decision,
    body: dict[str, Any] | None,
    n: int,
    entry: dict[str, Any],
    state: State,
    authorization: str = "",
) -> web.Response:
    if decision.outcome == "bad_request":
        return _error_response(400, decision.text)
    if decision.outcome == "rate_limited":
        wait = decision.retry_after or 0.0
        message = (
            "Rate limit reached for test-model (evalsite test server) on requests or tokens "
            f"per min. Please try again in {go_duration(wait)}."
        )
        return _error_response(429, message, wait)
    if decision.outcome == "error":
        messages = {
            401: "Incorrect API key provided.",
            429: "Rate limit reached for requests (evalsite test server).",
        }
        message = messages.get(decision.status, f"Simulated HTTP {decision.status}.")
        with state.lock:
            echo = state.config["echo_auth"]
        if echo and decision.status in (401, 500):
            message = _echo_auth(message, decision.status, authorization)
        return _error_response(decision.status, message, decision.retry_after)
    if decision.outcome == "garbage":
        with state.lock:
            garbage = state.config["garbage_body"]
            content_type = state.config["garbage_content_type"]
        return web.Response(body=garbage.encode(), headers={"Content-Type": content_type})
    assert body is not None
    # {seed}: the request's seed, so a test sees each epoch asked with its own.
    text = decision.text.replace("{seed}", str(body.get("seed", "")))
    if decision.outcome == "hang":
        # A client patient enough to outlast the hang gets the default answer.
        with state.lock:
            template = state.config["default_reply"]
        text = _render(template, _last_user(body["messages"]), body["model"], n)
    entry["reply"] = text
    prompt_tokens = sum(_words(_text(m.get("content"))) for m in body["messages"])
    completion_tokens = _words(text)
    payload = {
        "id": f"chatcmpl-evalsite-{n}",
        "object": "chat.completion",
        "created": int(entry["time"]),
        "model": body["model"],
        "system_fingerprint": "fp_evalsite_test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": decision.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return web.Response(
        body=json.dumps(payload).encode(),
        content_type="application/json",
        headers={"x-request-id": f"req-evalsite-{n}"},
    )


async def serve(
    state: State, port: int, started: Any, stop: asyncio.Event, host: str = HOST
) -> None:
    """Serve until `stop` is set; `started(port)` is called once the socket listens."""
    # handler_cancellation: a client that gives up (timeout) ends its request here too, so
    # in-flight counts stay true and hung handlers do not pile up.
    runner = web.AppRunner(
        build_app(state), access_log=None, handler_cancellation=True, shutdown_timeout=0.5
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=1024, reuse_address=True)
        await site.start()
        started(runner.addresses[0][1])
        await stop.wait()
    finally:
        await runner.cleanup()


# ---- Python wrapper ---------------------------------------------------------------------
class LLMServer:
    """The test server, in a background thread (start) or a subprocess (spawn)."""

    def __init__(self, port: int = 0) -> None:
        self._requested_port = port
        self.port: int | None = None
        self._state: State | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle
    def start(self, timeout: float = 10) -> Self:
        """Serve from a daemon thread with its own event loop on 127.0.0.1."""
        if self.running:
            return self
        self._state = State()
        ready = threading.Event()
        failure: list[BaseException] = []

        def started(port: int) -> None:
            self.port = port
            ready.set()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await serve(self._state, self._requested_port, started, self._stop)

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:
                failure.append(exc)
                ready.set()

        self._thread = threading.Thread(target=run, name="llm-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failure:
            self.stop()
            raise RuntimeError(f"LLM test server did not start: {failure or 'timeout'}")
        return self

    @classmethod
    def spawn(cls, port: int = 0, timeout: float = 15) -> LLMServer:
        """Run `python -m tests.llm_server` as a subprocess (own GIL); returns it started."""
        server = cls(port)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.llm_server", "--port", str(port), "--watch-stdin"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        server._proc = proc
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 1)
                if not chunk:
                    break
                line += chunk
        text = line.decode(errors="replace").strip()
        if not text.startswith(PORT_LINE):
            server.stop()
            raise RuntimeError(f"LLM test server subprocess did not start (said {text!r})")
        server.port = int(text.removeprefix(PORT_LINE))
        return server

    def stop(self, timeout: float = 10) -> None:
        """Stop serving; leaves no thread or process behind. Safe to call twice."""
        if self._thread is not None:
            if self._loop is not None and self._stop is not None:
                with contextlib.suppress(RuntimeError):  # loop already closed
                    self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError("LLM test server thread did not stop")
            self._thread = None
            self._loop = None
        if self._proc is not None:
            proc = self._proc
            # Closing stdin is the polite stop (the child exits on EOF); then SIGTERM, then kill.
            for step in ("eof", "terminate", "kill"):
                if step == "eof" and proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        proc.stdin.close()
                elif step == "terminate":
                    proc.terminate()
                elif step == "kill":
                    proc.kill()
                try:
                    proc.wait(timeout / 2)
                    break
                except subprocess.TimeoutExpired:
                    continue
            if proc.stdout is not None:
                proc.stdout.close()
            self._proc = None

    @property
    def running(self) -> bool:
        if self._thread is not None:
            return self._thread.is_alive()
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The subprocess's pid in spawn mode, else None."""
        return self._proc.pid if self._proc is not None else None

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses
    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("LLM test server is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to give the openai SDK as base_url (ends in /v1)."""
        return f"{self.url}/v1"

    # -- control: direct in thread mode, over HTTP in spawn mode
    def configure(self, **knobs: Any) -> dict[str, Any]:
        """Merge knobs into the configuration (see DEFAULTS); returns the full configuration."""
        if self._state is not None:
            return self._state.configure(knobs)
        return self._control("POST", "/_control/config", knobs)

    def config(self) -> dict[str, Any]:
        if self._state is not None:
            return self._state.describe_config()
        return self._control("GET", "/_control/config")

    def reset(self, stats_only: bool = False) -> None:
        """Back to DEFAULTS with empty stats (or just empty the stats)."""
        if self._state is not None:
            self._state.reset_stats() if stats_only else self._state.reset()
        else:
            self._control("POST", "/_control/reset" + ("?stats_only=1" if stats_only else ""))

    def stats(self, log: bool = True, last: int | None = None) -> dict[str, Any]:
        """Counters and (unless log=False) the last requests, oldest first."""
        if self._state is not None:
            return self._state.stats(log=log, last=last)
        query = f"?log={int(log)}" + (f"&last={last}" if last is not None else "")
        return self._control("GET", "/_control/stats" + query)

    def batches(self, **knobs: Any) -> dict[str, Any]:
        """The Batch API's files, batches and knobs (tests/llm_batches.py); knobs are merged."""
        if knobs:
            return self._control("POST", "/_control/batches", knobs)
        return self._control("GET", "/_control/batches")

    def _control(self, method: str, path: str, payload: Any = None) -> dict[str, Any]:
        data = json.dumps(payload).encode() if payload is not None else b""
        request = urllib.request.Request(
            self.url + path,
            data=data if method == "POST" else None,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                detail = json.loads(exc.read() or b"{}").get("error", str(exc))
            raise ConfigError(detail) from None


# ---- command line -----------------------------------------------------------------------
def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default=HOST)
    parser.add_argument(
        "--watch-stdin", action="store_true", help="exit when stdin closes (parent died)"
    )
    parser.add_argument("--config", help="initial knobs as a JSON object")
    args = parser.parse_args()

    state = State()
    if args.config:
        state.configure(json.loads(args.config))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if args.watch_stdin:

            def watch() -> None:
                with contextlib.suppress(OSError):
                    while sys.stdin.buffer.read(4096):
                        pass
                loop.call_soon_threadsafe(stop.set)

            threading.Thread(target=watch, daemon=True).start()

        def started(port: int) -> None:
            print(f"{PORT_LINE}{port}", flush=True)

        await serve(state, args.port, started, stop, host=args.host)

    asyncio.run(main())


if __name__ == "__main__":
    _main()
