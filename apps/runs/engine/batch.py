"""Batch mode: a run's requests go to the provider's Batch API instead of one by one.

For OpenAI-compatible providers that offer the Batch API (`Endpoint.supports_batch`): the
requests of a launch are written as JSONL files, uploaded (`/v1/files`, purpose "batch") and
sent as batches (`/v1/batches`, 24 h window), which answer at the batch price
(`Endpoint.cost(..., batch=True)`). The run's plug-in is used as it is, twice:

Building requests (`RecordingCall`)
    `plugin.perform` runs over each unit with a `Call` whose `chat` writes the request body
    (`llm.chat_body`, exactly what a chunk would send) as one line, with the custom_id
    "<unit key>|<epoch>|<round>|<n>", and answers a placeholder that is thrown away. A unit
    that asks nothing (a template error, nothing to judge) has its result at once: it is
    written then, like a chunk writes it.
Reading replies (`ReplayCall`)
    Once a batch is over, `plugin.perform` runs over each of its units again with a `Call`
    whose `chat` answers from the batch's output file (a `Reply`, cost at the batch price, API
    keys scrubbed) or raises the line's error from its error file; the plug-in then parses and
    scores the reply and `writer.write_results` persists it: the very code a chunk runs, so a
    unit is written exactly once (unique constraints, `unsettled_keys`), a line's error fails
    its item with that error, and every line is an attempt in the logs. Lines an expired or
    failed batch never answered fail their items with the cause; lines of a cancelled batch
    leave their units without a result, for resume (which sends them as a new batch).
The response cache (`apps.runs.engine.cache`)
    When the run reads the cache (`Run.use_cache`, not an overwrite), a unit whose every
    request is already answered there is written from the cache while the files are cut
    (`CacheCall`: $0, counted as cached) and never goes into a batch; a unit with any request
    missing goes whole. Every reply a batch answers is stored in the cache (at the batch price).

Jobs (both functions of ids, safe to run twice)
    `submit_job(run, launch)` (enqueued by `launch.launch`) renders the launch's pending units
    that no earlier unfinished batch holds, splits them into files of at most
    EVALSITE_BATCH_MAX_REQUESTS lines and EVALSITE_BATCH_MAX_BYTES (a unit's lines stay in one
    file), records each file as a `RunBatch` row with its unit keys *before* uploading, and
    sends them: each provider id is saved the moment it is known. A job that dies between two
    of those steps is finished by the next job from the row: the file is found again by its
    name, the batch by its input file id, so nothing is uploaded or sent twice.
    `poll_job(run, launch)` (enqueued by the watchdog when the launch is due,
    `enqueue_due_batch_polls`) retrieves each unfinished batch, copies its status and
    request_counts to the row (the run page's progress), cancels it at the provider once the
    run is cancelled, writes the results of every batch that is over, and finalizes the run
    when none is left; otherwise it sets the next poll (EVALSITE_BATCH_POLL_SECONDS). A poll
    whose worker dies is enqueued again when its claim lapses, so a killed worker loses
    nothing and the run finishes once any worker lives. Resume of a stalled batch run polls
    the batches it has (`launch._launch_batch` leaves their units to them).
"""

import asyncio
import contextlib
import json
import logging
import random
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from typing import IO, Any

import openai
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.runs.engine import cache
from apps.runs.engine.contract import Call, Result, RunExecutor, executor_for
from apps.runs.engine.errors import RAW_LIMIT, LLMError, Stopped, classify
from apps.runs.engine.lifecycle import fail, finalize
from apps.runs.engine.llm import Attempt, Reply, cache_key, chat_body, parse_completion, run_async
from apps.runs.engine.polls import (
    batch_poll_claim,
    forget_batch_polls,
    poll_batches_in,
    renew_batch_claim,
)
from apps.runs.engine.redis_keys import (
    BATCH_DUE_KEY,
    CLAIM_DUE,
    batch_job_id,
    batch_polls_key,
    batch_submitting_key,
    redis_connection,
)
from apps.runs.engine.scrub import NO_KEY, Scrubber, known_keys
from apps.runs.engine.tuning import BATCH_API_TRIES, BATCH_POLL_TIMEOUT, KEY_TTL
from apps.runs.engine.writer import write_results
from apps.runs.models import STOPPED, Endpoint, ErrorKind, Run, RunBatch
from evalsite.enqueue import enqueue_now

