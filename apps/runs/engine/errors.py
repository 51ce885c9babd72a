"""Errors of requests to a model, in plain words: what failed for good (`LLMError`, fatal
when no retry can fix it), what stops a run's requests, and `classify` for the SDK's errors."""

import contextlib
import email.utils
import json
import socket
import time

import httpx2
import openai

from apps.runs.models import Endpoint, ErrorKind

RAW_LIMIT = 20_000  # characters of a raw reply kept in a log


class LLMError(Exception):
    """A request that failed for good (after retries, or at once when retrying is pointless)."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool = False,
        fatal: bool = False,
        retry_after: float | None = None,
        raw: str = "",
        attempts: int = 0,
        rate_limited: bool = False,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.rate_limited = rate_limited
        self.status = status  # the HTTP status the server answered, when it answered one
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.fatal = fatal
        self.retry_after = retry_after
        self.raw = raw
        self.attempts = attempts


class Stopped(Exception):
    """The run was cancelled or stopped while this request waited: leave the unit pending."""


class OverBudget(Stopped):
    """Sending this request could cross the run's budget: the run stops (the unit stays
    pending, and resume with a larger budget does it)."""


# ---- errors in plain words -----------------------------------------------------------------------
def _body_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error") or json.dumps(body)
    elif body is None:
        message = exc.response.text if exc.response is not None else ""
    else:
        message = str(body)
    return str(message).strip()[:500]


def _retry_after(response: httpx2.Response | None) -> float | None:
    if response is None:
        return None
    headers = response.headers
    with contextlib.suppress(TypeError, ValueError):
        if (ms := headers.get("retry-after-ms")) is not None:
            return float(ms) / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        with contextlib.suppress(TypeError, ValueError, IndexError):
            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    return None


def _refused(exc: BaseException) -> bool:
    """Whether the cause chain says nothing listens there (refused, unreachable, no such host)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError | socket.gaierror):
            return True
        text = str(seen)
        if "Connect call failed" in text or "Cannot connect to host" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def classify(exc: BaseException, endpoint: Endpoint, timeout: float, api: str = "chat") -> LLMError:
    """Turn whatever the SDK raised into an `LLMError` with a message a person can act on."""
    where = endpoint.effective_base_url() or "the OpenAI API"
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APIConnectionError | TimeoutError) and _refused(exc):
        # Checked first: the aiohttp transport reports a refused connection as a timeout.
        return LLMError(ErrorKind.API_ERROR, f"nothing answers at {where}", retryable=True)
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return LLMError(ErrorKind.TIMEOUT, f"no answer within {timeout:g} s", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause else ""
        return LLMError(
            ErrorKind.API_ERROR, f"the connection to {where} failed{detail}", retryable=True
        )
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, endpoint, where, api)
    if isinstance(exc, openai.OpenAIError):
        return LLMError(ErrorKind.API_ERROR, f"{type(exc).__name__}: {exc}", retryable=True)
    return LLMError(ErrorKind.INTERNAL, f"{type(exc).__name__}: {exc}")


# Statuses that no retry can fix: the run stops instead of failing every item the same way.
FATAL_STATUS = {
    401: "the API key was refused (401) by {where}",
    403: "the API key may not use this endpoint or model (403)",
    404: "model “{model}” not found, or no {api} API at {where} (404)",
}
# Which API a request path is, in the words of the errors above.
API_NAMES = {"/chat/completions": "chat", "/completions": "completions"}


def _status_error(
    exc: openai.APIStatusError, endpoint: Endpoint, where: str, api: str = "chat"
) -> LLMError:
    status = exc.status_code
    detail = _body_message(exc)
    raw = exc.response.text[:RAW_LIMIT] if exc.response is not None else ""
    if status in FATAL_STATUS:
        what = FATAL_STATUS[status].format(where=where, model=endpoint.model, api=api)
        return LLMError(
            ErrorKind.API_ERROR, f"{what}: {detail}", fatal=True, raw=raw, status=status
        )
    if status == 429 or status >= 500 or status in (408, 409):
        what = "rate limited (429)" if status == 429 else f"the server failed ({status})"
        return LLMError(
            ErrorKind.API_ERROR,
            f"{what}: {detail}",
            retryable=True,
            retry_after=_retry_after(exc.response),
            raw=raw,
            rate_limited=status == 429,
            status=status,
        )
    return LLMError(
        ErrorKind.API_ERROR,
        f"the request was refused ({status}): {detail}",
        raw=raw,
        status=status,
    )
