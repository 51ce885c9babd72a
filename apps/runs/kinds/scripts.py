"""Memory-script runs (GoodAI's LTM benchmark, #27.4): per item and epoch, the item's statements,
then filler turns until the information gap is reached, then its question, each a user turn
answered by the model with the whole conversation so far in context (apps/runs/scripts.py
says what a script is and how the gap is counted).

Every turn is a `Turn` row (what it asked, the answer, its tokens); the item's `Response` is
the answer to the question, which judges score against the item's reference like any answer,
with the turns' tokens and cost summed and, in `details["script"]`, the gap actually realised
("gap_tokens", counted by the endpoint), the scripted one and where the question came. Each
turn is committed as it finishes (`Call.emit`, as multi-turn generation does), the Response
when the unit ends: a worker killed mid-script loses only the turn in flight, and whoever takes
the unit on (the reaper's next chunk, a resume, retry failed) goes through the script again
with the answered turns as they were (same filler, same gap count) and asks from the first
turn without an answer. A failed turn fails the item, naming the turn; later turns are not
asked.
"""

from argparse import ArgumentParser
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from apps.datasets.models import Dataset, Item
from apps.runs.engine.budget import check_budget
from apps.runs.engine.contract import Call, PlannedRequest, Progress, Result, RunPlugin
from apps.runs.engine.errors import LLMError
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Reply
from apps.runs.estimate import answer_stand_in, evenly_spaced
from apps.runs.kinds.generation import save_turns
from apps.runs.models import (
    Endpoint,
    ErrorKind,
    LoggingMode,
    Response,
    Run,
    ScriptSetup,
    Turn,
)
from apps.runs.scripts import (
    Filler,
    GapMeter,
    Script,
    ScriptError,
    estimate_tokens,
    max_filler_turns,
    script_of,
)

STATEMENT, FILLER, QUESTION = "statement", "filler", "question"


@dataclass(slots=True)
class ScriptUnit:
    key: str
    item_id: int
    item_key: str
    epoch: int
    script: Script | None
    error: str = ""  # the item's script cannot be read
    seed: int | None = None
    # The turns answered already, in a row from turn 1 (an earlier launch's, or a dead
    # chunk's): gone through again as they were, not asked.
    done: dict[int, "Said"] = field(default_factory=dict)


@dataclass(slots=True)
class Said:
    """One turn as it went: what it asked and the answer, or why it failed."""

    number: int
    role: str  # statement, filler or question
    asked: str
    text: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: int = 0
    attempts: int = 0
    error_kind: str = ""
    error: str = ""

    @property
    def is_answered(self) -> bool:
        return not self.error_kind

    def reply(self) -> Reply:
        """The answer as the endpoint gave it (a turn answered before, gone through again)."""
        return Reply(
            self.text,
            self.finish_reason,
            self.prompt_tokens,
            self.completion_tokens,
            self.latency_ms,
            self.cost,
            self.text,
            self.attempts,
        )


@dataclass(slots=True)
class Outcome:
    turns: list[Said] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error_kind: str = ""
    error: str = ""


class TurnFailed(Exception):
    pass


def unit_key(item_id: int, epoch: int) -> str:
    return f"{item_id}:{epoch}" if epoch else str(item_id)


def parse_unit_key(key: str) -> tuple[int, int]:
    item, _, epoch = key.partition(":")
    return int(item), int(epoch or 0)


def _redo_filter(run: Run, mode: str) -> Q:
    if mode == Run.Mode.RETRY_FAILED:
        return Q(status=Response.Status.FAILED, launch__lt=run.launch)
    if mode == Run.Mode.OVERWRITE:
        return Q(launch__lt=run.launch)
    return Q(pk__in=[])


