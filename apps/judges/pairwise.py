"""Pairwise runs (#13): a pairwise judge over two or more response sets of one dataset, each
pair of answers to an item judged in both orders, on the shared engine (apps/runs/engine/:
chunks, limits, retries, resume, cancel and logs as for any run).

A unit is (item, pair): key "item:a:b" with a and b generation run ids (`PairwiseSetup.pairs`).
It asks both orders at once (order 0 shows a's answer as "A", order 1 shows b's) and writes
both `Comparison` rows in one transaction, so each (item, pair, order) is judged exactly once
per launch. An item that a response set did not answer fails with `no_response` before any
request. A verdict that flips with the order (A in one order, A again in the other: the same
position, not the same answer) is a position effect, not a preference: the pair's outcome is
a tie, flagged inconsistent (`outcomes`).
"""

import asyncio
from argparse import ArgumentParser
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandError
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q

from apps.datasets.models import Item
from apps.datasets.values import prompt_inputs
from apps.judges.dialogues import Dialogue, transcript_with_answer
from apps.judges.judge_prompts import PromptError, build_pairwise_messages
from apps.judges.judging import multi_turn_transcripts
from apps.judges.launching import JudgeRunError, find_judge, parse_responses
from apps.judges.models import (
    Comparison,
    Judge,
    JudgeRun,
    PairwiseSetup,
    TaskJudging,
    judge_of,
    runs_of,
)
from apps.judges.parsing import JudgeReplyError, parse_pairwise_reply
from apps.runs.engine.budget import check_budget
from apps.runs.engine.contract import (
    Call,
    PlannedRequest,
    Progress,
    Result,
    RunPlugin,
    add_batch_argument,
)
from apps.runs.engine.errors import RAW_LIMIT, LLMError
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Attempt
from apps.runs.estimate import Estimate, estimate, evenly_spaced
from apps.runs.models import Endpoint, ErrorKind, LoggingMode, Response, Run, set_names

ORDERS = (0, 1)


def unit_key(item_id: int, a: int, b: int) -> str:
    return f"{item_id}:{a}:{b}"


def parse_key(key: str) -> tuple[int, int, int]:
    item, a, b = (int(part) for part in key.split(":"))
    return item, a, b


@dataclass
class PairwiseContext:
    system_prompt: str
    user_prompt: str
    input_columns: list[str] | None
    hidden_columns: set[str]
    limit: int = 1
    _requests: asyncio.Semaphore | None = None

    @property
    def requests(self) -> asyncio.Semaphore:
        if self._requests is None:
            self._requests = asyncio.Semaphore(self.limit)
        return self._requests


@dataclass(slots=True)
class PairUnit:
    key: str
    item_id: int
    a: int
    b: int
    messages: dict[int, list[dict[str, str]]] = field(default_factory=dict)  # per order
    error_kind: str = ""
    error: str = ""


@dataclass(slots=True)
class OrderOutcome:
    order: int
    ok: bool
    shown: str = ""
    verdict: str = ""
    repaired: bool = False
    reason: str = ""
    raw_reply: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: int = 0
    error_kind: str = ""
    error: str = ""


def normalise(shown: str, order: int) -> str:
    """The verdict for the pair (a, b) from what the judge said about the shown order."""
    if shown == "tie":
        return Comparison.Verdict.TIE
    first = Comparison.Verdict.A if order == 0 else Comparison.Verdict.B
    second = Comparison.Verdict.B if order == 0 else Comparison.Verdict.A
    return first if shown == "A" else second