logger = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
# Units rendered, or replayed and written, at a time.
SLICE = 500
# Seconds an upload of one file may take (a 200 MB file on a slow line).
UPLOAD_SECONDS = 900.0


def custom_id(key: str, epoch: int, round: int | None, n: int) -> str:
    return f"{key}|{epoch}|{'' if round is None else round}|{n}"


# ---- the two calls ----------------------------------------------------------------------------
class _Numbered(Call):
    """Names each request of a unit the same way when building it and when reading its reply.

    `turn` n (a unit asked turn by turn, `RunExecutor.batch_turn`, n turns answered): the unit
    makes one request here, its turn n + 1, named with n so that no other turn's line answers
    it; a request after it raises Stopped (it goes in the next batch, with this answer)."""

    def __init__(self, key: str, item_id: int, turn: int | None = None) -> None:
        super().__init__(None, item_id)
        self.key = key
        self.turn = turn
        self.seen: dict[tuple[int, int | None], int] = {}

    def next_id(self, epoch: int, round: int | None) -> str:
        if self.turn is not None:
            if self.seen:
                raise Stopped  # the next turn needs this one's answer: a later batch asks it
            self.seen[(epoch, round)] = 1
            return custom_id(self.key, epoch, round, self.turn)
        n = self.seen.get((epoch, round), 0)
        self.seen[(epoch, round)] = n + 1
        return custom_id(self.key, epoch, round, n)


class RecordingCall(_Numbered):
    """Writes each request the unit makes as a batch line; answers a placeholder."""

    def __init__(self, key: str, item_id: int, endpoint: Endpoint, turn: int | None = None) -> None:
        super().__init__(key, item_id, turn)
        self.endpoint = endpoint
        self.lines: list[bytes] = []
        self.cache_keys: list[str] = []

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        name = self.next_id(epoch, round)
        body = chat_body(self.endpoint, messages, **params)
        self.cache_keys.append(cache_key(self.endpoint, body, epoch=epoch, round=round))
        line = {
            "custom_id": name,
            "method": "POST",
            "url": CHAT_PATH,
            "body": body,
        }
        self.lines.append(json.dumps(line, ensure_ascii=False).encode() + b"\n")
        return Reply("", "", 0, 0, 0, 0.0, "", 0)


class ReplayCall(_Numbered):
    """Answers each request of the unit from the batch's output and error lines."""

    def __init__(
        self, key: str, item_id: int, reader: "BatchReader", turn: int | None = None
    ) -> None:
        super().__init__(key, item_id, turn)
        self.reader = reader

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        name = self.next_id(epoch, round)
        found = self.reader.lines.get(name)
        if found is None and self.turn is not None and self.reader.asked(self.key, epoch):
            # This batch asked the unit an earlier turn, and that answer is written already
            # (a poll that died mid-way is reading the batch again): nothing more here.
            raise Stopped
        body = chat_body(self.reader.endpoint, messages, **params)
        key = cache_key(self.reader.endpoint, body, epoch=epoch, round=round)
        # A line the batch answered (or refused) was sent: it counts in the run's sent requests.
        attempt = Attempt(
            self.item_id, 1, False, messages, round=round, epoch=epoch, sent=found is not None
        )
        if found is None:
            if not self.reader.missing:
                raise Stopped  # a cancelled batch never did it: the unit stays pending
            error = LLMError(ErrorKind.API_ERROR, self.reader.missing)
        else:
            try:
                return self._reply(found, attempt, key)
            except LLMError as exc:
                error = exc
        attempt.error_kind, attempt.error, attempt.raw_reply = error.kind, error.message, error.raw
        self.log.append(attempt)
        raise error

    def _reply(self, line: dict[str, Any], attempt: Attempt, key: str) -> Reply:
        scrub = self.reader.scrub
        response = line.get("response") or {}
        status = response.get("status_code")
        body = response.get("body")
        raw = json.dumps(body if body is not None else line, ensure_ascii=False)[:RAW_LIMIT]
        if line.get("error") or status != 200 or not isinstance(body, dict):
            message = scrub.error(line_error(line))
            raise LLMError(ErrorKind.API_ERROR, message, raw=scrub.error(raw))
        endpoint = self.reader.endpoint
        try:
            _, text, finish, ptok, ctok = parse_completion(json.dumps(body).encode(), endpoint)
        except LLMError as exc:
            raise LLMError(exc.kind, scrub.error(exc.message), raw=scrub.error(raw)) from None
        cost = endpoint.cost(ptok, ctok, batch=True)
        text, raw = scrub(text), scrub(raw)
        attempt.ok, attempt.raw_reply = True, raw
        attempt.prompt_tokens, attempt.completion_tokens, attempt.cost = ptok, ctok, cost
        # Stored when the result is written, and only if the plug-in kept the reply.
        attempt.cache_entry = {
            "key": key,
            "model": endpoint.model,
            "content": text,
            "finish_reason": finish[:32],
            "prompt_tokens": ptok,
            "completion_tokens": ctok,
            "cost": cost,
        }
        self.log.append(attempt)
        return Reply(text, finish, ptok, ctok, 0, cost, raw, 1, body)


