"""Judge runs: a judge over one set of responses → a score per (item, subject).

The responses are a generation run's (`Run.source_run`: its OK Response rows) or one column of
the dataset (`Run.source_column`: `item.fields[column]`). This is the judge run plug-in (`RunPlugin`) of the shared
engine (apps/runs/engine/), so chunks, limits, retries, cancel, resume and logging work as
for generation runs.

Units are items (key = the item id). A unit does the item's rounds that are still to do
(every round the first time and on overwrite; on retry failed only the rounds that failed, the
good ones are kept) concurrently, then `persist` writes those rounds (JudgeRound, unique per
run/item/epoch/round) and the item's Score rows in one transaction. When the generation run
answered each item several times (`Run.epochs`), the unit judges every epoch's response, each
with the judge's rounds: an epoch's value aggregates its rounds, the item's judge value is the
mean over epochs, and `Score.epoch_values` keeps each epoch's for pass@k, majority vote and
the flaky items (apps.leaderboards.epochs). So an item is judged all or
nothing: a killed worker loses only the rounds in flight, finished rounds are never asked
again, and a rerun never mixes rounds of two judgements of the same item by accident.

Failures (never scored silently): an API error or timeout after the endpoint's retries, an
unparseable reply, a missing subject, an out-of-range value (the reply is kept, the attempt is
logged as failed), a prompt that cannot be built (`template`), no response to judge (the
generation run's response failed or is missing: `no_response`, which "retry failed" leaves
alone until the generation run has answered), and bad item data: no value in the judged
column, or a bad answer key/reference (`internal`, with a message that says which). Replies that cannot be scored are not re-asked
automatically: they are the judge's answer, kept with their raw text; "retry failed" asks
again. An item fails when any of its rounds failed: every subject's Score is then `failed`
with the first failed round's error, and `round_values` shows what the other rounds said.

Re-judging (retry failed, overwrite) replaces rounds and scores; the replaced rounds are
copied to ArchivedRound first and AttemptLog keeps the attempts (per the logging mode), and a
Score keeps its override fields: `final_value` stays the override wherever there is one.
"""

import asyncio
import json
import time
from argparse import ArgumentParser
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandError
from django.db.models import Count, Q, QuerySet

from apps.datasets.models import Item
from apps.datasets.values import as_text, prompt_inputs
from apps.judges.aggregation import aggregate, spread
from apps.judges.dialogues import Dialogue, transcript_with_answer
from apps.judges.judge_prompts import (
    PromptError,
    build_mcq_judge_messages,
    build_rubric_messages,
    with_examples,
)
from apps.judges.launching import JudgeRunError, create_judge_run, find_judge, parse_responses
from apps.judges.metrics import (
    METRICS,
    MetricError,
    get_metric,
    processed_references,
    usable_references,
)
from apps.judges.models import (
    ArchivedRound,
    Judge,
    JudgeCheck,
    JudgeRound,
    RetryScope,
    Score,
    TaskJudging,
    awaiting_response,
    judge_of,
)
from apps.judges.parsing import (
    AnswerKeyError,
    JudgeReplyError,
    parse_answer_key,
    response_format_for,
)
from apps.judges.plugins import PluginRaised
from apps.judges.scoring import JudgeSpec, score_text
from apps.runs.engine.contract import (
    Call,
    PlannedRequest,
    Progress,
    Result,
    RunPlugin,
    add_batch_argument,
)
from apps.runs.engine.errors import RAW_LIMIT, LLMError
from apps.runs.engine.llm import Attempt
from apps.runs.engine.tuning import RULE_LANES
from apps.runs.estimate import evenly_spaced
from apps.runs.models import Endpoint, ErrorKind, LoggingMode, Response, Run, Turn
from apps.runs.response_schema import judged_text
from apps.runs.turns import dialogue

NOTHING_TO_JUDGE = "Nothing to judge:"  # how source problems start (auto-judge looks for it)


# ---- what a chunk knows -----------------------------------------------------------------------
@dataclass
class JudgeContext:
    spec: JudgeSpec
    subjects: list[str]
    rounds: int
    aggregation: str
    system_prompt: str
    user_prompt: str
    params: dict[str, Any]  # extra request parameters (structured output)
    epochs: int  # responses per item (the generation run's epochs)
    input_columns: list[str] | None
    hidden_columns: set[str]
    metric_needs_reference: bool = True
    examples: list[dict[str, Any]] = field(default_factory=list)
    per_turn: bool = False  # one judgement per user turn (Judge.per_turn)
    conversation_column: str | None = None  # the dataset's, when items are conversations
    source_column: str = ""  # the judged column (judging a dataset column)
    # This chunk's requests in flight, at most the endpoint's limit (made lazily in the loop).
    limit: int = 1
    _requests: asyncio.Semaphore | None = None

    @property
    def requests(self) -> asyncio.Semaphore:
        if self._requests is None:
            self._requests = asyncio.Semaphore(self.limit)
        return self._requests


Slot = tuple[int, int, int]  # (epoch, turn, round); turn 0: the whole response