class PairwisePlugin(RunPlugin):
    kind = Run.Kind.PAIRWISE

    @staticmethod
    def _pairs(run: Run) -> list[tuple[int, int]]:
        return run.pairwise.pairs()

    def total(self, run: Run) -> int:
        return Item.objects.filter(dataset_id=run.dataset_id).count() * len(self._pairs(run))

    def _rows(self, run: Run) -> dict[tuple[int, int, int], list[tuple[str, int]]]:
        """(item, a, b) → [(status, launch)] of its comparisons so far."""
        rows: dict[tuple[int, int, int], list[tuple[str, int]]] = {}
        for item, a, b, status, done_in in Comparison.objects.filter(run=run).values_list(
            "item_id", "a_run_id", "b_run_id", "status", "launch"
        ):
            rows.setdefault((item, a, b), []).append((status, done_in))
        return rows

    @staticmethod
    def _is_pending(run: Run, mode: str, found: list[tuple[str, int]] | None) -> bool:
        """Whether this launch must (re)do a unit with these comparisons (status, launch)."""
        if not found or len(found) < len(ORDERS):
            # Never judged (or half, which persist never leaves): resume and overwrite do it;
            # retry failed only redoes what failed.
            return mode != Run.Mode.RETRY_FAILED
        if mode == Run.Mode.OVERWRITE:
            return any(done_in < run.launch for _, done_in in found)
        if mode == Run.Mode.RETRY_FAILED:
            return any(s == Comparison.Status.FAILED and d < run.launch for s, d in found)
        return False

    def pending_keys(self, run: Run, mode: str) -> list[str]:
        rows = self._rows(run)
        ids = Item.objects.filter(dataset_id=run.dataset_id).order_by("position")
        return [
            unit_key(item, a, b)
            for item in ids.values_list("pk", flat=True)
            for a, b in self._pairs(run)
            if self._is_pending(run, mode, rows.get((item, a, b)))
        ]

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]:
        pending = set(self.pending_keys(run, mode))
        done = failed = 0
        for (item, a, b), found in self._rows(run).items():
            if unit_key(item, a, b) in pending or len(found) < len(ORDERS):
                continue
            if all(status == Comparison.Status.OK for status, _ in found):
                done += 1
            else:
                failed += 1
        return done, failed

    def lanes(self, run: Run) -> int:
        return run.endpoint.concurrency_limit if run.endpoint is not None else 1

    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        ids = list(
            Item.objects.filter(dataset_id=run.dataset_id)
            .order_by("position")
            .values_list("id", flat=True)
        )
        pairs = self._pairs(run)
        chosen = evenly_spaced(ids, max(1, n // max(1, len(pairs))))
        return [unit_key(item, a, b) for item in chosen for a, b in pairs], len(ids) * len(pairs)

    def planned_requests(self, run: Run, ctx: Any, unit: PairUnit) -> list[PlannedRequest]:
        if unit.error:
            return []
        return [PlannedRequest(unit.messages[order], {}, round=order) for order in ORDERS]

    def prepare(self, run: Run) -> PairwiseContext:
        judge = judge_of(run)
        dataset = run.dataset
        return PairwiseContext(
            system_prompt=judge.system_prompt,
            user_prompt=judge.user_prompt,
            input_columns=dataset.input_columns or None,
            hidden_columns=dataset.hidden_columns,
            limit=run.endpoint.concurrency_limit if run.endpoint is not None else 1,
        )

    def load_units(self, run: Run, ctx: PairwiseContext, keys: list[str]) -> list[PairUnit]:
        wanted = [parse_key(key) for key in keys]
        item_ids = {item for item, _, _ in wanted}
        items: dict[int, dict[str, Any]] = {
            row["id"]: dict(row)
            for row in Item.objects.filter(id__in=item_ids).values(
                "id", "fields", "reference", "conversation", "turn_references"
            )
        }
        transcripts = multi_turn_transcripts(
            {r for _, a, b in wanted for r in (a, b)},
            {item_id: row["conversation"] or [] for item_id, row in items.items()},
        )
        texts = {
            (item, source): (status, text)
            for item, source, status, text in Response.objects.filter(
                item_id__in=item_ids, run_id__in={r for _, a, b in wanted for r in (a, b)}, epoch=0
            ).values_list("item_id", "run_id", "status", "text")
        }
        names = {run.pk: run.title for run in run.pairwise.responses.with_names()}
        units = []
        for item_id, a, b in wanted:
            unit = PairUnit(unit_key(item_id, a, b), item_id, a, b)
            answers = []
            dialogues = []
            for source in (a, b):
                status, text = texts.get((item_id, source), (None, ""))
                if status != Response.Status.OK:
                    unit.error_kind = ErrorKind.NO_RESPONSE
                    unit.error = (
                        f"Nothing to compare: #{source} {names.get(source, '')} has no answer "
                        "to this item."
                    )
                answers.append(text)
                dialogues.append(
                    self._dialogue(items[item_id], text, transcripts.get((source, item_id, 0)))
                )
            if not unit.error:
                self._messages(ctx, unit, items[item_id], answers, dialogues)
            units.append(unit)
        return units

    @staticmethod
    def _dialogue(
        row: dict[str, Any], text: str, transcript: list[dict[str, Any]] | None
    ) -> Dialogue | None:
        """A side's dialogue: a multi-turn run's transcript, or its answer after the item's
        conversation; None for a plain item (its prompt is the single-answer one)."""
        references = list(row["turn_references"] or [])
        if transcript:
            return Dialogue.of(transcript, references)
        if row["conversation"]:
            return Dialogue.of(transcript_with_answer(row["conversation"], text), references)
        return None

    @staticmethod
    def _messages(
        ctx: PairwiseContext,
        unit: PairUnit,
        row: dict[str, Any],
        answers: list[str],
        dialogues: list[Dialogue | None],
    ) -> None:
        fields = row["fields"] or {}
        inputs = prompt_inputs(fields, ctx.input_columns, ctx.hidden_columns)
        for order in ORDERS:
            first, second = answers if order == 0 else answers[::-1]
            dialogue_a, dialogue_b = dialogues if order == 0 else dialogues[::-1]
            try:
                unit.messages[order] = build_pairwise_messages(
                    dialogue_a=dialogue_a,
                    dialogue_b=dialogue_b,
                    response_a=first,
                    response_b=second,
                    reference=row["reference"] or "",
                    fields=fields,
                    inputs=inputs,
                    system_prompt=ctx.system_prompt,
                    user_prompt=ctx.user_prompt,
                )
            except PromptError as exc:
                unit.error_kind, unit.error = ErrorKind.TEMPLATE, str(exc)
                return

    async def perform(self, run: Run, ctx: Any, unit: PairUnit, call: Call) -> Result:
        if unit.error:
            call.record(
                Attempt(
                    item_id=unit.item_id,
                    attempt=1,
                    ok=False,
                    request_messages=[],
                    error_kind=unit.error_kind,
                    error=unit.error,
                )
            )
            return self.failed_result(run, ctx, unit, unit.error_kind, unit.error)
        tasks = [asyncio.create_task(self._ask(ctx, unit, order, call)) for order in ORDERS]
        try:
            outcomes = list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return Result(unit.key, unit.item_id, all(o.ok for o in outcomes), data=outcomes)

    async def _ask(
        self, ctx: PairwiseContext, unit: PairUnit, order: int, call: Call
    ) -> OrderOutcome:
        try:
            async with ctx.requests:
                reply = await call.chat(unit.messages[order], round=order)
        except LLMError as exc:
            if exc.fatal:
                raise
            return OrderOutcome(
                order, False, raw_reply=exc.raw[:RAW_LIMIT], error_kind=exc.kind, error=exc.message
            )
        usage: dict[str, Any] = {
            "raw_reply": reply.text[:RAW_LIMIT],
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost": reply.cost,
            "latency_ms": reply.latency_ms,
        }
        try:
            found = parse_pairwise_reply(reply.text)
        except JudgeReplyError as exc:
            for attempt in reversed(call.log):
                if attempt.round == order and attempt.ok:
                    attempt.ok, attempt.error_kind, attempt.error = False, exc.kind, exc.message
                    break
            return OrderOutcome(order, False, error_kind=exc.kind, error=exc.message, **usage)
        return OrderOutcome(
            order,
            True,
            shown=found.verdict,
            verdict=normalise(found.verdict, order),
            repaired=found.repaired,
            reason=found.reason,
            **usage,
        )

    def failed_result(
        self, run: Run, ctx: Any, unit: PairUnit, error_kind: str, message: str
    ) -> Result:
        outcomes = [OrderOutcome(o, False, error_kind=error_kind, error=message) for o in ORDERS]
        return Result(unit.key, unit.item_id, False, data=outcomes)

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress:
        """Both orders of each unit once per launch; a duplicate (a relaunched chunk) is dropped."""
        progress = Progress()
        for result in results:
            for attempt in result.attempts:
                progress += Progress(
                    prompt_tokens=attempt.prompt_tokens,
                    completion_tokens=attempt.completion_tokens,
                    cost=attempt.cost,
                )
        keys = {parse_key(r.key): r for r in results}
        existing = {
            (item, a, b): done_in
            for item, a, b, done_in in Comparison.objects.filter(
                run=run, item_id__in={k[0] for k in keys}
            ).values_list("item_id", "a_run_id", "b_run_id", "launch")
        }
        rows = []
        for (item, a, b), result in keys.items():
            if (item, a, b) in existing and (
                run.mode == Run.Mode.RESUME or existing[(item, a, b)] >= run.launch
            ):
                continue
            progress += Progress(done=int(result.ok), failed=int(not result.ok))
            rows += [
                Comparison(
                    run_id=run.pk,
                    item_id=item,
                    a_run_id=a,
                    b_run_id=b,
                    order=o.order,
                    status=Comparison.Status.OK if o.ok else Comparison.Status.FAILED,
                    shown=o.shown,
                    verdict=o.verdict,
                    repaired=o.repaired,
                    reason=o.reason,
                    raw_reply=o.raw_reply,
                    prompt_tokens=o.prompt_tokens,
                    completion_tokens=o.completion_tokens,
                    cost=o.cost,
                    latency_ms=o.latency_ms,
                    error_kind=o.error_kind,
                    error=o.error,
                    launch=run.launch,
                )
                for o in result.data
            ]
        if rows:
            Comparison.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["run", "item", "a_run", "b_run", "order"],
                update_fields=list(Comparison.RESULT_FIELDS),
            )
        return progress

    # -- the command line -----------------------------------------------------------------------
    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--responses",
            action="append",
            required=True,
            help="a response set to compare, two or more: a generation run (id or label) or "
            "a response column of a dataset (DATASET:COLUMN)",
        )
        parser.add_argument("--judge", required=True, help="a pairwise judge of the task")
        parser.add_argument("--judge-version", type=int, help="default: the latest version")
        parser.add_argument("--baseline", help="compare each with this one (as --responses)")
        parser.add_argument("--endpoint", help="default: the task's judge endpoint")
        parser.add_argument(
            "--logging", choices=[m.value for m in LoggingMode], default=LoggingMode.FAILED.value
        )
        parser.add_argument("--chunk-size", type=int, default=100)
        add_batch_argument(parser)

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        try:
            with transaction.atomic():  # a response column read for nothing is not kept
                return self._create(options, user)
        except JudgeRunError as exc:
            raise CommandError(str(exc)) from None

    @staticmethod
    def _create(options: dict[str, Any], user: Any) -> Run:
        runs = [find_responses(value) for value in options["responses"]]
        task_id = runs[0].task_id
        judge = find_judge(task_id, options["judge"], options.get("judge_version"))
        baseline = find_responses(options["baseline"]) if options.get("baseline") else None
        if options.get("endpoint"):
            endpoint = Endpoint.objects.filter(name=options["endpoint"]).first()
            if endpoint is None:
                raise JudgeRunError(f"No endpoint named {options['endpoint']!r}.")
        else:
            endpoint = TaskJudging.of(task_id).default_judge_endpoint
        return create_pairwise_run(
            judge,
            runs,
            endpoint=endpoint,
            baseline=baseline,
            user=user,
            logging_mode=options.get("logging") or LoggingMode.FAILED,
            chunk_size=options.get("chunk_size") or 100,
            batch=bool(options.get("batch")),
            use_cache=options.get("cache"),
            budget_usd=options.get("budget"),
        )


