"""Generation runs: dataset × endpoint × template version → one Response per item and epoch.

A multi-turn run (`Run.multi_turn`, over conversation items) asks each user turn of an item in
order, with the model's own earlier answers in context (apps/runs/turns.py). The unit is still
(item, epoch); each turn is committed as it finishes (a `runs.Turn` row, through `Call.emit`),
so a worker killed mid-item loses at most the turn in flight, and whoever takes the unit on
(the reaper's next chunk, a resume, retry failed) asks from the first turn without an answer.
A failed turn fails the item, naming the turn; later turns are not asked. The Response is
written with the unit's last result: the whole item, its text the last answer.
"""

from argparse import ArgumentParser
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from apps.datasets.models import Dataset, Item
from apps.runs.engine.budget import check_budget
from apps.runs.engine.contract import (
    Call,
    PlannedRequest,
    Progress,
    Result,
    RunPlugin,
    add_batch_argument,
)
from apps.runs.engine.errors import LLMError
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Reply
from apps.runs.estimate import answer_stand_in, cached_answer, evenly_spaced
from apps.runs.models import (
    Endpoint,
    ErrorKind,
    LoggingMode,
    PromptTemplate,
    Response,
    Run,
    Turn,
)
from apps.runs.prompts import ItemData, PromptError, PromptRenderer
from apps.runs.response_schema import clean_schema
from apps.runs.turns import turn_failure, turn_totals, user_turns


@dataclass(slots=True)
class GenerationUnit:
    key: str
    item_id: int
    epoch: int
    messages: list[dict[str, str]]
    error: str = ""  # the template could not be rendered for this item
    # Each epoch its own seed where the endpoint has one (its seed + epoch): samples differ,
    # and the run asked again asks the same.
    seed: int | None = None


@dataclass(slots=True)
class Failure:
    error_kind: str
    message: str
    attempts: int = 0


@dataclass(slots=True)
class TurnUnit:
    """An (item, epoch) of a multi-turn run: the turns it asks, and those answered already."""

    key: str
    item_id: int
    epoch: int
    item: ItemData
    asked: list[str]  # each user turn's text
    answers: list[str]  # the first turns' answers, from an earlier launch or a dead chunk
    seed: int | None = None
    error: str = ""  # the unit cannot be asked at all (no conversation)


@dataclass(slots=True)
class TurnOutcome:
    """A finished turn, handed to `persist` as a partial result (`Call.emit`)."""

    epoch: int
    number: int
    asked: str
    reply: Reply | None = None
    failure: Failure | None = None


def unit_key(item_id: int, epoch: int) -> str:
    """A unit of a generation run: the item id for the first epoch (a run of one epoch has
    only these), "item:epoch" for the others."""
    return f"{item_id}:{epoch}" if epoch else str(item_id)


def parse_unit_key(key: str) -> tuple[int, int]:
    item, _, epoch = key.partition(":")
    return int(item), int(epoch or 0)


def _pending_filter(run: Run, mode: str) -> Q:
    """Responses that this launch must (re)do; resume has none (it works on missing rows)."""
    if mode == Run.Mode.RETRY_FAILED:
        return Q(status=Response.Status.FAILED, launch__lt=run.launch)
    if mode == Run.Mode.OVERWRITE:
        return Q(launch__lt=run.launch)
    return Q(pk__in=[])


