"""Simulated-user conversations (#27.5): per item and epoch, another endpoint plays the user,
with its own instructions (the persona and goal, a template over the item's fields), and
converses with the model for up to `max_turns` answers or until it says it is done (its
`done_marker`, e.g. "[DONE]": that line ends the conversation and is not sent).

The simulator sees the conversation from its side: its instructions as the system message,
the model's answers as user messages and its own lines as assistant messages (it is asked to
open the conversation, unless the item's opening column says the first line). The model sees
its own system message (optional) and the simulator's lines as user messages.

Each of the model's turns is a `Turn` row (the simulator's line it answered, the answer); the
item's `Response` is the whole transcript as text (`conversation_text`), so any judge scores
the dialogue, with `transcript()` giving it as messages and `details["simulation"]` saying how
it ended. Turns and Response are written together when the unit ends (one transaction per
flush, as for memory scripts): a unit a killed worker left is asked again from the start.

The simulator's requests go through the engine as the model's do (`Call.chat(...,
chat_to`): retries, timeouts, errors in plain words, key scrubbing; the simulator endpoint's
own shared concurrency limit and its account's rate limits; the run's cache (a conversation
asked again with the cache on is answered from it, both sides) and the run's budget, which
its price counts against. They are logged and counted in the run's tokens and cost.
"""

from argparse import ArgumentParser
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.template import Context
from django.template.base import Template

from apps.datasets.conversations import conversation_text
from apps.datasets.models import Dataset, Item
from apps.runs.engine.budget import check_budget
from apps.runs.engine.contract import Call, PlannedRequest, Result
from apps.runs.engine.errors import LLMError
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Reply
from apps.runs.estimate import answer_stand_in
from apps.runs.kinds.scripts import Outcome, Said, ScriptPlugin, parse_unit_key, unit_key
from apps.runs.models import Endpoint, ErrorKind, LoggingMode, Run, SimulatorSetup
from apps.runs.prompts import ItemData, PromptError, compile_template, item_context

SIMULATOR, MODEL = "simulator", "model"
OPEN = "Begin the conversation: write your first message to the assistant."


@dataclass(slots=True)
class Setup:
    """A run's simulator setup with its templates compiled (the chunk's context)."""

    row: SimulatorSetup
    instructions: Template
    system: Template | None


@dataclass(slots=True)
class SimulationUnit:
    key: str
    item_id: int
    epoch: int
    instructions: str  # the simulator's system message, rendered for the item
    system: str  # the model's system message, rendered ("" for none)
    opening: str  # the item's first line ("" when the simulator opens)
    error: str = ""
    seed: int | None = None


class TurnFailed(Exception):
    pass