class CacheCall(_Numbered):
    """Answers each request of a unit from the response cache, as `LLM.chat` answers a hit
    ($0; the attempt records what it saved at the batch price); a miss leaves the unit to a
    batch."""

    def __init__(
        self,
        key: str,
        item_id: int,
        endpoint: Endpoint,
        hits: dict[str, Any],
        turn: int | None = None,
    ) -> None:
        super().__init__(key, item_id, turn)
        self.endpoint = endpoint
        self.hits = hits

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        self.next_id(epoch, round)  # one turn at a time, as the batch would ask it
        body = chat_body(self.endpoint, messages, **params)
        hit = self.hits.get(cache_key(self.endpoint, body, epoch=epoch, round=round))
        if hit is None:
            raise Stopped
        ptok, ctok, text = int(hit["prompt_tokens"]), int(hit["completion_tokens"]), hit["content"]
        self.log.append(
            Attempt(
                self.item_id,
                1,
                True,
                messages,
                round=round,
                epoch=epoch,
                raw_reply=text[:RAW_LIMIT],
                cached=True,
                saved=self.endpoint.cost(ptok, ctok, batch=True),
            )
        )
        return Reply(text, hit["finish_reason"], ptok, ctok, 0, 0.0, text, 0, cached=True)


def line_error(line: dict[str, Any]) -> str:
    """A failed batch line's error in the words a chunk would use for the same answer."""
    error = line.get("error")
    if isinstance(error, dict) and (error.get("message") or error.get("code")):
        return f"the batch could not do this request: {error.get('message') or error['code']}"
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    detail = ""
    if isinstance(body, dict):
        inner = body.get("error")
        detail = str(inner.get("message") if isinstance(inner, dict) else inner or body)
    elif body is not None:
        detail = str(body)
    detail = detail.strip()[:500]
    if status == 429:
        return f"rate limited (429) within the batch: {detail}"
    if isinstance(status, int) and status >= 500:
        return f"the server failed ({status}) within the batch: {detail}"
    if status == 200:
        return f"the endpoint's reply is not a chat completion: {detail}"
    return f"the request was refused ({status}): {detail}"


class BatchReader:
    """What a finished batch answered, by custom_id, and what to say for a missing line."""

    def __init__(self, endpoint: Endpoint, lines: dict[str, dict[str, Any]], missing: str):
        self.endpoint = endpoint
        self.scrub = Scrubber(known_keys(endpoint))
        self.lines = lines
        self.missing = missing  # blank: a missing line leaves its unit pending (cancelled)
        self._asked: set[str] | None = None

    def asked(self, key: str, epoch: int) -> bool:
        """Whether the batch has a line of the unit `key` at `epoch` (any request of it)."""
        if self._asked is None:
            self._asked = {name.rsplit("|", 2)[0] for name in self.lines}  # "key|epoch"
        return f"{key}|{epoch}" in self._asked