def find_responses(value: str) -> Run:
    """A response set by reference: "run:ID" or "column:DATASET:COLUMN" (the start form's
    values), a run id or label, or DATASET:COLUMN (a dataset id or name: its latest version)."""
    value = value.strip()
    prefix, _, rest = value.partition(":")
    if (prefix == "run" and rest.isdigit()) or (prefix == "column" and ":" in rest):
        value = rest
    if value.isdigit():
        found = Run.objects.response_sets().filter(pk=int(value)).first()
        if found is None:
            raise JudgeRunError(f"No generation run or response column #{value}.")
        return found
    matches = list(Run.objects.generation().filter(label=value)[:2])
    if len(matches) > 1:
        raise JudgeRunError(f"Two generation runs are labelled {value!r}: give the run id.")
    if matches:
        return matches[0]
    if ":" not in value:
        raise JudgeRunError(
            f"No generation run {value!r}: give a run's id or label, or DATASET:COLUMN for a "
            "response column of a dataset."
        )
    _, dataset, column = parse_responses(value)
    try:
        return Run.objects.for_column(dataset, column)
    except ValueError as exc:
        raise JudgeRunError(str(exc)) from None


def create_pairwise_run(judge: Judge, runs: list[Run], **options: Any) -> Run:
    """A pairwise run over these response sets (see `new_pairwise_run`), launched when the
    transaction commits."""
    with transaction.atomic():
        run = new_pairwise_run(judge, runs, **options)
        launch(run, Run.Mode.RESUME)
    return run