class SimulationPlugin(ScriptPlugin):
    """Units are (item, epoch); one unit is a whole conversation. Counting, resuming and
    writing are a memory script's (turns and Response once per unit and launch)."""

    kind = Run.Kind.SIMULATION
    # The simulator's lines are not known again: a conversation cut short starts over.
    emits_turns = False

    def prepare(self, run: Run) -> Setup:  # type: ignore[override]
        if run.pk is None:  # the start form's estimate: the unsaved setup it attached
            row = run.simulator_setup
        else:
            row = SimulatorSetup.objects.select_related("simulator").get(run=run)
        system = row.system_message
        return Setup(
            row,
            compile_template(row.instructions, "the simulator's instructions"),
            compile_template(system, "the model's system message") if system.strip() else None,
        )

    def load_units(self, run: Run, ctx: Setup, keys: list[str]) -> list[SimulationUnit]:  # type: ignore[override]
        pairs = [parse_unit_key(key) for key in keys]
        rows = Item.objects.filter(id__in={item for item, _ in pairs}).values(*ItemData.VALUES)
        made: dict[int, tuple[str, str, str, str]] = {}
        column = ctx.row.opening_column
        for row in rows:
            item = ItemData.from_values(row)
            try:
                data = Context(item_context(item), autoescape=False)
                instructions = ctx.instructions.render(data)
                system = ctx.system.render(data) if ctx.system is not None else ""
                opening = str(item.fields.get(column) or "") if column else ""
                if column and not opening.strip():
                    raise PromptError(f"the opening column {column!r} is empty")
                made[item.id] = (instructions, system, opening, "")
            except PromptError as exc:
                made[item.id] = ("", "", "", f"Item {item.key}: {exc}")
            except Exception as exc:  # a template that fails to render
                made[item.id] = ("", "", "", f"Item {item.key}: {type(exc).__name__}: {exc}")
        seed = run.endpoint.seed if run.endpoint is not None else None
        return [
            SimulationUnit(
                unit_key(item_id, epoch),
                item_id,
                epoch,
                *made[item_id][:3],
                error=made[item_id][3],
                seed=None if seed is None else seed + epoch,
            )
            for item_id, epoch in pairs
            if item_id in made
        ]

    async def perform(self, run: Run, ctx: Setup, unit: SimulationUnit, call: Call) -> Result:  # type: ignore[override]
        if unit.error:
            return self.failed_result(run, ctx, unit, ErrorKind.TEMPLATE, unit.error)  # type: ignore[arg-type]
        return await self._converse(run, ctx.row, unit, call)

    async def _converse(
        self,
        run: Run,
        setup: SimulatorSetup,
        unit: SimulationUnit,
        call: Call,
    ) -> Result:
        params = {"seed": unit.seed} if unit.seed is not None else {}
        model_side: list[dict[str, str]] = []
        if unit.system.strip():
            model_side.append({"role": "system", "content": unit.system})
        sim_side: list[dict[str, str]] = [
            {"role": "system", "content": unit.instructions},
            {"role": "user", "content": OPEN},
        ]
        outcome = Outcome()
        ended = "max_turns"
        closing = ""
        try:
            for turn in range(1, setup.max_turns + 1):
                if turn == 1 and unit.opening:
                    line = unit.opening
                else:
                    line = await self._ask_simulator(setup, sim_side, unit, call, turn, outcome)
                if setup.done_marker and setup.done_marker in line:
                    ended, closing = "simulator", line
                    break
                said = Said(turn, MODEL, line)
                outcome.turns.append(said)
                model_side.append({"role": "user", "content": line})
                reply = await self._ask(call, model_side, said, unit.epoch, params)
                model_side.append({"role": "assistant", "content": reply.text})
                sim_side += [
                    {"role": "assistant", "content": line},
                    {"role": "user", "content": reply.text},
                ]
        except TurnFailed:
            failed = outcome.turns[-1]
            who = "the simulated user" if failed.role == SIMULATOR else "the model"
            outcome.error_kind = failed.error_kind
            outcome.error = f"Turn {failed.number} ({who}): {failed.error}"
            # A simulator that failed leaves no model turn to record.
            outcome.turns = [t for t in outcome.turns if t.role == MODEL]
        if not outcome.error and not outcome.turns:
            outcome.error_kind = ErrorKind.UNPARSEABLE
            outcome.error = "The simulated user ended the conversation before saying anything."
        outcome.details = {
            "simulation": {
                "turns": sum(1 for t in outcome.turns if t.is_answered),
                "ended_by": ended if not outcome.error else "error",
                "closing": closing,
                "max_turns": setup.max_turns,
            }
        }
        return Result(unit.key, unit.item_id, not outcome.error, data=outcome)

    async def _ask_simulator(
        self,
        setup: SimulatorSetup,
        sim_side: list[dict[str, str]],
        unit: SimulationUnit,
        call: Call,
        turn: int,
        outcome: Outcome,
    ) -> str:
        try:
            reply = await call.chat_to(setup.simulator, list(sim_side), epoch=unit.epoch)
        except LLMError as exc:
            if exc.fatal:
                raise LLMError(
                    exc.kind, f"the simulated user's endpoint: {exc.message}", fatal=True
                ) from None
            outcome.turns.append(Said(turn, SIMULATOR, "", error_kind=exc.kind, error=exc.message))
            raise TurnFailed from None
        return reply.text.strip()

    @staticmethod
    async def _ask(
        call: Call,
        messages: list[dict[str, str]],
        said: Said,
        epoch: int,
        params: dict[str, Any],
    ) -> Reply:
        before = len(call.log)
        try:
            reply = await call.chat(list(messages), epoch=epoch, **params)
        except LLMError as exc:
            if exc.fatal:
                raise
            said.attempts = len(call.log) - before
            said.error_kind, said.error = exc.kind, exc.message
            raise TurnFailed from None
        said.text, said.finish_reason = reply.text, reply.finish_reason[:32]
        said.prompt_tokens, said.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        said.cost, said.latency_ms, said.attempts = reply.cost, reply.latency_ms, reply.attempts
        return reply

    @staticmethod
    def _response_text(outcome: Outcome) -> str:
        messages = [
            message
            for said in outcome.turns
            if said.is_answered
            for message in (
                {"role": "user", "content": said.asked},
                {"role": "assistant", "content": said.text},
            )
        ]
        return conversation_text(messages)

    def planned_requests(self, run: Run, ctx: Any, unit: Any) -> list[PlannedRequest]:
        """The requests of both sides as the conversation would grow over K turns: the
        simulator's (its endpoint's, priced at its price) before each of the model's but an
        opening the item gives, and the model's. The simulator's lines are unknown before the
        run (each counted as the opening line, or as long as the instruction to open), the
        model's answers each a stand-in as long as a reply is counted (apps.runs.estimate);
        a simulator that ends the conversation sooner sends fewer."""
        if unit.error:
            return []
        params: dict[str, Any] = {"seed": unit.seed} if unit.seed is not None else {}
        stand_in = answer_stand_in(run, params)
        line = unit.opening or OPEN
        messages = [{"role": "system", "content": unit.system}] if unit.system else []
        sim_side = [
            {"role": "system", "content": unit.instructions},
            {"role": "user", "content": OPEN},
        ]
        simulator = ctx.row.simulator
        requests = []
        for turn in range(1, ctx.row.max_turns + 1):
            if not (turn == 1 and unit.opening):
                requests.append(
                    PlannedRequest(list(sim_side), {}, epoch=unit.epoch, endpoint=simulator)
                )
            messages = [*messages, {"role": "user", "content": line}]
            requests.append(PlannedRequest(messages, params, epoch=unit.epoch))
            messages = [*messages, {"role": "assistant", "content": stand_in}]
            sim_side = [
                *sim_side,
                {"role": "assistant", "content": line},
                {"role": "user", "content": stand_in},
            ]
        return requests

    # -- the command line ---------------------------------------------------------------------
    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dataset", type=int, required=True, help="dataset id")
        parser.add_argument("--endpoint", required=True, help="the model's endpoint")
        parser.add_argument("--simulator", required=True, help="the simulated user's endpoint")
        parser.add_argument(
            "--instructions",
            required=True,
            help="the simulated user's prompt: persona and goal, over the item's fields",
        )
        parser.add_argument("--system", default="", help="the model's system message")
        parser.add_argument("--opening-column", default="", help="column of the first line")
        parser.add_argument("--max-turns", type=int, default=4)
        parser.add_argument("--done-marker", default="[DONE]")
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
        simulator = Endpoint.objects.filter(name=options["simulator"]).first()
        if endpoint is None or simulator is None:
            missing = options["endpoint"] if endpoint is None else options["simulator"]
            names = ", ".join(Endpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No endpoint named {missing!r} (there are: {names}).")
        try:
            return create_simulation_run(
                dataset,
                endpoint,
                simulator,
                instructions=options["instructions"],
                system_message=options.get("system") or "",
                opening_column=options.get("opening_column") or "",
                max_turns=options.get("max_turns") or 4,
                done_marker=options.get("done_marker") or "",
                user=user,
                label=options.get("label") or "",
                epochs=options.get("epochs") or 1,
                logging_mode=options.get("logging") or LoggingMode.FAILED,
                use_cache=options.get("cache"),
                budget_usd=options.get("budget"),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None


def create_simulation_run(
    dataset: Dataset,
    endpoint: Endpoint,
    simulator: Endpoint,
    *,
    instructions: str,
    system_message: str = "",
    opening_column: str = "",
    max_turns: int = 4,
    done_marker: str = "[DONE]",
    user: Any = None,
    label: str = "",
    epochs: int = 1,
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 50,
    use_cache: bool | None = None,
    budget_usd: Any = None,
) -> Run:
    """A new simulated-conversation run over `dataset`, launched when the transaction commits;
    ValueError for what cannot run (templates that do not compile, a column not in the data)."""
    if dataset.status != Dataset.Status.READY:
        raise ValueError(f"Dataset {dataset} is not ready ({dataset.get_status_display()}).")
    if not instructions.strip():
        raise ValueError("Tell the simulated user who it is and what it wants (instructions).")
    if not 1 <= max_turns <= SimulatorSetup.MAX_TURNS:
        raise ValueError(f"Max turns must be between 1 and {SimulatorSetup.MAX_TURNS}.")
    if not 1 <= epochs <= Run.MAX_EPOCHS:
        raise ValueError(f"Epochs must be between 1 and {Run.MAX_EPOCHS}, not {epochs}.")
    if opening_column and opening_column not in dataset.columns:
        raise ValueError(f"Dataset {dataset} has no column {opening_column!r}.")
    try:
        compile_template(instructions, "the simulator's instructions")
        compile_template(system_message, "the model's system message")
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    budget = check_budget(budget_usd, endpoint)
    if budget is not None and not simulator.has_price:
        # The simulated user's requests count against the budget too: without a price they
        # would cost "$0" and the cap would not hold.
        raise ValueError(
            f"A budget needs a price for the simulated user too: {simulator.unknown_cost_hint()}."
        )
    if use_cache is None:
        use_cache = Run.default_use_cache(Run.Kind.GENERATION, endpoint)
    with transaction.atomic():
        run = Run.objects.create(
            task_id=dataset.task_id,
            kind=Run.Kind.SIMULATION,
            dataset=dataset,
            endpoint=endpoint,
            label=label or f"{endpoint.model} · with {simulator.name}",
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            epochs=epochs,
            multi_turn=True,
            use_cache=use_cache,
            budget_usd=budget,
            total=dataset.items.count() * epochs,
            created_by=user if getattr(user, "pk", None) else None,
        )
        SimulatorSetup.objects.create(
            run=run,
            simulator=simulator,
            instructions=instructions,
            system_message=system_message,
            opening_column=opening_column,
            max_turns=max_turns,
            done_marker=done_marker,
        )
        launch(run, Run.Mode.RESUME)
    return run


SIMULATION = SimulationPlugin()  # named in settings.RUN_KINDS