def missing_reason(row: RunBatch) -> str:
    if row.status == "expired":
        return (
            "The batch expired before this request was answered (the provider's 24 h window); "
            "retry the failed items."
        )
    if row.status == "failed":
        return f"The provider failed the batch: {row.error or 'no reason given'}"
    if row.status == "cancelled":
        return ""
    return "The batch ended without an answer to this request."


# ---- talking to the provider --------------------------------------------------------------------
class Provider:
    """The files and batches API of one endpoint, with retries; errors as scrubbed LLMErrors."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.timeout = float(endpoint.timeout_seconds)
        self.scrub = Scrubber(known_keys(endpoint))
        self.client = openai.OpenAI(
            api_key=endpoint.api_key() or NO_KEY,
            base_url=endpoint.effective_base_url(),
            max_retries=0,  # ours below: the job knows what it is doing
            timeout=self.timeout,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def call(self, what: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, BATCH_API_TRIES + 1):
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                error = self._error(what, exc)
                if error.fatal or not error.retryable or attempt == BATCH_API_TRIES:
                    raise error from None
                time.sleep(min(8.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2))
        raise AssertionError("unreachable")

    def _error(self, what: str, exc: Exception) -> LLMError:
        found = classify(exc, self.endpoint, self.timeout)
        message = found.message
        if isinstance(exc, openai.NotFoundError):
            where = self.endpoint.effective_base_url() or "the OpenAI API"
            message = (
                f"the provider has no such batch or file (404) at {where}"
                if what in ("reading a batch", "downloading batch results")
                else f"no Batch API at {where} (404): untick “Supports the Batch API”"
            )
        return LLMError(
            found.kind,
            self.scrub.error(f"{what}: {message}"),
            retryable=found.retryable,
            fatal=found.fatal or isinstance(exc, openai.NotFoundError),
        )

    def find_file(self, filename: str) -> str:
        """The id of an uploaded batch file named `filename`, or blank."""
        page = self.call("listing batch files", self.client.files.list, purpose="batch")
        for found in page:
            if found.filename == filename:
                return str(found.id)
        return ""

    def upload(self, filename: str, data: IO[bytes]) -> str:
        def _upload() -> Any:
            data.seek(0)  # again from the start on a retry
            return self.client.files.create(
                file=(filename, data, "application/jsonl"),
                purpose="batch",
                timeout=max(self.timeout, UPLOAD_SECONDS),
            )

        return str(self.call("uploading the batch file", _upload).id)

    def find_batch(self, row: RunBatch) -> Any:
        """The provider's batch of the row's file, or None. Batches are listed newest first:
        the search stops at those made an hour before the row was."""
        oldest = row.created_at.timestamp() - 3600 if row.created_at else 0
        page = self.call("listing batches", self.client.batches.list, limit=100)
        for found in page:
            if found.input_file_id == row.input_file_id:
                return found
            if (found.created_at or 0) < oldest:
                break
        return None

    def create(self, row: RunBatch) -> Any:
        return self.call(
            "creating the batch",
            self.client.batches.create,
            input_file_id=row.input_file_id,
            endpoint=CHAT_PATH,
            completion_window="24h",
            metadata={
                "evalsite_run": str(row.run_id),
                "evalsite_launch": str(row.launch),
                "evalsite_part": str(row.part),
            },
        )

    def retrieve(self, batch_id: str) -> Any:
        return self.call("reading a batch", self.client.batches.retrieve, batch_id)

    def cancel(self, batch_id: str) -> Any:
        return self.call("cancelling the batch", self.client.batches.cancel, batch_id)

    def lines(self, file_id: str) -> Iterator[dict[str, Any]]:
        content = self.call("downloading batch results", self.client.files.content, file_id)
        for raw in content.content.splitlines():
            if raw.strip():
                with contextlib.suppress(ValueError):
                    line = json.loads(raw)
                    if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                        yield line


# ---- doing units without the network --------------------------------------------------------------
async def _perform_all(
    plugin: RunExecutor, run: Run, ctx: Any, units: list[Any], calls: list[Call]
) -> list[Result | None]:
    return list(
        await asyncio.gather(
            *(_perform(plugin, run, ctx, u, c) for u, c in zip(units, calls, strict=True))
        )
    )


async def _perform(plugin: RunExecutor, run: Run, ctx: Any, unit: Any, call: Call) -> Result | None:
    """As a chunk performs a unit (chunk.ChunkRunner.perform); None leaves it pending."""
    try:
        result = await plugin.perform(run, ctx, unit, call)
    except Stopped:
        return None
    except LLMError as exc:
        result = plugin.failed_result(run, ctx, unit, exc.kind, exc.message)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        result = plugin.failed_result(run, ctx, unit, ErrorKind.INTERNAL, message)
        call.log.append(
            Attempt(
                item_id=getattr(unit, "item_id", 0),
                attempt=len(call.log) + 1,
                ok=False,
                request_messages=[],
                error_kind=ErrorKind.INTERNAL,
                error=message,
                traceback="".join(traceback.format_exception(exc)),
            )
        )
    result.attempts = call.rest()  # those before are with the parts the unit emitted
    return result


def _parts(calls: list[Call]) -> list[Result]:
    """The finished parts the units emitted (the turns a multi-turn unit answered)."""
    return [part for call in calls for part in call.parts]


def _key_of(unit: Any) -> str:
    return str(unit.key)


def render(
    run: Run, plugin: RunExecutor, keys: list[str], *, read_cache: bool = False
) -> Iterator[tuple[str, list[bytes]]]:
    """(unit key, its request lines) for every unit of `keys` that asks the model; a unit that
    asks nothing, or (`read_cache`) whose every request the cache answers, has its result
    written now, as a chunk would write it."""
    assert run.endpoint is not None
    for start in range(0, len(keys), SLICE):
        ctx = plugin.prepare(run)  # per slice: a context's asyncio objects belong to one loop
        units = plugin.load_units(run, ctx, keys[start : start + SLICE])
        calls = [
            RecordingCall(_key_of(u), u.item_id, run.endpoint, plugin.batch_turn(u)) for u in units
        ]
        results = run_async(_perform_all(plugin, run, ctx, units, list(calls)))
        final = [r for c, r in zip(calls, results, strict=True) if not c.lines and r is not None]
        # What a unit that asks nothing emitted is real (a turn that could not be rendered);
        # a recorded unit's parts hold placeholder answers.
        final += _parts([c for c in calls if not c.lines])
        asking = [(u, c) for u, c in zip(units, calls, strict=True) if c.lines]
        again: list[str] = []
        if read_cache and asking:
            hits = cache.lookup([k for _, c in asking for k in c.cache_keys])
            whole = [(u, c) for u, c in asking if all(k in hits for k in c.cache_keys)]
            if whole:
                answered = [
                    CacheCall(_key_of(u), u.item_id, run.endpoint, hits, plugin.batch_turn(u))
                    for u, _ in whole
                ]
                from_cache = run_async(
                    _perform_all(plugin, run, ctx, [u for u, _ in whole], list(answered))
                )
                done = {_key_of(u) for (u, _), r in zip(whole, from_cache, strict=True) if r}
                final += [r for r in from_cache if r is not None] + _parts(list(answered))
                # A unit asked turn by turn whose turn the cache answered: its next turn is
                # rendered again below, with that answer in context.
                again = [
                    _key_of(u)
                    for (u, _), c, r in zip(whole, answered, from_cache, strict=True)
                    if r is None and c.parts
                ]
                asking = [(u, c) for u, c in asking if _key_of(u) not in done | set(again)]
        for unit, call in asking:
            yield _key_of(unit), call.lines
        if final:
            write_results(run, plugin, ctx, final)
        renew(run)
        if again:
            yield from render(run, plugin, again, read_cache=read_cache)


def renew(run: Run) -> None:
    """Still at work on the launch: the run's heartbeat, and no poll meanwhile."""
    run.heartbeat()
    _redis().set(batch_submitting_key(run.pk, run.launch), 1, ex=int(batch_poll_claim()))
    renew_batch_claim(run.pk, run.launch)