def new_pairwise_run(
    judge: Judge,
    runs: list[Run],
    *,
    endpoint: Endpoint | None,
    baseline: Run | None = None,
    user: Any = None,
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 100,
    batch: bool = False,
    use_cache: bool | None = None,
    budget_usd: Any = None,
) -> Run:
    """A pairwise run over these response sets, not launched; `batch` sends its requests
    through the provider's Batch API (apps.runs.engine.batch)."""
    if judge.kind != Judge.Kind.PAIRWISE:
        raise JudgeRunError(f"{judge} is not a pairwise judge.")
    unique = {run.pk: run for run in runs}
    if baseline is not None:
        unique.setdefault(baseline.pk, baseline)
    if len(unique) < 2:
        raise JudgeRunError("Compare two response sets or more.")
    datasets = {run.dataset_id for run in unique.values()}
    if len(datasets) != 1:
        raise JudgeRunError("The response sets answer different datasets: compare like with like.")
    if any(run.task_id != judge.task_id for run in unique.values()):
        raise JudgeRunError("The judge belongs to another task than the responses.")
    if endpoint is None:
        raise JudgeRunError(f"{judge} is an LLM judge: choose the endpoint that judges.")
    if batch and (refusal := endpoint.batch_refusal()):
        raise JudgeRunError(refusal)
    try:
        budget = check_budget(budget_usd, endpoint)
    except ValueError as exc:
        raise JudgeRunError(str(exc)) from None
    if batch and budget is not None:
        raise JudgeRunError("A budget cannot stop a batch: leave one of them out.")
    first = next(iter(unique.values()))
    labels = " vs ".join(run.label or f"run #{run.pk}" for run in unique.values())
    with transaction.atomic():
        run = JudgeRun.create_with(
            judge,
            task_id=judge.task_id,
            kind=Run.Kind.PAIRWISE,
            dataset_id=first.dataset_id,
            endpoint=endpoint,
            label=f"{judge} on {labels}"[:200],
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            batch=batch,
            use_cache=use_cache is not False,
            budget_usd=budget,
            created_by=user if getattr(user, "pk", None) else None,
        )
        setup = PairwiseSetup.objects.create(run=run, baseline=baseline)
        setup.responses.set(list(unique.values()))
    return run