@dataclass(slots=True)
class JudgeUnit:
    key: str
    item_id: int
    todo: list[Slot]  # rounds to do now
    kept: dict[Slot, dict[str, float]]  # good rounds kept from an earlier launch
    turns: list[int] = field(default_factory=lambda: [0])  # [1, 2, …] judged per turn
    texts: dict[int, str] = field(default_factory=dict)  # epoch → the response being judged
    references: list[str] = field(default_factory=list)
    # (epoch, turn) → the request's messages
    messages: dict[tuple[int, int], list[dict[str, str]]] = field(default_factory=dict)
    error_kind: str = ""  # the item cannot be judged at all (set by load_units)
    error: str = ""
    # Epochs that cannot be judged (no response, a prompt that cannot be built): kind, why.
    epoch_errors: dict[int, tuple[str, str]] = field(default_factory=dict)
    # The item's fields, for a metric judge with Python plug-ins (they get the item).
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RoundOutcome:
    round: int
    ok: bool
    epoch: int = 0
    turn: int = 0
    values: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    raw_reply: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: int = 0
    error_kind: str = ""
    error: str = ""
    repaired: bool = False
    confidence: float | None = None
    reading: str = ""
    traceback: str = ""  # a plug-in's that raised: for the attempt log (admins only)


@dataclass(slots=True)
class SubjectScore:
    status: str
    judge_value: float | None
    round_values: list[float | None]  # epoch by epoch, each epoch's rounds in order
    spread: float  # the widest spread of one epoch's rounds
    epoch_values: list[float | None] = field(default_factory=list)  # with several epochs
    epoch_spread: float = 0.0
    turn_values: list[float | None] = field(default_factory=list)  # judged per turn


@dataclass(slots=True)
class ItemOutcome:
    rounds: list[RoundOutcome]
    scores: dict[str, SubjectScore]
    error_kind: str = ""
    error: str = ""


def _mean(values: list[float | None]) -> float | None:
    """The mean, or None when any value is missing (a turn or epoch not fully judged)."""
    if not values or any(v is None for v in values):
        return None
    return sum(float(v) for v in values if v is not None) / len(values)


def _clip(text: str, limit: int = RAW_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit]


def expand_references(reference: str) -> list[str]:
    """An item's reference as a list: a JSON list of answers, else the text (none if blank)."""
    stripped = (reference or "").strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        try:
            answers = json.loads(stripped)
        except ValueError:
            answers = None
        if isinstance(answers, list):
            return [as_text(a) for a in answers]
    return [reference]


def choice_text(details: dict[str, Any] | None, source: str) -> tuple[str | None, str, str]:
    """What a choice judge scores of one response: its picks as JSON (`score_choice`)."""
    details = details or {}
    if "pick" not in details:
        why = f"{NOTHING_TO_JUDGE} the response of {source} holds no log-likelihood picks."
        return None, ErrorKind.INTERNAL, why
    picks = {
        "pick": details["pick"],
        "pick_norm": details["pick_norm"],
        "label_type": details["label_type"],
        "label_count": len(details.get("options") or []),
    }
    return json.dumps(picks), "", ""


def multi_turn_transcripts(
    run_ids: Iterable[int], conversations: dict[int, list[dict[str, Any]]], epochs: int = 1
) -> dict[tuple[int, int, int], list[dict[str, Any]]]:
    """Per (run, item, epoch), the transcript of a multi-turn generation run's response (the item's
    conversation with the model's answers in place, as `Response.transcript` writes it, up to
    the first turn not answered), read from the Turn rows in one query; runs that are not
    multi-turn give nothing. `conversations`: the items' canonical messages by item id."""
    # Generation runs only: a memory script or a simulated user says its own turns (filler,
    # a persona's lines), and its judges read the response as those run kinds write it.
    multi = list(
        Run.objects.filter(
            pk__in=list(run_ids), multi_turn=True, kind=Run.Kind.GENERATION
        ).values_list("pk", flat=True)
    )
    if not multi or not conversations:
        return {}
    answers: dict[tuple[int, int, int], list[str]] = {}
    turns = (
        Turn.objects.filter(run_id__in=multi, item_id__in=list(conversations), epoch__lt=epochs)
        .answered()
        .order_by("run_id", "item_id", "epoch", "number")
        .values_list("run_id", "item_id", "epoch", "number", "text")
    )
    for run_id, item_id, epoch, number, text in turns:
        said = answers.setdefault((run_id, item_id, epoch), [])
        if number == len(said) + 1:
            said.append(text)
    return {key: dialogue(conversations[key[1]], said) for key, said in answers.items()}