def _redis() -> Any:
    return redis_connection()


# ---- the submit job ---------------------------------------------------------------------------------
def submit_job(run_id: int, launch: int) -> str:
    """Send the launch's pending units as batch files (see the module docstring)."""
    run = Run.objects.select_related("endpoint", "dataset", "template").filter(pk=run_id).first()
    if run is None or run.launch != launch or not run.is_active:
        return "nothing to do"
    try:
        run.mark_running()
        sent = submit(run)
    except LLMError as exc:
        run.mark_failed(f"{STOPPED}{exc.message}")
        return "failed"
    except BaseException:
        fail(run_id, traceback.format_exc())
        raise
    finally:
        _redis().delete(batch_submitting_key(run_id, launch))
    run.refresh_from_db()
    poll_batches_in(run_id, launch, 0 if run.cancel_requested else poll_seconds())
    return f"{sent} batches"


def poll_seconds() -> float:
    return float(settings.BATCH_POLL_SECONDS)


def submit(run: Run) -> int:
    """Split, record and send the launch's files; returns how many batches were sent."""
    plugin = executor_for(run)
    renew(run)
    held = {k for keys in run.batches.unapplied().values_list("keys", flat=True) for k in keys}
    if not run.batches.filter(launch=run.launch).exists():
        keys = [k for k in plugin.pending_keys(run, run.mode) if k not in held]
        _record_parts(run, plugin, keys)
    sent = 0
    for row in run.batches.unapplied().filter(batch_id="").order_by("launch", "part"):
        run.refresh_from_db()
        if run.cancel_requested:
            break
        send(run, plugin, row)
        sent += 1
    return sent