class ScriptPlugin(RunPlugin):
    """Units are (item, epoch), as for generation runs; one unit is a whole script."""

    kind = Run.Kind.SCRIPT

    def total(self, run: Run) -> int:
        return Item.objects.filter(dataset_id=run.dataset_id).count() * run.epochs

    @staticmethod
    def _responses(run: Run) -> QuerySet[Response]:
        return Response.objects.filter(run=run, epoch__lt=run.epochs)

    def pending_keys(self, run: Run, mode: str) -> list[str]:
        responses = self._responses(run)
        todo: set[tuple[int, int]] | None = None
        if mode == Run.Mode.RETRY_FAILED:
            todo = set(responses.filter(_redo_filter(run, mode)).values_list("item_id", "epoch"))
            skip: set[tuple[int, int]] = set()
        elif mode == Run.Mode.OVERWRITE:
            skip = set(responses.filter(launch__gte=run.launch).values_list("item_id", "epoch"))
        else:
            skip = set(responses.values_list("item_id", "epoch"))
        ids = Item.objects.filter(dataset_id=run.dataset_id).order_by("position")
        return [
            unit_key(item_id, epoch)
            for item_id in ids.values_list("id", flat=True).iterator(chunk_size=10000)
            for epoch in range(run.epochs)
            if (todo is None or (item_id, epoch) in todo) and (item_id, epoch) not in skip
        ]

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]:
        counts = (
            self._responses(run)
            .exclude(_redo_filter(run, mode))
            .aggregate(
                done=Count("pk", filter=Q(status=Response.Status.OK)),
                failed=Count("pk", filter=Q(status=Response.Status.FAILED)),
            )
        )
        return counts["done"], counts["failed"]

    def prepare(self, run: Run) -> ScriptSetup:
        if run.pk is None:  # the start form's estimate: the unsaved setup it attached
            return run.script_setup
        return ScriptSetup.objects.get(run=run)

    def load_units(self, run: Run, ctx: ScriptSetup, keys: list[str]) -> list[ScriptUnit]:
        pairs = [parse_unit_key(key) for key in keys]
        rows = Item.objects.filter(id__in={item for item, _ in pairs}).values(
            "id", "key", "fields", "reference"
        )
        scripts: dict[int, tuple[str, Script | None, str]] = {}
        for row in rows:
            try:
                script = script_of(row["fields"], row["reference"], **ctx.script_kwargs())
                scripts[row["id"]] = (row["key"], script, "")
            except ScriptError as exc:
                scripts[row["id"]] = (row["key"], None, f"The item's script: {exc}.")
        seed = run.endpoint.seed if run.endpoint is not None else None
        done = answered_turns(run, {item for item, _ in pairs})
        units = []
        for item_id, epoch in pairs:
            if item_id not in scripts:
                continue
            key, read, error = scripts[item_id]
            units.append(
                ScriptUnit(
                    unit_key(item_id, epoch),
                    item_id,
                    key,
                    epoch,
                    read,
                    error=error,
                    seed=None if seed is None else seed + epoch,
                    done=done.get((item_id, epoch), {}),
                )
            )
        return units

    def lanes(self, run: Run) -> int:
        return run.endpoint.concurrency_limit if run.endpoint is not None else 1

    async def perform(self, run: Run, ctx: ScriptSetup, unit: ScriptUnit, call: Call) -> Result:
        if unit.script is None:
            return self.failed_result(run, ctx, unit, ErrorKind.TEMPLATE, unit.error)
        script = unit.script
        params = {"seed": unit.seed} if unit.seed is not None else {}
        messages: list[dict[str, str]] = []
        if ctx.system_message.strip():
            messages.append({"role": "system", "content": ctx.system_message})
        outcome = Outcome()

        kept = dict(unit.done)

        async def ask(role: str, text: str) -> Reply:
            messages.append({"role": "user", "content": text})
            number = len(outcome.turns) + 1
            earlier = kept.pop(number, None)
            if earlier is not None and earlier.asked == text:
                # Answered before: the same turn as it went, not asked again.
                said = replace(earlier, role=role)
                outcome.turns.append(said)
                messages.append({"role": "assistant", "content": said.text})
                return said.reply()
            kept.clear()  # the script went another way: nothing after this is reused
            said = Said(number, role, text)
            outcome.turns.append(said)
            before = len(call.log)
            try:
                reply = await call.chat(list(messages), epoch=unit.epoch, **params)
            except LLMError as exc:
                if exc.fatal:
                    raise
                said.attempts = len(call.log) - before
                said.latency_ms = sum(a.latency_ms for a in call.log[before:])
                said.error_kind, said.error = exc.kind, exc.message
                call.emit(unit.key, (unit.epoch, said), ok=False)
                raise TurnFailed from None
            said.text, said.finish_reason = reply.text, reply.finish_reason[:32]
            said.prompt_tokens, said.completion_tokens = (
                reply.prompt_tokens,
                reply.completion_tokens,
            )
            said.cost, said.latency_ms, said.attempts = reply.cost, reply.latency_ms, reply.attempts
            messages.append({"role": "assistant", "content": reply.text})
            call.emit(unit.key, (unit.epoch, said))
            return reply

        meter = GapMeter()
        filler = Filler(f"{ctx.filler_seed}:{unit.item_key}:{unit.epoch}", script.filler)
        try:
            for statement in script.statements:
                reply = await ask(STATEMENT, statement)
            meter.after_statement(reply.prompt_tokens, reply.text, reply.completion_tokens)
            for _ in range(max_filler_turns(script.gap_tokens)):
                if meter.gap >= script.gap_tokens:
                    break
                text = filler.message(script.gap_tokens - meter.gap)
                reply = await ask(FILLER, text)
                meter.after_turn(text, reply.prompt_tokens, reply.text, reply.completion_tokens)
            await ask(QUESTION, script.question)
        except TurnFailed:
            failed = outcome.turns[-1]
            outcome.error_kind = failed.error_kind
            outcome.error = f"Turn {failed.number} ({failed.role}): {failed.error}"
        outcome.details = {
            "script": {
                "statements": len(script.statements),
                "filler_turns": sum(t.role == FILLER for t in outcome.turns),
                "question_turn": next(
                    (t.number for t in outcome.turns if t.role == QUESTION), None
                ),
                "scripted_gap": script.gap_tokens,
                "gap_tokens": meter.gap,
                "gap_counted_by": "estimate" if meter.estimated else "endpoint",
            }
        }
        return Result(unit.key, unit.item_id, not outcome.error, data=outcome)

    def failed_result(
        self, run: Run, ctx: Any, unit: ScriptUnit, error_kind: str, message: str
    ) -> Result:
        return Result(
            unit.key, unit.item_id, False, data=Outcome(error_kind=error_kind, error=message)
        )

    # Whether `perform` commits each turn as it finishes (`Call.emit`); if not, a unit's turns
    # are written with its Response, and a unit asked again is asked from its first turn.
    emits_turns = True

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress:
        """Finished turns as they come (`save_turns`: each once), then each ended unit's
        Response exactly once per launch (a relaunched chunk's duplicate is dropped); turns of
        an earlier launch beyond the unit's last one go."""
        progress = Progress()
        for result in results:
            for attempt in result.attempts:
                progress += Progress(
                    prompt_tokens=attempt.prompt_tokens,
                    completion_tokens=attempt.completion_tokens,
                    cost=attempt.cost,
                )
        parts = [r for r in results if r.partial]
        save_turns(run, [self._turn(run, r.item_id, *r.data) for r in parts])
        by_unit = {parse_unit_key(r.key): r for r in results if not r.partial}
        existing = dict(
            ((item_id, epoch), launch)
            for item_id, epoch, launch in Response.objects.filter(
                run=run, item_id__in={item for item, _ in by_unit}
            ).values_list("item_id", "epoch", "launch")
        )
        fresh: list[Response] = []
        redo: list[Response] = []
        turns: list[Turn] = []
        beyond = Q(pk__in=[])
        for (item_id, epoch), result in by_unit.items():
            if (item_id, epoch) not in existing:
                target = fresh
            elif run.mode != Run.Mode.RESUME and existing[(item_id, epoch)] < run.launch:
                target = redo
            else:
                continue
            outcome: Outcome = result.data
            row = self._response(run, item_id, epoch, result)
            target.append(row)
            if self.emits_turns:
                beyond |= Q(item_id=item_id, epoch=epoch, number__gt=len(outcome.turns))
            else:
                turns += [self._turn(run, item_id, epoch, said) for said in outcome.turns]
            ok = row.status == Response.Status.OK
            progress += Progress(done=int(ok), failed=int(not ok))
        if redo and not self.emits_turns:
            stale = Q(pk__in=[])
            for row in redo:
                stale |= Q(item_id=row.item_id, epoch=row.epoch)
            Turn.objects.filter(stale, run=run, launch__lt=run.launch).delete()
        if self.emits_turns and (fresh or redo):
            Turn.objects.filter(beyond, run=run, launch__lt=run.launch).delete()
        if redo:
            Response.objects.bulk_create(
                redo,
                update_conflicts=True,
                unique_fields=["run", "item", "epoch"],
                update_fields=[*RESULT_FIELDS, "launch", "updated_at"],
            )
        if fresh:
            Response.objects.bulk_create(fresh, ignore_conflicts=True)
        if turns:
            Turn.objects.bulk_create(turns, ignore_conflicts=True)
        return progress

    def _response(self, run: Run, item_id: int, epoch: int, result: Result) -> Response:
        outcome: Outcome = result.data
        said = outcome.turns
        return Response(
            run_id=run.pk,
            item_id=item_id,
            epoch=epoch,
            launch=run.launch,
            status=Response.Status.OK if result.ok else Response.Status.FAILED,
            text=self._response_text(outcome) if result.ok else "",
            finish_reason=said[-1].finish_reason if result.ok and said else "",
            prompt_tokens=sum(t.prompt_tokens for t in said),
            completion_tokens=sum(t.completion_tokens for t in said),
            cost=sum(t.cost for t in said),
            latency_ms=sum(t.latency_ms for t in said),
            attempts=sum(t.attempts for t in said) or len(result.attempts),
            error_kind="" if result.ok else outcome.error_kind,
            error="" if result.ok else outcome.error,
            details=outcome.details,
        )

    @staticmethod
    def _response_text(outcome: Outcome) -> str:
        """What judges score: the answer to the script's question (its last turn)."""
        return outcome.turns[-1].text

    @staticmethod
    def _turn(run: Run, item_id: int, epoch: int, said: Said) -> Turn:
        return Turn(
            run_id=run.pk,
            item_id=item_id,
            epoch=epoch,
            number=said.number,
            asked=said.asked,
            text=said.text,
            finish_reason=said.finish_reason,
            prompt_tokens=said.prompt_tokens,
            completion_tokens=said.completion_tokens,
            cost=said.cost,
            latency_ms=said.latency_ms,
            attempts=said.attempts,
            error_kind=said.error_kind,
            error=said.error,
            launch=run.launch,
        )

    # -- the cost estimate ------------------------------------------------------------------
    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        ids = list(
            Item.objects.filter(dataset_id=run.dataset_id)
            .order_by("position")
            .values_list("id", flat=True)
        )
        chosen = evenly_spaced(ids, max(1, n // run.epochs))
        return [unit_key(i, e) for i in chosen for e in range(run.epochs)], len(ids) * run.epochs

    def planned_requests(
        self, run: Run, ctx: ScriptSetup, unit: ScriptUnit
    ) -> list[PlannedRequest]:
        """The script's requests with the filler as the gap plans it, each with the turns
        before it and their answers in context (unknown before the run: each a stand-in as
        long as a reply is counted, apps.runs.estimate)."""
        if unit.script is None:
            return []
        script = unit.script
        params = {"seed": unit.seed} if unit.seed is not None else {}
        messages: list[dict[str, str]] = []
        requests = []
        filler = Filler(f"{ctx.filler_seed}:{unit.item_key}:{unit.epoch}", script.filler)
        said = 0
        texts = list(script.statements)
        while said < script.gap_tokens and len(texts) < 1000:
            texts.append(filler.message(script.gap_tokens - said))
            said += estimate_tokens(texts[-1])
        stand_in = answer_stand_in(run, params)
        if ctx.system_message.strip():
            messages = [{"role": "system", "content": ctx.system_message}]
        for text in [*texts, script.question]:
            messages = [*messages, {"role": "user", "content": text}]
            requests.append(PlannedRequest(messages, params, epoch=unit.epoch))
            messages = [*messages, {"role": "assistant", "content": stand_in}]
        return requests

    # -- the command line ---------------------------------------------------------------------
    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dataset", type=int, required=True, help="dataset id")
        parser.add_argument("--endpoint", required=True, help="endpoint name")
        parser.add_argument(
            "--statements", required=True, help="column of the statements (a text or a list)"
        )
        parser.add_argument("--question", required=True, help="column of the question")
        parser.add_argument(
            "--gap", type=int, default=0, help="filler tokens between statements and question"
        )
        parser.add_argument("--gap-column", default="", help="column giving the gap per item")
        parser.add_argument("--filler-column", default="", help="column of the item's filler")
        parser.add_argument("--filler-seed", type=int, default=0)
        parser.add_argument("--system", default="", help="a system message before the script")
        parser.add_argument("--label", default="", help="the model's name on leaderboards")
        parser.add_argument("--epochs", type=int, default=1)
        parser.add_argument(
            "--logging", choices=[m.value for m in LoggingMode], default=LoggingMode.FAILED.value
        )

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        from django.core.management.base import CommandError

        dataset = Dataset.objects.filter(pk=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"No dataset with id {options['dataset']}.")
        endpoint = Endpoint.objects.filter(name=options["endpoint"]).first()
        if endpoint is None:
            names = ", ".join(Endpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No endpoint named {options['endpoint']!r} (there are: {names}).")
        try:
            return create_script_run(
                dataset,
                endpoint,
                statements_column=options["statements"],
                question_column=options["question"],
                gap_tokens=options.get("gap") or 0,
                gap_column=options.get("gap_column") or "",
                filler_column=options.get("filler_column") or "",
                filler_seed=options.get("filler_seed") or 0,
                system_message=options.get("system") or "",
                user=user,
                label=options.get("label") or "",
                epochs=options.get("epochs") or 1,
                logging_mode=options.get("logging") or LoggingMode.FAILED,
                use_cache=options.get("cache"),
                budget_usd=options.get("budget"),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None


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


def answered_turns(run: Run, item_ids: set[int]) -> dict[tuple[int, int], dict[int, Said]]:
    """Per (item, epoch), the turns answered already in a row from turn 1, as `Said`s (an
    overwrite asks everything again: only this launch's answers count; an unsaved run, the
    start form's estimate, has answered nothing)."""
    if run.pk is None:
        return {}
    rows = Turn.objects.filter(run_id=run.pk, item_id__in=item_ids).answered()
    if run.mode == Run.Mode.OVERWRITE:
        rows = rows.filter(launch__gte=run.launch)
    found: dict[tuple[int, int], dict[int, Said]] = {}
    for turn in rows.order_by("number"):
        done = found.setdefault((turn.item_id, turn.epoch), {})
        if turn.number == len(done) + 1:
            done[turn.number] = Said(
                turn.number,
                "",
                turn.asked,
                text=turn.text,
                finish_reason=turn.finish_reason,
                prompt_tokens=turn.prompt_tokens,
                completion_tokens=turn.completion_tokens,
                cost=turn.cost,
                latency_ms=turn.latency_ms,
                attempts=turn.attempts,
            )
    return found


def check_scripts(dataset: Dataset, setup: ScriptSetup) -> None:
    """Every item's script reads, or ValueError naming the first rows at fault (nothing is
    started over a file that cannot run)."""
    problems = []
    rows = dataset.items.order_by("position").values_list("position", "fields", "reference")
    for position, fields, reference in rows.iterator(chunk_size=2000):
        try:
            script_of(fields, reference, **setup.script_kwargs())
        except ScriptError as exc:
            problems.append(f"row {position + 1}: {exc}")
            if len(problems) == 5:
                break
    if problems:
        raise ValueError("These items are not scripts: " + "; ".join(problems) + ".")


def create_script_run(
    dataset: Dataset,
    endpoint: Endpoint,
    *,
    statements_column: str,
    question_column: str,
    gap_tokens: int = 0,
    gap_column: str = "",
    filler_column: str = "",
    filler_seed: int = 0,
    system_message: str = "",
    user: Any = None,
    label: str = "",
    epochs: int = 1,
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 50,
    use_cache: bool | None = None,
    budget_usd: Any = None,
) -> Run:
    """A new memory-script run over `dataset`, launched when the transaction commits; refused
    (ValueError) when an item's script cannot be read, naming the rows."""
    if dataset.status != Dataset.Status.READY:
        raise ValueError(f"Dataset {dataset} is not ready ({dataset.get_status_display()}).")
    if not 1 <= epochs <= Run.MAX_EPOCHS:
        raise ValueError(f"Epochs must be between 1 and {Run.MAX_EPOCHS}, not {epochs}.")
    if gap_tokens < 0:
        raise ValueError("The gap is a number of tokens, 0 or more.")
    setup = ScriptSetup(
        statements_column=statements_column,
        question_column=question_column,
        gap_tokens=gap_tokens,
        gap_column=gap_column,
        filler_column=filler_column,
        filler_seed=filler_seed,
        system_message=system_message,
    )
    check_scripts(dataset, setup)
    budget = check_budget(budget_usd, endpoint)
    if use_cache is None:
        use_cache = Run.default_use_cache(Run.Kind.GENERATION, endpoint)
    with transaction.atomic():
        run = Run.objects.create(
            task_id=dataset.task_id,
            kind=Run.Kind.SCRIPT,
            dataset=dataset,
            endpoint=endpoint,
            label=label or f"{endpoint.model} · memory script",
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            epochs=epochs,
            multi_turn=True,
            use_cache=use_cache,
            budget_usd=budget,
            total=dataset.items.count() * epochs,
            created_by=user if getattr(user, "pk", None) else None,
        )
        setup.run = run
        setup.save()
        launch(run, Run.Mode.RESUME)
    return run


SCRIPT = ScriptPlugin()  # named in settings.RUN_KINDS