# ---- the kind ----------------------------------------------------------------------------------
class JudgePlugin(RunPlugin):
    kind = Run.Kind.JUDGE

    # -- what is pending -------------------------------------------------------------------
    @staticmethod
    def first_subject(run: Run) -> str:
        return JudgeSpec.of(judge_of(run)).subject_names[0]

    def _scored(self, run: Run) -> QuerySet[Score]:
        """One Score row per judged item (every item has a row for each subject)."""
        return Score.objects.filter(run_id=run.pk, subject=self.first_subject(run))

    @staticmethod
    def _redo(run: Run, mode: str) -> Q:
        """Scores that this launch must judge again (resume works on items without any)."""
        if mode == Run.Mode.RETRY_FAILED:
            # Items still waiting for a generation response would only fail again.
            redo = Q(status=Score.Status.FAILED, launch__lt=run.launch) & ~awaiting_response(run)
            scope = (
                RetryScope.objects.filter(run_id=run.pk, launch=run.launch)
                .values_list("item_ids", flat=True)
                .first()
            )
            return redo & Q(item_id__in=scope) if scope is not None else redo
        if mode == Run.Mode.OVERWRITE:
            return Q(launch__lt=run.launch)
        return Q(pk__in=[])

    def items(self, run: Run) -> QuerySet[Item]:
        """The items the run judges."""
        return Item.objects.filter(dataset_id=run.dataset_id)

    def total(self, run: Run) -> int:
        return self.items(run).count()

    def pending_keys(self, run: Run, mode: str) -> list[str]:
        return self._pending(run, mode)

    def unsettled_keys(self, run: Run, keys: list[str]) -> list[str]:
        # Keys handed back from a dead chunk: only their items are read, not the whole run's
        # (at a million items, listing every pending key took seconds per handed-back batch).
        pending = set(self._pending(run, run.mode, [int(key) for key in keys]))
        return [key for key in keys if key in pending]

    def _pending(self, run: Run, mode: str, item_ids: list[int] | None = None) -> list[str]:
        """The launch's pending keys, of the items `item_ids` only when given."""
        items = self.items(run)
        scored = self._scored(run)
        if item_ids is not None:
            items = items.filter(id__in=item_ids)
            scored = scored.filter(item_id__in=item_ids)
        if mode == Run.Mode.RESUME:
            ids = items.exclude(id__in=scored.values("item_id"))
        elif mode == Run.Mode.RETRY_FAILED:
            ids = items.filter(id__in=scored.filter(self._redo(run, mode)).values("item_id"))
        else:
            ids = items.exclude(id__in=scored.filter(launch__gte=run.launch).values("item_id"))
        return [str(pk) for pk in ids.order_by("position").values_list("id", flat=True)]

    def pending_count(self, run: Run, mode: str) -> int:
        scored = self._scored(run)
        missing = self.items(run).count() - scored.count()
        if mode == Run.Mode.RESUME:
            return missing
        redo = scored.filter(self._redo(run, mode)).count()
        return redo + (missing if mode == Run.Mode.OVERWRITE else 0)

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]:
        counts = (
            self._scored(run)
            .exclude(self._redo(run, mode))
            .aggregate(
                done=Count("pk", filter=Q(status=Score.Status.OK)),
                failed=Count("pk", filter=Q(status=Score.Status.FAILED)),
            )
        )
        return counts["done"], counts["failed"]

    def lanes(self, run: Run) -> int:
        # As many items at once as the endpoint takes requests; their rounds then share the
        # limit through the chunk's own semaphore (JudgeContext.requests), so a round waiting
        # for its turn waits locally instead of polling the shared limit in Redis.
        return run.endpoint.concurrency_limit if run.endpoint is not None else RULE_LANES

    # -- loading work ------------------------------------------------------------------------
    def prepare(self, run: Run) -> JudgeContext:
        judge = judge_of(run)
        spec = JudgeSpec.of(judge)
        spec.check()
        params: dict[str, Any] = {}
        endpoint = run.endpoint
        if (
            spec.kind == Judge.Kind.RUBRIC
            and judge.asks_json
            and judge.use_structured_output
            and endpoint is not None
            and endpoint.supports_structured_output
        ):
            params["response_format"] = response_format_for(spec.subjects, spec.ask_confidence)
        dataset = run.dataset
        hidden = dataset.hidden_columns | {run.source_column}
        return JudgeContext(
            spec=spec,
            subjects=spec.subject_names,
            rounds=judge.rounds,
            aggregation=judge.aggregation,
            system_prompt=judge.system_prompt,
            user_prompt=judge.user_prompt,
            params=params,
            epochs=run.judged_epochs,
            input_columns=dataset.input_columns or None,
            hidden_columns={c for c in hidden if c},
            metric_needs_reference=(
                # Plug-ins read the item themselves (a converter, a plug-in metric).
                get_metric(spec.metric).needs_reference
                if spec.kind == Judge.Kind.METRIC and spec.metric in METRICS and not spec.converter
                else spec.kind != Judge.Kind.METRIC
            ),
            limit=endpoint.concurrency_limit if endpoint is not None else 1,
            examples=list(judge.examples or []),
            per_turn=spec.kind == Judge.Kind.RUBRIC and judge.per_turn,
            conversation_column=dataset.conversation_column,
            source_column=run.source_column or "",
        )

    def load_units(self, run: Run, ctx: JudgeContext, keys: list[str]) -> list[JudgeUnit]:
        ids = [int(key) for key in keys]
        rows: list[dict[str, Any]] = [
            dict(row)
            for row in Item.objects.filter(id__in=ids).values(
                "id", "fields", "reference", "conversation", "turn_references"
            )
        ]
        texts = self._texts(run, rows, ctx.epochs, ctx.spec.kind)
        transcripts = self._transcripts(run, rows, ctx) if ctx.spec.uses_llm else {}
        kept: dict[int, dict[Slot, dict[str, float]]] = {}
        if run.mode != Run.Mode.OVERWRITE:
            good = JudgeRound.objects.filter(
                run_id=run.pk,
                item_id__in=ids,
                status=JudgeRound.Status.OK,
                round__lt=ctx.rounds,
                epoch__lt=ctx.epochs,
            ).values_list("item_id", "epoch", "turn", "round", "values")
            for item_id, epoch, turn, number, values in good:
                kept.setdefault(item_id, {})[(epoch, turn, number)] = values
        units = []
        for row in rows:
            turns = [0]
            if ctx.per_turn:
                users = sum(1 for m in row["conversation"] or [] if m.get("role") == "user")
                turns = list(range(1, max(users, 1) + 1))
            slots = [(e, t, r) for e in range(ctx.epochs) for t in turns for r in range(ctx.rounds)]
            item_kept = {
                slot: values for slot, values in kept.get(row["id"], {}).items() if slot in slots
            }
            todo = [slot for slot in slots if slot not in item_kept]
            unit = JudgeUnit(str(row["id"]), row["id"], todo, item_kept, turns)
            self._fill(ctx, unit, row, texts[row["id"]], transcripts.get(row["id"]))
            units.append(unit)
        return units

    def _texts(
        self, run: Run, rows: list[dict[str, Any]], epochs: int, kind: str = ""
    ) -> dict[int, dict[int, tuple[str | None, str, str]]]:
        """Per item and epoch: (the response text, "", ""), or (None, error kind, why there is
        nothing to judge). A choice judge reads a choice-scoring run's picks instead of the
        text (`choice_text`)."""
        column = run.source_column
        out: dict[int, dict[int, tuple[str | None, str, str]]] = {row["id"]: {} for row in rows}
        if run.source_run_id is None:
            for row in rows:
                value = (row["fields"] or {}).get(column)
                if value is None:
                    why = f"{NOTHING_TO_JUDGE} the item has no value in column “{column}”."
                    out[row["id"]][0] = (None, ErrorKind.INTERNAL, why)
                else:
                    out[row["id"]][0] = (as_text(value), "", "")
            return out
        source = f"run #{run.source_run_id}"
        schema = (
            Run.objects.filter(pk=run.source_run_id)
            .values_list("response_schema", flat=True)
            .first()
        )
        responses = Response.objects.filter(
            run_id=run.source_run_id, item_id__in=list(out), epoch__lt=epochs
        ).values_list("item_id", "epoch", "status", "text", "error_kind", "error", "details")
        for item_id, epoch, status, text, error_kind, error, details in responses:
            if status == Response.Status.OK and kind == Judge.Kind.CHOICE:
                out[item_id][epoch] = choice_text(details, source)
            elif status == Response.Status.OK and schema:
                judged, why = judged_text(text, schema)
                out[item_id][epoch] = (
                    (judged, "", "")
                    if judged is not None
                    else (None, ErrorKind.NO_RESPONSE, f"{NOTHING_TO_JUDGE} {why}")
                )
            elif status == Response.Status.OK:
                out[item_id][epoch] = (text, "", "")
            else:
                kind = ErrorKind(error_kind).label if error_kind in ErrorKind.values else "error"
                which = f" (epoch {epoch + 1})" if epochs > 1 else ""
                out[item_id][epoch] = (
                    None,
                    ErrorKind.NO_RESPONSE,
                    f"{NOTHING_TO_JUDGE} the response of {source} to this item{which} "
                    f"failed ({kind}: {error[:300]}).",
                )
        for found in out.values():
            for epoch in range(epochs):
                which = f" in epoch {epoch + 1}" if epochs > 1 else ""
                found.setdefault(
                    epoch,
                    (
                        None,
                        ErrorKind.NO_RESPONSE,
                        f"{NOTHING_TO_JUDGE} {source} has no response to this item{which} "
                        "(resume that run, then retry the failed items here).",
                    ),
                )
        return out

    @staticmethod
    def _transcripts(
        run: Run, rows: list[dict[str, Any]], ctx: JudgeContext
    ) -> dict[int, dict[int, list[dict[str, Any]]]]:
        """Per item and epoch, a multi-turn run's transcript ({} for other responses)."""
        if run.source_run_id is None:
            return {}
        conversations = {row["id"]: row["conversation"] or [] for row in rows}
        out: dict[int, dict[int, list[dict[str, Any]]]] = {}
        found = multi_turn_transcripts([run.source_run_id], conversations, ctx.epochs)
        for (_, item_id, epoch), transcript in found.items():
            out.setdefault(item_id, {})[epoch] = transcript
        return out

    def _fill(
        self,
        ctx: JudgeContext,
        unit: JudgeUnit,
        row: dict[str, Any],
        texts: dict[int, tuple[str | None, str, str]],
        transcripts: dict[int, list[dict[str, Any]]] | None = None,
    ) -> None:
        """Everything the unit needs, or the reason it (or one of its epochs) cannot be judged
        (no request is made for it)."""
        for epoch, (response, kind, why) in texts.items():
            if response is None:
                unit.epoch_errors[epoch] = (kind, why)
            else:
                unit.texts[epoch] = response
        if not unit.texts:  # nothing to judge at all: the first reason stands for the item
            unit.error_kind, unit.error = unit.epoch_errors[min(unit.epoch_errors)]
            return
        spec = ctx.spec
        reference = row["reference"] or ""
        try:
            if spec.kind in (Judge.Kind.MCQ, Judge.Kind.MCQ_RULE, Judge.Kind.CHOICE):
                if not reference.strip():
                    raise AnswerKeyError("The item has no answer key (its reference is empty).")
                if spec.kind != Judge.Kind.CHOICE:  # its labels are the run's: read when scored
                    parse_answer_key(reference, spec.label_type, spec.label_count)
                unit.references = [reference]
            else:
                unit.references = expand_references(reference)
                if (
                    spec.kind == Judge.Kind.METRIC
                    and ctx.metric_needs_reference
                    and not unit.references
                ):
                    raise AnswerKeyError(
                        f"The item has no reference answer, which {spec.metric} needs."
                    )
                if spec.kind == Judge.Kind.METRIC and spec.uses_plugins:
                    unit.fields = dict(row["fields"] or {})
                if spec.kind == Judge.Kind.METRIC and ctx.metric_needs_reference:
                    try:
                        unit.references = usable_references(unit.references)
                        # checked here, applied when scored (a plug-in's, only when scored)
                        if spec.postprocess_reference and not spec.uses_plugins:
                            processed_references(spec.postprocess or None, unit.references)
                    except MetricError as exc:
                        raise AnswerKeyError(str(exc)) from None
        except AnswerKeyError as exc:
            unit.error_kind, unit.error = ErrorKind.INTERNAL, f"Bad item data: {exc}"
            return
        if not spec.uses_llm:
            return
        transcripts = transcripts or {}
        fields = row["fields"] or {}
        inputs = prompt_inputs(fields, ctx.input_columns, ctx.hidden_columns)
        for epoch, response in unit.texts.items():
            dialogue = self._dialogue(ctx, row, inputs, response, transcripts.get(epoch))
            if ctx.per_turn and (unanswered := dialogue.unanswered()):
                which = ", ".join(str(number) for number in unanswered)
                why = (
                    f"{NOTHING_TO_JUDGE} turn {which} of the conversation has no answer to judge "
                    "(a judge that scores per turn needs a multi-turn run's responses)."
                )
                unit.epoch_errors[epoch] = (ErrorKind.NO_RESPONSE, why)
                continue
            common: dict[str, Any] = {
                "response": response,
                "reference": reference,
                "fields": fields,
                "inputs": inputs,
                "system_prompt": ctx.system_prompt,
                "user_prompt": ctx.user_prompt,
                "dialogue": dialogue,
            }
            try:
                for turn in unit.turns:
                    if spec.kind == Judge.Kind.RUBRIC:
                        messages = build_rubric_messages(
                            subjects=spec.subjects,
                            confidence=spec.ask_confidence,
                            reply_format=spec.reply_format,
                            turn=turn or None,
                            **common,
                        )
                    else:
                        messages = build_mcq_judge_messages(
                            label_type=spec.label_type, label_count=spec.label_count, **common
                        )
                    unit.messages[(epoch, turn)] = with_examples(messages, ctx.examples)
            except PromptError as exc:
                if ctx.epochs == 1:
                    unit.error_kind, unit.error = ErrorKind.TEMPLATE, str(exc)
                    return
                unit.epoch_errors[epoch] = (ErrorKind.TEMPLATE, str(exc))

    @staticmethod
    def _dialogue(
        ctx: JudgeContext,
        row: dict[str, Any],
        inputs: dict[str, Any],
        response: str,
        transcript: list[dict[str, Any]] | None,
    ) -> Dialogue:
        """What the judge reads as a dialogue: a multi-turn run's transcript; the item's
        conversation when that is the judged column (a chat log) or with the response as the
        answer to its last turn; else one question (the item's input) and the response."""
        references = list(row["turn_references"] or [])
        if transcript:
            return Dialogue.of(transcript, references)
        conversation = row["conversation"] or []
        if (
            conversation
            and ctx.conversation_column
            and ctx.source_column == (ctx.conversation_column)
        ):
            return Dialogue.of(conversation, references)
        if conversation:
            return Dialogue.of(transcript_with_answer(conversation, response), references)
        values = list(inputs.values())
        question = (
            as_text(values[0])
            if len(values) == 1
            else "\n".join(f"{name}: {as_text(value)}" for name, value in inputs.items())
        )
        return Dialogue.single(question, response, row["reference"] or "")

    # -- the cost estimate ----------------------------------------------------------------------
    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        ids = list(self.items(run).order_by("position").values_list("id", flat=True))
        return [str(pk) for pk in evenly_spaced(ids, n)], len(ids)

    def planned_requests(
        self, run: Run, ctx: JudgeContext, unit: JudgeUnit
    ) -> list[PlannedRequest]:
        if unit.error or not ctx.spec.uses_llm:
            return []
        return [
            PlannedRequest(unit.messages[(epoch, turn)], ctx.params, epoch=epoch, round=number)
            for epoch, turn, number in unit.todo
            if (epoch, turn) in unit.messages
        ]

    # -- doing it -----------------------------------------------------------------------------
    async def perform(self, run: Run, ctx: JudgeContext, unit: JudgeUnit, call: Call) -> Result:
        if unit.error:
            self._record_refusal(
                call, unit, unit.todo[0] if unit.todo else (0, 0, 0), unit.error_kind, unit.error
            )
            return self.failed_result(run, ctx, unit, unit.error_kind, unit.error)
        refused = [slot for slot in unit.todo if slot[0] in unit.epoch_errors]
        outcomes = []
        for epoch in sorted({slot[0] for slot in refused}):
            kind, why = unit.epoch_errors[epoch]
            self._record_refusal(call, unit, min(s for s in refused if s[0] == epoch), kind, why)
        for epoch, turn, number in refused:
            kind, why = unit.epoch_errors[epoch]
            outcomes.append(RoundOutcome(number, False, epoch, turn, error_kind=kind, error=why))
        todo = [slot for slot in unit.todo if slot[0] not in unit.epoch_errors]
        if ctx.spec.uses_llm:
            outcomes += await self._ask_all(ctx, unit, todo, call)
        else:
            outcomes += [self._evaluate(ctx, unit, slot, call) for slot in todo]
        outcome = self._combine(ctx, unit, outcomes)
        return Result(unit.key, unit.item_id, not outcome.error_kind, data=outcome)

    @staticmethod
    def _record_refusal(call: Call, unit: JudgeUnit, slot: Slot, kind: str, why: str) -> None:
        """Why (part of) the item was not asked, in its log like any failed attempt."""
        call.record(
            Attempt(
                item_id=unit.item_id,
                attempt=1,
                ok=False,
                request_messages=[],
                round=slot[2],
                epoch=slot[0],
                error_kind=kind,
                error=why,
            )
        )

    async def _ask_all(
        self, ctx: JudgeContext, unit: JudgeUnit, todo: list[Slot], call: Call
    ) -> list[RoundOutcome]:
        tasks = [asyncio.create_task(self._ask(ctx, unit, slot, call)) for slot in todo]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # A fatal error or a stop in one round: the others must not run on unobserved.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _ask(
        self, ctx: JudgeContext, unit: JudgeUnit, slot: Slot, call: Call
    ) -> RoundOutcome:
        epoch, turn, number = slot
        messages = unit.messages[(epoch, turn)]
        try:
            async with ctx.requests:
                reply = await call.chat(messages, round=number, epoch=epoch, **ctx.params)
        except LLMError as exc:
            if exc.fatal:
                raise
            return RoundOutcome(
                number,
                False,
                epoch,
                turn,
                raw_reply=_clip(exc.raw),
                error_kind=exc.kind,
                error=exc.message,
            )
        usage: dict[str, Any] = {
            "raw_reply": _clip(reply.text),
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost": reply.cost,
            "latency_ms": reply.latency_ms,
        }
        try:
            result = score_text(ctx.spec, reply.text, unit.references)
        except JudgeReplyError as exc:
            self._fail_attempt(call, slot, messages, exc.kind, exc.message)
            return RoundOutcome(
                number, False, epoch, turn, error_kind=exc.kind, error=exc.message, **usage
            )
        except ValueError as exc:  # bad item data that load_units could not see
            self._fail_attempt(call, slot, messages, ErrorKind.INTERNAL, str(exc))
            return RoundOutcome(
                number, False, epoch, turn, error_kind=ErrorKind.INTERNAL, error=str(exc), **usage
            )
        outcome = RoundOutcome(
            number, True, epoch, turn, dict(result.values), result.reason, **usage
        )
        outcome.repaired = ctx.spec.kind == Judge.Kind.RUBRIC and result.repaired
        outcome.confidence = result.confidence
        outcome.reading = result.reading
        return outcome

    @staticmethod
    def _fail_attempt(
        call: Call, slot: Slot, messages: list[dict[str, str]], kind: str, message: str
    ) -> None:
        """The request succeeded but its reply cannot be scored: log the attempt as failed
        (the turns of one round are told apart by their messages)."""
        epoch, _, number = slot
        for attempt in reversed(call.log):
            if (
                (attempt.epoch, attempt.round) == (epoch, number)
                and attempt.ok
                and attempt.request_messages == messages
            ):
                attempt.ok = False
                attempt.error_kind = kind
                attempt.error = message
                return

    def _evaluate(self, ctx: JudgeContext, unit: JudgeUnit, slot: Slot, call: Call) -> RoundOutcome:
        """A rule-based round: no request; logged as one attempt like any other."""
        epoch, _, number = slot
        text = unit.texts[epoch]
        started = time.perf_counter()
        outcome = RoundOutcome(number, True, epoch)
        try:
            result = score_text(ctx.spec, text, unit.references, unit.fields)
            outcome.values, outcome.reason = dict(result.values), result.reason
        except PluginRaised as exc:  # a plug-in's bug fails its item, never the run
            outcome.ok, outcome.error_kind, outcome.error = False, ErrorKind.INTERNAL, exc.message
            outcome.traceback = exc.trace
        except JudgeReplyError as exc:
            outcome.ok, outcome.error_kind, outcome.error = False, exc.kind, exc.message
        except ValueError as exc:  # a metric refusing the item's data
            outcome.ok, outcome.error_kind, outcome.error = False, ErrorKind.INTERNAL, str(exc)
        outcome.latency_ms = int((time.perf_counter() - started) * 1000)
        if not outcome.ok:
            outcome.raw_reply = _clip(text)  # what was read, for the failed items page
        call.record(
            Attempt(
                item_id=unit.item_id,
                attempt=1,
                ok=outcome.ok,
                request_messages=[],
                round=number,
                epoch=epoch,
                raw_reply=outcome.raw_reply,
                error_kind=outcome.error_kind,
                error=outcome.error,
                traceback=outcome.traceback,
                latency_ms=outcome.latency_ms,
            )
        )
        return outcome

    def _combine(
        self, ctx: JudgeContext, unit: JudgeUnit, outcomes: list[RoundOutcome]
    ) -> ItemOutcome:
        """The item's scores from its kept and new rounds; any failed round fails the item.

        A turn's value aggregates its rounds (the judge's aggregation); an epoch's value is the
        mean of its turns (one turn, 0, unless the judge scores per turn); with several epochs
        the judge value is their mean, and each epoch's value is kept beside it. Judged per
        turn, each turn's value (the mean over epochs) is kept too.
        """
        by_slot: dict[Slot, dict[str, float]] = dict(unit.kept)
        for outcome in outcomes:
            if outcome.ok:
                by_slot[(outcome.epoch, outcome.turn, outcome.round)] = outcome.values
        failed = sorted((o for o in outcomes if not o.ok), key=lambda o: (o.epoch, o.turn, o.round))
        scores: dict[str, SubjectScore] = {}
        error_kind = error = ""
        if failed:
            first = failed[0]
            error_kind = first.error_kind
            where = []
            if ctx.epochs > 1:
                where.append(f"epoch {first.epoch + 1} of {ctx.epochs}")
            if first.turn:
                where.append(f"turn {first.turn} of {len(unit.turns)}")
            if ctx.rounds > 1:
                where.append(f"round {first.round + 1} of {ctx.rounds}")
            error = first.error + (f" ({', '.join(where)})" if where else "")
        for name in ctx.subjects:
            round_values: list[float | None] = []
            epoch_values: list[float | None] = []
            by_turn: dict[int, list[float | None]] = {turn: [] for turn in unit.turns}
            widest = 0.0
            for epoch in range(ctx.epochs):
                for turn in unit.turns:
                    values = [
                        by_slot.get((epoch, turn, r), {}).get(name) for r in range(ctx.rounds)
                    ]
                    present = [float(v) for v in values if v is not None]
                    round_values += values
                    widest = max(widest, spread(present))
                    whole = len(present) == ctx.rounds
                    by_turn[turn].append(aggregate(present, ctx.aggregation) if whole else None)
                epoch_values.append(_mean([by_turn[turn][-1] for turn in unit.turns]))
            if not failed and any(v is None for v in epoch_values):
                error_kind = ErrorKind.INTERNAL
                error = f"A kept round has no value for {name}; retry the item."
            several = ctx.epochs > 1
            scores[name] = SubjectScore(
                Score.Status.FAILED,
                None,
                round_values,
                widest,
                epoch_values if several else [],
                spread([v for v in epoch_values if v is not None]) if several else 0.0,
                [_mean(by_turn[turn]) for turn in unit.turns] if ctx.per_turn else [],
            )
        if not error_kind:
            for score in scores.values():
                score.status = Score.Status.OK
                if score.epoch_values:
                    done = [float(v) for v in score.epoch_values if v is not None]
                    score.judge_value = sum(done) / len(done)
                elif score.turn_values:
                    score.judge_value = _mean(score.turn_values)
                else:
                    score.judge_value = aggregate(
                        [float(v) for v in score.round_values if v is not None], ctx.aggregation
                    )
        return ItemOutcome(outcomes, scores, error_kind, error)

    def failed_result(
        self, run: Run, ctx: JudgeContext, unit: JudgeUnit, error_kind: str, message: str
    ) -> Result:
        outcomes = [
            RoundOutcome(n, False, e, t, error_kind=error_kind, error=message)
            for e, t, n in unit.todo
        ]
        outcome = self._combine(ctx, unit, outcomes)
        return Result(unit.key, unit.item_id, False, data=outcome)

    # -- writing it -----------------------------------------------------------------------------
    ROUND_FIELDS = (*JudgeRound.RESULT_FIELDS, "created_at")
    SCORE_FIELDS = (
        "status",
        "judge_value",
        "round_values",
        "spread",
        "epoch_values",
        "epoch_spread",
        "turn_values",
        "error_kind",
        "error",
        "final_value",
        "launch",
        "updated_at",
    )

    def persist(self, run: Run, ctx: JudgeContext, results: list[Result]) -> Progress:
        """Write each item's new rounds and its scores once per launch, in the caller's
        transaction; a duplicate (a relaunched chunk did the item too) is dropped."""
        progress = Progress()
        for result in results:
            for attempt in result.attempts:
                progress += Progress(
                    prompt_tokens=attempt.prompt_tokens,
                    completion_tokens=attempt.completion_tokens,
                    cost=attempt.cost,
                )
        by_item = {r.item_id: r for r in results}
        existing = dict(
            Score.objects.filter(
                run_id=run.pk, item_id__in=by_item, subject=ctx.subjects[0]
            ).values_list("item_id", "launch")
        )
        fresh: list[Result] = []
        redo: list[Result] = []
        for item_id, result in by_item.items():
            if item_id not in existing:
                fresh.append(result)
            elif run.mode != Run.Mode.RESUME and existing[item_id] < run.launch:
                redo.append(result)
            else:
                continue
            progress += Progress(done=int(result.ok), failed=int(not result.ok))
        if fresh:
            JudgeRound.objects.bulk_create(self._rounds(run, fresh), ignore_conflicts=True)
            Score.objects.bulk_create(self._scores(run, fresh), ignore_conflicts=True)
        if redo:
            self._replace(run, redo)
        return progress

    def _replace(self, run: Run, redo: list[Result]) -> None:
        ids = [r.item_id for r in redo]
        rounds = self._rounds(run, redo)
        replaced = {(r.item_id, r.epoch, r.turn, r.round) for r in rounds}
        old = JudgeRound.objects.filter(run_id=run.pk, item_id__in=ids)
        ArchivedRound.objects.bulk_create(
            ArchivedRound.of(r) for r in old if (r.item_id, r.epoch, r.turn, r.round) in replaced
        )
        JudgeRound.objects.bulk_create(
            rounds,
            update_conflicts=True,
            unique_fields=["run", "item", "epoch", "turn", "round"],
            update_fields=list(self.ROUND_FIELDS),
        )
        before = Score.confirmed_judge_values(run.pk, ids)
        Score.objects.bulk_create(
            self._scores(run, redo),
            update_conflicts=True,
            unique_fields=["run", "item", "subject"],
            update_fields=list(self.SCORE_FIELDS),
        )
        Score.rejudged(run.pk, ids, before)

    @staticmethod
    def _rounds(run: Run, results: Iterable[Result]) -> list[JudgeRound]:
        return [
            JudgeRound(
                run_id=run.pk,
                item_id=result.item_id,
                round=o.round,
                epoch=o.epoch,
                turn=o.turn,
                status=JudgeRound.Status.OK if o.ok else JudgeRound.Status.FAILED,
                values=o.values,
                reason=o.reason,
                raw_reply=o.raw_reply,
                prompt_tokens=o.prompt_tokens,
                completion_tokens=o.completion_tokens,
                cost=o.cost,
                latency_ms=o.latency_ms,
                error_kind=o.error_kind,
                error=o.error,
                launch=run.launch,
                repaired=o.repaired,
                confidence=o.confidence,
                reading=o.reading,
            )
            for result in results
            for o in result.data.rounds
        ]

    @staticmethod
    def _scores(run: Run, results: Iterable[Result]) -> list[Score]:
        rows = []
        for result in results:
            outcome: ItemOutcome = result.data
            for subject, score in outcome.scores.items():
                rows.append(
                    Score(
                        run_id=run.pk,
                        item_id=result.item_id,
                        subject=subject,
                        status=score.status,
                        judge_value=score.judge_value,
                        final_value=score.judge_value,
                        round_values=score.round_values,
                        spread=score.spread,
                        epoch_values=score.epoch_values,
                        epoch_spread=score.epoch_spread,
                        turn_values=score.turn_values,
                        error_kind=outcome.error_kind,
                        error=outcome.error,
                        launch=run.launch,
                    )
                )
        return rows

    # -- the command line -----------------------------------------------------------------------
    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--responses",
            required=True,
            help="what to judge: a generation run id, or DATASET:COLUMN (dataset id or name)",
        )
        parser.add_argument("--judge", required=True, help="judge name (in the responses' task)")
        parser.add_argument("--judge-version", type=int, help="default: the latest version")
        parser.add_argument(
            "--endpoint", help="endpoint name (LLM judges; default: the task's judge endpoint)"
        )
        parser.add_argument("--label", default="", help="the model's name on leaderboards")
        parser.add_argument(
            "--logging", choices=[m.value for m in LoggingMode], default=LoggingMode.FAILED.value
        )
        parser.add_argument("--chunk-size", type=int, default=200)
        add_batch_argument(parser)

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        try:
            source_run, dataset, column = parse_responses(options["responses"])
            judge = find_judge(dataset.task_id, options["judge"], options.get("judge_version"))
            endpoint = None
            if options.get("endpoint"):
                endpoint = Endpoint.objects.filter(name=options["endpoint"]).first()
                if endpoint is None:
                    names = ", ".join(Endpoint.objects.values_list("name", flat=True))
                    raise JudgeRunError(
                        f"No endpoint named {options['endpoint']!r} (there are: {names or 'none yet'})."
                    )
            elif judge.uses_llm:
                endpoint = TaskJudging.of(dataset.task_id).default_judge_endpoint
            return create_judge_run(
                judge,
                endpoint=endpoint,
                source_run=source_run,
                dataset=dataset,
                source_column=column,
                user=user,
                label=options.get("label") or "",
                logging_mode=options.get("logging") or LoggingMode.FAILED,
                chunk_size=options.get("chunk_size") or 200,
                batch=bool(options.get("batch")),
                use_cache=options.get("cache"),
                budget_usd=options.get("budget"),
            )
        except JudgeRunError as exc:
            raise CommandError(str(exc)) from None


JUDGE = JudgePlugin()  # named in settings.RUN_KINDS


class CheckPlugin(JudgePlugin):
    """A judge check (`JudgeCheck`): a judge run over a reviewed run's held-out items."""

    kind = Run.Kind.CHECK
    # Made from a judge's page ("Check against reviews"); resume and retry-failed still work.
    startable = False

    def items(self, run: Run) -> QuerySet[Item]:
        return super().items(run).filter(id__in=JudgeCheck.objects.get(run=run).items)


CHECK = CheckPlugin()  # named in settings.RUN_KINDS