def _record_parts(run: Run, plugin: RunExecutor, keys: list[str], first: int = 0) -> None:
    """Cut the launch's units into files within the provider's limits, as RunBatch rows
    numbered from part `first`."""
    limit_lines = max(1, settings.BATCH_MAX_REQUESTS)
    limit_bytes = max(1, settings.BATCH_MAX_BYTES)
    parts: list[tuple[list[str], int]] = []
    part_keys: list[str] = []
    lines = size = 0
    read_cache = run.use_cache and run.mode != Run.Mode.OVERWRITE
    for key, unit_lines in render(run, plugin, keys, read_cache=read_cache):
        more = sum(len(line) for line in unit_lines)
        if part_keys and (lines + len(unit_lines) > limit_lines or size + more > limit_bytes):
            parts.append((part_keys, lines))
            part_keys, lines, size = [], 0, 0
        part_keys.append(key)
        lines += len(unit_lines)
        size += more
    if part_keys:
        parts.append((part_keys, lines))
    with transaction.atomic():
        RunBatch.objects.bulk_create(
            [
                RunBatch(run=run, launch=run.launch, part=n, keys=k, requests=count)
                for n, (k, count) in enumerate(parts, start=first)
            ]
        )


def send(run: Run, plugin: RunExecutor, row: RunBatch) -> None:
    """Upload the row's file and create its batch, each at most once (found again by name
    and by file id when a job died after the provider had it)."""
    assert run.endpoint is not None
    provider = Provider(run.endpoint)
    try:
        if not row.input_file_id:
            row.input_file_id = provider.find_file(row.filename)
            if not row.input_file_id:
                with tempfile.TemporaryFile() as data:
                    for _, lines in render(run, plugin, list(row.keys)):
                        data.writelines(lines)
                    data.seek(0)
                    _redis().set(
                        batch_submitting_key(run.pk, run.launch),
                        1,
                        ex=int(UPLOAD_SECONDS + batch_poll_claim()),
                    )
                    poll_batches_in(run.pk, run.launch, UPLOAD_SECONDS)
                    row.input_file_id = provider.upload(row.filename, data)
            row.save(update_fields=["input_file_id", "updated_at"])
        found = provider.find_batch(row) or provider.create(row)
        row.batch_id = str(found.id)
        _copy_status(row, found)
        row.save()
        renew(run)
    finally:
        provider.close()