def start_pairwise_run(judge: Judge, sources: list[str], baseline: str = "", **options: Any) -> Run:
    """A pairwise run over response sets given by reference (see `find_responses`); a response
    column read for a run that cannot be made is not kept."""
    with transaction.atomic():
        runs = [find_responses(source) for source in sources]
        chosen = find_responses(baseline) if baseline else None
        return create_pairwise_run(judge, runs, baseline=chosen, **options)


def estimate_pairwise_run(
    judge: Judge, sources: list[str], baseline: str = "", **options: Any
) -> Estimate:
    """What the pairwise run `start_pairwise_run` would make costs, without making it: a
    pairwise run's units need its setup in the database, so the rows (and any response column
    read for it) are made in a transaction that is rolled back, and nothing is launched."""
    with transaction.atomic():
        runs = [find_responses(source) for source in sources]
        chosen = find_responses(baseline) if baseline else None
        found = estimate(new_pairwise_run(judge, runs, baseline=chosen, **options))
        transaction.set_rollback(True)
    return found


# ---- what the comparisons say ----------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    item_id: int
    a: int
    b: int
    verdict: str  # a, b or tie (a flip between orders is a tie)
    consistent: bool


def outcomes(run: Run) -> list[Outcome]:
    """Each (item, pair) judged in both orders, its outcome and whether the orders agreed."""
    by_unit: dict[tuple[int, int, int], dict[int, str]] = {}
    ok = Comparison.objects.filter(run=run, status=Comparison.Status.OK)
    for item, a, b, order, verdict in ok.values_list(
        "item_id", "a_run_id", "b_run_id", "order", "verdict"
    ):
        by_unit.setdefault((item, a, b), {})[order] = verdict
    found = []
    for (item, a, b), verdicts in sorted(by_unit.items()):
        if len(verdicts) < len(ORDERS):
            continue
        same = verdicts[0] == verdicts[1]
        found.append(Outcome(item, a, b, verdicts[0] if same else Comparison.Verdict.TIE, same))
    return found