class GenerationPlugin(RunPlugin):
    """Units are (item, epoch): every item is answered `Run.epochs` times."""

    kind = Run.Kind.GENERATION

    def total(self, run: Run) -> int:
        return Item.objects.filter(dataset_id=run.dataset_id).count() * run.epochs

    @staticmethod
    def _responses(run: Run) -> QuerySet[Response]:
        return Response.objects.filter(run=run, epoch__lt=run.epochs)

    def pending_keys(self, run: Run, mode: str) -> list[str]:
        return self._pending(run, mode)

    def unsettled_keys(self, run: Run, keys: list[str]) -> list[str]:
        # Keys handed back from a dead chunk: only their items are read, not the whole run's
        # (at a million items, listing every pending key took seconds per handed-back batch).
        pending = set(self._pending(run, run.mode, {parse_unit_key(key)[0] for key in keys}))
        return [key for key in keys if key in pending]

    def _pending(self, run: Run, mode: str, item_ids: set[int] | None = None) -> list[str]:
        """The launch's pending keys, of the items `item_ids` only when given."""
        responses = self._responses(run)
        ids = Item.objects.filter(dataset_id=run.dataset_id).order_by("position")
        if item_ids is not None:
            responses = responses.filter(item_id__in=item_ids)
            ids = ids.filter(id__in=item_ids)
        if mode == Run.Mode.RETRY_FAILED:
            redo = responses.filter(_pending_filter(run, mode))
            todo = set(redo.values_list("item_id", "epoch"))
            skip: set[tuple[int, int]] = set()
        elif mode == Run.Mode.OVERWRITE:
            todo = None
            skip = set(responses.filter(launch__gte=run.launch).values_list("item_id", "epoch"))
        else:
            todo = None
            skip = set(responses.values_list("item_id", "epoch"))
        keys = []
        for item_id in ids.values_list("id", flat=True).iterator(chunk_size=10000):
            for epoch in range(run.epochs):
                pair = (item_id, epoch)
                if (todo is None or pair in todo) and pair not in skip:
                    keys.append(unit_key(item_id, epoch))
        return keys

    def pending_count(self, run: Run, mode: str) -> int:
        responses = self._responses(run)
        missing = self.total(run) - responses.count()
        if mode == Run.Mode.RESUME:
            return missing
        redo = responses.filter(_pending_filter(run, mode)).count()
        # retry_failed leaves units that never got a response alone (resume is for those).
        return redo + (missing if mode == Run.Mode.OVERWRITE else 0)

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]:
        rows = self._responses(run).exclude(_pending_filter(run, mode))
        counts = rows.aggregate(
            done=Count("pk", filter=Q(status=Response.Status.OK)),
            failed=Count("pk", filter=Q(status=Response.Status.FAILED)),
        )
        return counts["done"], counts["failed"]

    def prepare(self, run: Run) -> PromptRenderer:
        return PromptRenderer.for_template(run.template, item_dataset_id=run.dataset_id)

    def load_units(self, run: Run, ctx: PromptRenderer, keys: list[str]) -> list[Any]:
        if run.multi_turn:
            return self._turn_units(run, keys)
        pairs = [parse_unit_key(key) for key in keys]
        rows = Item.objects.filter(id__in={item for item, _ in pairs}).values(*ItemData.VALUES)
        rendered: dict[int, tuple[list[dict[str, str]], str]] = {}
        for row in rows:
            item = ItemData.from_values(row)
            try:
                rendered[item.id] = (ctx.render(item).messages, "")
            except PromptError as exc:
                rendered[item.id] = ([], str(exc))
        seed = run.endpoint.seed if run.endpoint is not None else None
        return [
            GenerationUnit(
                unit_key(item_id, epoch),
                item_id,
                epoch,
                *rendered[item_id],
                seed=None if seed is None else seed + epoch,
            )
            for item_id, epoch in pairs
            if item_id in rendered
        ]

    def _turn_units(self, run: Run, keys: list[str]) -> list[TurnUnit]:
        """Multi-turn units, each with the turns already answered in a row from turn 1 (an
        overwrite asks everything again: only this launch's answers count)."""
        pairs = [parse_unit_key(key) for key in keys]
        ids = {item for item, _ in pairs}
        items = {
            row["id"]: ItemData.from_values(row)
            for row in Item.objects.filter(id__in=ids).values(*ItemData.VALUES)
        }
        done: dict[tuple[int, int], dict[int, str]] = {}
        rows = Turn.objects.filter(run_id=run.pk, item_id__in=ids).answered()
        if run.mode == Run.Mode.OVERWRITE:
            rows = rows.filter(launch__gte=run.launch)
        if run.pk is None:  # an unsaved run (the start form's estimate) has answered nothing
            rows = rows.none()
        for item_id, epoch, number, text in rows.values_list("item_id", "epoch", "number", "text"):
            done.setdefault((item_id, epoch), {})[number] = text
        seed = run.endpoint.seed if run.endpoint is not None else None
        units = []
        for item_id, epoch in pairs:
            item = items.get(item_id)
            if item is None:
                continue
            answered = done.get((item_id, epoch), {})
            answers: list[str] = []
            while len(answers) + 1 in answered:
                answers.append(answered[len(answers) + 1])
            asked = user_turns(item.conversation)
            error = "" if asked else f"Item {item.key} has no conversation to ask turn by turn."
            units.append(
                TurnUnit(
                    unit_key(item_id, epoch),
                    item_id,
                    epoch,
                    item,
                    asked,
                    answers[: len(asked)],
                    seed=None if seed is None else seed + epoch,
                    error=error,
                )
            )
        return units

    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        ids = list(
            Item.objects.filter(dataset_id=run.dataset_id)
            .order_by("position")
            .values_list("id", flat=True)
        )
        chosen = evenly_spaced(ids, max(1, n // run.epochs))
        keys = [unit_key(item_id, epoch) for item_id in chosen for epoch in range(run.epochs)]
        return keys, len(ids) * run.epochs

    def planned_requests(self, run: Run, ctx: Any, unit: Any) -> list[PlannedRequest]:
        if unit.error:
            return []
        params = {"seed": unit.seed} if unit.seed is not None else {}
        if isinstance(unit, TurnUnit):
            # Each turn's request with the answers before it in context: the cached reply
            # where the turn before is cached (the run would get it back), else a stand-in as
            # long as the reply is counted (apps.runs.estimate).
            planned = []
            answers = list(unit.answers)
            stand_in = answer_stand_in(run, params)
            known = True
            for number in range(len(unit.answers) + 1, len(unit.asked) + 1):
                try:
                    messages = ctx.render(unit.item, turn=number, answers=answers).messages
                except PromptError:
                    break
                planned.append(PlannedRequest(messages, params, epoch=unit.epoch))
                hit = cached_answer(run, messages, params, unit.epoch) if known else None
                known = hit is not None
                answers.append(stand_in if hit is None else hit)
            return planned
        return [PlannedRequest(unit.messages, params, epoch=unit.epoch)]

    async def perform(self, run: Run, ctx: Any, unit: Any, call: Call) -> Result:
        if unit.error:
            return self.failed_result(run, ctx, unit, ErrorKind.TEMPLATE, unit.error)
        if isinstance(unit, TurnUnit):
            return await self._perform_turns(ctx, unit, call)
        params = {"seed": unit.seed} if unit.seed is not None else {}
        # No database here (async): everything comes in the unit. LLMError: the engine
        # records the failure.
        reply = await call.chat(unit.messages, epoch=unit.epoch, **params)
        return Result(unit.key, unit.item_id, True, data=reply)

    async def _perform_turns(self, ctx: PromptRenderer, unit: TurnUnit, call: Call) -> Result:
        """Ask the unit's turns from the first without an answer, each with the answers before
        it in context; each turn is committed as it finishes (`Call.emit`)."""
        params = {"seed": unit.seed} if unit.seed is not None else {}
        answers = list(unit.answers)
        total = len(unit.asked)
        for number in range(len(answers) + 1, total + 1):
            asked = unit.asked[number - 1]
            try:
                messages = ctx.render(unit.item, turn=number, answers=answers).messages
                reply = await call.chat(messages, epoch=unit.epoch, **params)
            except (LLMError, PromptError) as exc:
                if isinstance(exc, LLMError) and exc.fatal:
                    raise
                kind = exc.kind if isinstance(exc, LLMError) else ErrorKind.TEMPLATE
                message = exc.message if isinstance(exc, LLMError) else str(exc)
                failure = Failure(kind, message, attempts=len(call.rest()))
                call.emit(
                    unit.key, TurnOutcome(unit.epoch, number, asked, failure=failure), ok=False
                )
                failed = Failure(kind, turn_failure(number, total, message))
                return Result(unit.key, unit.item_id, False, data=failed)
            answers.append(reply.text)
            call.emit(unit.key, TurnOutcome(unit.epoch, number, asked, reply=reply))
        return Result(unit.key, unit.item_id, True, data=None)

    def batch_turn(self, unit: Any) -> int | None:
        # One batch per turn: turn n + 1 is asked with the answers to turns 1…n in context.
        return len(unit.answers) if isinstance(unit, TurnUnit) else None

    def failed_result(self, run: Run, ctx: Any, unit: Any, error_kind: str, message: str) -> Result:
        return Result(unit.key, unit.item_id, False, data=Failure(error_kind, message))

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress:
        """Write each unit's response exactly once per launch; count what was really written."""
        if run.multi_turn:
            return self._persist_turns(run, results)
        progress = Progress()
        by_unit = {parse_unit_key(r.key): r for r in results}
        existing = {
            (item_id, epoch): launch
            for item_id, epoch, launch in Response.objects.filter(
                run=run, item_id__in={item for item, _ in by_unit}
            ).values_list("item_id", "epoch", "launch")
        }
        fresh: list[Response] = []
        redo: list[Response] = []
        for (item_id, epoch), result in by_unit.items():
            if (item_id, epoch) not in existing:
                target = fresh
            elif run.mode != Run.Mode.RESUME and existing[(item_id, epoch)] < run.launch:
                target = redo
            else:
                continue  # a duplicate (a relaunched chunk did it too): the first one stays
            row = self._row(run, result, epoch)
            target.append(row)
            ok = row.status == Response.Status.OK
            progress += Progress(done=int(ok), failed=int(not ok))
        for result in results:
            for attempt in result.attempts:
                progress += Progress(
                    prompt_tokens=attempt.prompt_tokens,
                    completion_tokens=attempt.completion_tokens,
                    cost=attempt.cost,
                )
        if fresh:
            Response.objects.bulk_create(fresh, ignore_conflicts=True)
        if redo:
            Response.objects.bulk_create(
                redo,
                update_conflicts=True,
                unique_fields=["run", "item", "epoch"],
                update_fields=[*RESULT_FIELDS, "launch", "updated_at"],
            )
        return progress

    def _persist_turns(self, run: Run, results: list[Result]) -> Progress:
        """The turns first (each at most once, unless asked again after failing or by an
        overwrite), then the Responses of the units that ended, summed from their turns."""
        progress = Progress()
        for result in results:
            for attempt in result.attempts:
                progress += Progress(
                    prompt_tokens=attempt.prompt_tokens,
                    completion_tokens=attempt.completion_tokens,
                    cost=attempt.cost,
                )
        parts = [r for r in results if r.partial]
        ends = [r for r in results if not r.partial]
        ids = {r.item_id for r in results}
        save_turns(run, [_turn_row(run, p.item_id, p.data, p.attempts) for p in parts])
        if not ends:
            return progress
        units = {(r.item_id, parse_unit_key(r.key)[1]): r for r in ends}
        turns: dict[tuple[int, int], list[Turn]] = {}
        for turn in Turn.objects.filter(run=run, item_id__in=ids).order_by("number"):
            turns.setdefault((turn.item_id, turn.epoch), []).append(turn)
        existing = {
            (item_id, epoch): launch
            for item_id, epoch, launch in Response.objects.filter(
                run=run, item_id__in=ids
            ).values_list("item_id", "epoch", "launch")
        }
        fresh: list[Response] = []
        redo: list[Response] = []
        for (item_id, epoch), result in units.items():
            if (item_id, epoch) not in existing:
                target = fresh
            elif run.mode != Run.Mode.RESUME and existing[(item_id, epoch)] < run.launch:
                target = redo
            else:
                continue  # a duplicate (a relaunched chunk did it too): the first one stays
            row = self._turns_row(run, result, epoch, turns.get((item_id, epoch), []))
            target.append(row)
            ok = row.status == Response.Status.OK
            progress += Progress(done=int(ok), failed=int(not ok))
        if fresh:
            Response.objects.bulk_create(fresh, ignore_conflicts=True)
        if redo:
            Response.objects.bulk_create(
                redo,
                update_conflicts=True,
                unique_fields=["run", "item", "epoch"],
                update_fields=[*RESULT_FIELDS, "launch", "updated_at"],
            )
        return progress

    @staticmethod
    def _turns_row(run: Run, result: Result, epoch: int, turns: list[Turn]) -> Response:
        """A multi-turn item's Response: its text the last answer, its tokens, cost, latency
        and attempts the sums of its turns; failed, naming the turn, when one failed."""
        answered = [t for t in turns if t.is_answered]
        row = Response(
            run_id=run.pk,
            item_id=result.item_id,
            launch=run.launch,
            epoch=epoch,
            **turn_totals(turns),
        )
        if result.ok and answered:
            row.status = Response.Status.OK
            row.text = answered[-1].text
            row.finish_reason = answered[-1].finish_reason
        else:
            failure: Failure = result.data
            row.status = Response.Status.FAILED
            row.error_kind = failure.error_kind
            row.error = failure.message
        return row

    @staticmethod
    def _row(run: Run, result: Result, epoch: int) -> Response:
        if result.ok:
            reply: Reply = result.data
            return Response(
                run_id=run.pk,
                item_id=result.item_id,
                status=Response.Status.OK,
                text=reply.text,
                finish_reason=reply.finish_reason[:32],
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                latency_ms=reply.latency_ms,
                cost=reply.cost,
                attempts=reply.attempts,
                launch=run.launch,
                epoch=epoch,
            )
        failure: Failure = result.data
        return Response(
            run_id=run.pk,
            item_id=result.item_id,
            status=Response.Status.FAILED,
            attempts=len(result.attempts),
            latency_ms=result.attempts[-1].latency_ms if result.attempts else 0,
            error_kind=failure.error_kind,
            error=failure.message,
            launch=run.launch,
            epoch=epoch,
        )

    # -- the command line ---------------------------------------------------------------------
    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dataset", type=int, required=True, help="dataset id")
        parser.add_argument("--endpoint", required=True, help="endpoint name")
        parser.add_argument("--template", required=True, help="prompt template name")
        parser.add_argument("--template-version", type=int, help="default: the latest version")
        parser.add_argument("--label", default="", help="the model's name on leaderboards")
        parser.add_argument(
            "--logging", choices=[m.value for m in LoggingMode], default=LoggingMode.FAILED.value
        )
        parser.add_argument("--chunk-size", type=int, default=200)
        parser.add_argument(
            "--epochs",
            type=int,
            default=1,
            help=f"samples per item, 1–{Run.MAX_EPOCHS} (epoch e is asked with the endpoint's seed + e)",
        )
        add_batch_argument(parser)
        parser.add_argument(
            "--multi-turn",
            action="store_true",
            help="ask each user turn of the items' conversations in order, with the model's "
            "own earlier answers in context (the template must send the item's conversation)",
        )

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        from django.core.management.base import CommandError

        dataset = Dataset.objects.filter(pk=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"No dataset with id {options['dataset']}.")
        if dataset.status != Dataset.Status.READY:
            raise CommandError(not_ready(dataset))
        epochs = options.get("epochs")
        epochs = 1 if epochs is None else epochs
        if not 1 <= epochs <= Run.MAX_EPOCHS:
            raise CommandError(f"--epochs must be between 1 and {Run.MAX_EPOCHS}, not {epochs}.")
        endpoint = Endpoint.objects.filter(name=options["endpoint"]).first()
        if endpoint is None:
            names = ", ".join(Endpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No endpoint named {options['endpoint']!r} (there are: {names}).")
        if options.get("batch") and (refusal := endpoint.batch_refusal()):
            raise CommandError(refusal)
        templates = PromptTemplate.objects.filter(task_id=dataset.task_id, name=options["template"])
        if options.get("template_version"):
            templates = templates.filter(version=options["template_version"])
        template = templates.order_by("-version").first()
        if template is None:
            raise CommandError(
                f"No template {options['template']!r} in task {dataset.task.slug}"
                + (
                    f" at version {options['template_version']}."
                    if options.get("template_version")
                    else "."
                )
            )
        try:
            return create_generation_run(
                dataset,
                endpoint,
                template,
                user=user,
                label=options.get("label") or "",
                logging_mode=options.get("logging") or LoggingMode.FAILED,
                chunk_size=options.get("chunk_size") or 200,
                epochs=epochs,
                batch=bool(options.get("batch")),
                use_cache=options.get("cache"),
                budget_usd=options.get("budget"),
                multi_turn=bool(options.get("multi_turn")),
            )
        except ValueError as exc:  # a budget it cannot keep, a multi-turn run it cannot ask
            raise CommandError(str(exc)) from None


def multi_turn_refusal(dataset: Dataset, template: PromptTemplate) -> str:
    """Why a multi-turn run of `template` over `dataset` cannot start; blank when it can."""
    if not dataset.conversation_column:
        return (
            f"Dataset {dataset} has no conversation column: a multi-turn run asks the user turns "
            "of each item's conversation (map a conversation column when uploading)."
        )
    if not template.sends_conversation:
        return (
            f"Template {template.name} v{template.version} does not send the item's "
            "conversation: a multi-turn run needs one that does (on the template form: "
            "“The item's conversation”, with an optional system message)."
        )
    if (template.messages or [{}])[-1].get("role") != "conversation":
        return (
            f"Template {template.name} v{template.version} has messages after the item's "
            "conversation: in a multi-turn run the conversation ends each request (its turn)."
        )
    return ""


def not_ready(dataset: Dataset) -> str:
    if dataset.is_draft:
        return (
            f"Dataset {dataset} (id {dataset.pk}) is a draft: review and publish its items "
            "before a run uses it."
        )
    return f"Dataset {dataset} (id {dataset.pk}) is not ready ({dataset.get_status_display()})."


TURN_FIELDS = [
    "asked",
    "text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "cost",
    "attempts",
    "error_kind",
    "error",
]


def save_turns(run: Run, rows: list[Turn]) -> None:
    """Commit finished turns (`Call.emit`'s parts) of a run's units. A turn is written when it
    has no row yet, when its row failed (the turn was asked again), or by an overwrite over an
    older launch's row; anything else is a duplicate (a relaunched chunk answered it too) and
    the first answer stays. An overwrite that answers turn 1 again drops the item's older
    turns and response, so the dialogue never mixes two launches' answers."""
    if not rows:
        return
    existing = {
        (item_id, epoch, number): (launch, error_kind)
        for item_id, epoch, number, launch, error_kind in Turn.objects.filter(
            run=run, item_id__in={row.item_id for row in rows}
        ).values_list("item_id", "epoch", "number", "launch", "error_kind")
    }
    fresh: list[Turn] = []
    for row in rows:
        where = (row.item_id, row.epoch, row.number)
        if where in existing:
            launch, error_kind = existing[where]
            older = run.mode == Run.Mode.OVERWRITE and launch < run.launch
            if not error_kind and not older:
                continue
        if run.mode == Run.Mode.OVERWRITE and row.number == 1:
            Turn.objects.filter(
                run=run, item_id=row.item_id, epoch=row.epoch, launch__lt=run.launch
            ).exclude(number=1).delete()
            Response.objects.filter(
                run=run, item_id=row.item_id, epoch=row.epoch, launch__lt=run.launch
            ).delete()
        fresh.append(row)
        existing[where] = (run.launch, row.error_kind)
    if fresh:
        Turn.objects.bulk_create(
            fresh,
            update_conflicts=True,
            unique_fields=["run", "item", "epoch", "number"],
            update_fields=[*TURN_FIELDS, "launch", "updated_at"],
        )


def _turn_row(run: Run, item_id: int, outcome: TurnOutcome, attempts: list[Any]) -> Turn:
    turn = Turn(
        run_id=run.pk,
        item_id=item_id,
        epoch=outcome.epoch,
        number=outcome.number,
        asked=outcome.asked,
        launch=run.launch,
    )
    if outcome.reply is not None:
        reply = outcome.reply
        turn.text = reply.text
        turn.finish_reason = reply.finish_reason[:32]
        turn.prompt_tokens = reply.prompt_tokens
        turn.completion_tokens = reply.completion_tokens
        turn.latency_ms = reply.latency_ms
        turn.cost = reply.cost
        turn.attempts = reply.attempts
    elif outcome.failure is not None:
        turn.error_kind = outcome.failure.error_kind
        turn.error = outcome.failure.message
        turn.attempts = len(attempts)
        turn.latency_ms = attempts[-1].latency_ms if attempts else 0
    return turn


RESULT_FIELDS = [
    "status",
    "text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "cost",
    "attempts",
    "error_kind",
    "error",
    "details",
]


def create_generation_run(
    dataset: Dataset,
    endpoint: Endpoint,
    template: PromptTemplate,
    *,
    user: Any = None,
    label: str = "",
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 200,
    epochs: int = 1,
    batch: bool = False,
    use_cache: bool | None = None,
    budget_usd: Any = None,
    response_schema: dict[str, Any] | None = None,
    multi_turn: bool = False,
) -> Run:
    """A new generation run, launched (its jobs are enqueued when the transaction commits);
    `batch` sends it through the provider's Batch API (apps.runs.engine.batch); `use_cache` None:
    the default for the endpoint (`Run.default_use_cache`); `multi_turn` asks each user turn of
    the items' conversations in order (see the module's docstring)."""
    if template.task_id != dataset.task_id:
        raise ValueError("The template belongs to another task than the dataset.")
    if multi_turn and (refusal := multi_turn_refusal(dataset, template)):
        raise ValueError(refusal)
    if batch and (refusal := endpoint.batch_refusal()):
        raise ValueError(refusal)
    if dataset.status != Dataset.Status.READY:
        raise ValueError(not_ready(dataset))
    if not 1 <= epochs <= Run.MAX_EPOCHS:
        raise ValueError(f"Epochs must be between 1 and {Run.MAX_EPOCHS}, not {epochs}.")
    budget = check_budget(budget_usd, endpoint)
    if batch and budget is not None:
        raise ValueError("A budget cannot stop a batch: leave one of them out.")
    if use_cache is None:
        use_cache = Run.default_use_cache(Run.Kind.GENERATION, endpoint)
    with transaction.atomic():
        run = Run.objects.create(
            task_id=dataset.task_id,
            kind=Run.Kind.GENERATION,
            dataset=dataset,
            endpoint=endpoint,
            template=template,
            label=label or f"{endpoint.model} · {template.name} v{template.version}",
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            epochs=epochs,
            response_schema=clean_schema(response_schema),
            batch=batch,
            use_cache=use_cache,
            budget_usd=budget,
            multi_turn=multi_turn,
            total=dataset.items.count() * epochs,
            created_by=user if getattr(user, "pk", None) else None,
        )
        launch(run, Run.Mode.RESUME)
    return run


GENERATION = GenerationPlugin()  # named in settings.RUN_KINDS