def _copy_status(row: RunBatch, found: Any) -> None:
    row.status = str(found.status)
    counts = getattr(found, "request_counts", None)
    if counts is not None:
        row.completed, row.failed = int(counts.completed or 0), int(counts.failed or 0)
    row.output_file_id = str(found.output_file_id or "")
    row.error_file_id = str(found.error_file_id or "")
    errors = getattr(found, "errors", None)
    data = getattr(errors, "data", None) or []
    if data:
        said = [
            f"line {e.line}: {e.message}" if getattr(e, "line", None) else str(e.message or e.code)
            for e in data
        ]
        row.error = "; ".join(said)[:2000]


# ---- the poll job -------------------------------------------------------------------------------------
def poll_job(run_id: int, launch: int) -> str:
    """Poll the launch's batches once; write those that are over; finalize or poll again."""
    run = Run.objects.select_related("endpoint", "dataset", "template").filter(pk=run_id).first()
    if run is None or run.launch != launch or not run.is_active:
        forget_batch_polls(run_id, launch)  # a newer launch polls, or the run ended
        if run is not None and run.launch == launch and run.status == Run.Status.CANCELLED:
            _cancel_at_provider(run)
        return "nothing to do"
    if _redis().exists(batch_submitting_key(run_id, launch)):
        renew_batch_claim(run_id, launch)  # the submit job is queued or at work
        return "submitting"
    try:
        left = poll(run)
    except LLMError as exc:
        if exc.fatal:
            run.mark_failed(f"{STOPPED}{exc.message}")
            forget_batch_polls(run_id, launch)
            return "failed"
        logger.warning("run %s: polling its batches failed for now: %s", run_id, exc.message)
        poll_batches_in(run_id, launch, poll_seconds())
        return "later"
    except BaseException:
        fail(run_id, traceback.format_exc())
        forget_batch_polls(run_id, launch)
        raise
    if left:
        poll_batches_in(run_id, launch, poll_seconds())
        return f"{left} batches at the provider"
    forget_batch_polls(run_id, launch)
    finalize(run_id, launch)
    return "finished"


def enqueue_due_batch_polls(conn: Any = None) -> list[str]:
    """Enqueue the poll job of every batch-mode launch that is due; returns their job ids.
    Run by the watchdog (Redis only, like `reap`); each poll job gets its own id, counted per
    launch, and is safe to run twice (`poll_job`)."""
    conn = conn if conn is not None else redis_connection()
    seconds, micros = conn.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    claim_ms = int(batch_poll_claim() * 1000)
    started = []
    for raw in conn.register_script(CLAIM_DUE)(keys=[BATCH_DUE_KEY], args=[now_ms, claim_ms]):
        member = raw.decode() if isinstance(raw, bytes) else str(raw)
        run_id, launch = (int(part) for part in member.split(":"))
        n = conn.incr(batch_polls_key(run_id, launch))
        conn.expire(batch_polls_key(run_id, launch), KEY_TTL)
        name = batch_job_id(run_id, launch, f"poll-{n}")
        enqueue_now(
            poll_job, run_id, launch, queue="polls", job_id=name, timeout=BATCH_POLL_TIMEOUT
        )
        started.append(name)
    return started


def poll(run: Run) -> int:
    """One look at every unfinished batch of the run; returns how many are still going."""
    assert run.endpoint is not None
    plugin = executor_for(run)
    provider = Provider(run.endpoint)
    left = 0
    sending = False
    try:
        for row in run.batches.unapplied().order_by("launch", "part"):
            renew_batch_claim(run.pk, run.launch)
            if not row.batch_id:
                sending = True
                left += _unsent(run, plugin, provider, row)
                continue
            if run.cancel_requested and not row.is_over and row.cancel_sent_at is None:
                provider.cancel(row.batch_id)
                row.cancel_sent_at = timezone.now()
            _copy_status(row, provider.retrieve(row.batch_id))
            row.save()
            if row.is_over:
                apply(run, plugin, provider, row)
            else:
                left += 1
        if run.multi_turn:
            run.refresh_from_db()
            if not run.cancel_requested:
                sending = True
                left += next_turns(run, plugin)
        run.heartbeat()
    finally:
        provider.close()
        if sending:
            # Sending set the mark that holds polls off while a submit job works; this poll
            # is the one at work, and the next must not wait for the mark to lapse.
            _redis().delete(batch_submitting_key(run.pk, run.launch))
    return left