# ---- a pairwise run's comparisons, a unit per line (its page) -------------------------------------
UNIT_FILTERS = {"": "All", "failed": "Failed", "flipped": "Flipped with the order", "ok": "Judged"}


@dataclass
class UnitLine:
    """One (item, pair) of a pairwise run: both orders side by side."""

    first: Comparison  # order 0: a shown as "A"
    second: Comparison | None  # order 1: b shown as "A"
    a_name: str
    b_name: str

    @property
    def failed(self) -> bool:
        return any(c.status == Comparison.Status.FAILED for c in self.orders)

    @property
    def orders(self) -> list[Comparison]:
        return [c for c in (self.first, self.second) if c is not None]

    @property
    def outcome(self) -> str:
        """Who won the pair, "tie", "flipped (tie)" or "" while an order is missing/failed."""
        if self.failed or self.second is None:
            return ""
        if self.first.verdict != self.second.verdict:
            return "flipped (tie)"
        names: dict[str, str] = {"a": self.a_name, "b": self.b_name}
        return names.get(self.first.verdict, "tie")


def unit_lines(run: Run, which: str = "") -> Any:
    """The run's first-order comparisons (one per unit) matching a filter of UNIT_FILTERS, as
    a queryset to page; `lines` turns a page of them into UnitLines."""
    first = Comparison.objects.filter(run=run, order=0).select_related("item")
    other = Comparison.objects.filter(
        run=run,
        order=1,
        item_id=OuterRef("item_id"),
        a_run_id=OuterRef("a_run_id"),
        b_run_id=OuterRef("b_run_id"),
    )
    if which == "failed":
        first = first.filter(
            Q(status=Comparison.Status.FAILED) | Exists(other.filter(status="failed"))
        )
    elif which in ("ok", "flipped"):
        first = first.filter(status=Comparison.Status.OK).filter(
            Exists(other.filter(status=Comparison.Status.OK))
        )
        if which == "flipped":
            first = first.filter(Exists(other.exclude(verdict=OuterRef("verdict"))))
    return first.order_by("item__position", "a_run_id", "b_run_id")


def lines(run: Run, page: list[Comparison]) -> list[UnitLine]:
    seconds = {
        (c.item_id, c.a_run_id, c.b_run_id): c
        for c in Comparison.objects.filter(run=run, order=1, item_id__in={c.item_id for c in page})
    }
    names = set_names(list(run.pairwise.responses.all()))
    return [
        UnitLine(
            c,
            seconds.get((c.item_id, c.a_run_id, c.b_run_id)),
            names.get(c.a_run_id, f"run #{c.a_run_id}"),
            names.get(c.b_run_id, f"run #{c.b_run_id}"),
        )
        for c in page
    ]


@dataclass(frozen=True)
class Consistency:
    pairs: int  # judged in both orders
    consistent: int
    first_preferred: int  # verdicts (of either order) for the answer shown first
    decided: int  # verdicts that were not a tie

    @property
    def rate(self) -> float | None:
        return self.consistent / self.pairs if self.pairs else None

    @property
    def first_share(self) -> float | None:
        return self.first_preferred / self.decided if self.decided else None


def consistency(judge: Judge) -> Consistency:
    """The judge version's position consistency over all its pairwise runs, and how often a
    decided verdict went to the answer shown first."""
    runs = runs_of(judge).filter(kind=Run.Kind.PAIRWISE)
    pairs = consistent = 0
    for run in runs:
        found = outcomes(run)
        pairs += len(found)
        consistent += sum(o.consistent for o in found)
    said = Comparison.objects.filter(run__in=runs, status=Comparison.Status.OK).aggregate(
        first=Count("pk", filter=Q(shown="A")),
        decided=Count("pk", filter=~Q(shown="tie")),
    )
    return Consistency(pairs, consistent, said["first"], said["decided"])


PAIRWISE = PairwisePlugin()  # named in settings.RUN_KINDS