def next_turns(run: Run, plugin: RunExecutor) -> int:
    """A multi-turn run, one batch per turn: the units whose turn an applied batch answered and
    that have turns left go out again, their next turn in new files of the launch (parts after
    the last); returns how many batches were sent. A poll that dies after the rows are written
    leaves them to the next poll (`_unsent`), as a submit job's."""
    held = {k for keys in run.batches.unapplied().values_list("keys", flat=True) for k in keys}
    keys = [k for k in plugin.pending_keys(run, run.mode) if k not in held]
    if not keys:
        return 0
    last = run.batches.filter(launch=run.launch).aggregate(last=Max("part"))["last"]
    _record_parts(run, plugin, keys, first=0 if last is None else last + 1)
    sent = 0
    for row in run.batches.unapplied().filter(batch_id="").order_by("launch", "part"):
        send(run, plugin, row)
        sent += 1
    return sent


def _cancel_at_provider(run: Run) -> None:
    """A run cancelled before its submit job ran (while queued, say after a resume that took
    over an earlier launch's batches): cancel those batches too. Their rows stay unwritten, so a
    resume takes them over and writes what they had answered."""
    rows = [r for r in run.batches.unapplied().exclude(batch_id="") if r.cancel_sent_at is None]
    if not rows or run.endpoint is None:
        return
    provider = Provider(run.endpoint)
    try:
        for row in rows:
            if not row.is_over:
                with contextlib.suppress(LLMError):
                    _copy_status(row, provider.cancel(row.batch_id))
            row.cancel_sent_at = timezone.now()
            row.save()
    finally:
        provider.close()


def _unsent(run: Run, plugin: RunExecutor, provider: Provider, row: RunBatch) -> int:
    """A row whose submit job died before the batch id was saved: send it (found again if the
    provider has it), or, once the run is cancelled, drop it unless the provider has it."""
    if not run.cancel_requested:
        send(run, plugin, row)
        return 1
    found = provider.find_batch(row) if row.input_file_id else None
    if found is None:
        row.delete()  # never sent: its units stay pending, for resume
        return 0
    row.batch_id = str(found.id)
    _copy_status(row, found)
    row.save()
    return 1


def apply(run: Run, plugin: RunExecutor, provider: Provider, row: RunBatch) -> None:
    """Write the results of a batch that is over through the plug-in, exactly once."""
    assert run.endpoint is not None
    lines: dict[str, dict[str, Any]] = {}
    for file_id in (row.error_file_id, row.output_file_id):  # an answer wins over an error
        if file_id:
            for line in provider.lines(file_id):
                lines[line["custom_id"]] = line
    reader = BatchReader(run.endpoint, lines, missing_reason(row))
    keys = list(row.keys)
    for start in range(0, len(keys), SLICE):
        renew_batch_claim(run.pk, run.launch)
        run.refresh_from_db()
        todo = plugin.unsettled_keys(run, keys[start : start + SLICE])
        if not todo:
            continue
        ctx = plugin.prepare(run)
        units = plugin.load_units(run, ctx, todo)
        calls: list[Call] = [
            ReplayCall(_key_of(u), u.item_id, reader, plugin.batch_turn(u)) for u in units
        ]
        results = run_async(_perform_all(plugin, run, ctx, units, calls))
        done = [r for r in results if r is not None] + _parts(calls)
        if done:
            write_results(run, plugin, ctx, done)
    RunBatch.objects.filter(pk=row.pk).update(applied_at=timezone.now())
