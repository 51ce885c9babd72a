"""The contract between the engine and a run kind: what a kind implements (`RunExecutor`, what
executes its runs; `RunStarter`, what starts them), what the engine hands it (`Call`) and
what it hands back (`Result`, `Progress`), and where the engine finds a run's kind: the
registry, settings.RUN_KINDS (see apps.runs.engine)."""

from argparse import ArgumentParser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast

from django.conf import settings
from django.utils.module_loading import import_string

from apps.runs.engine.errors import LLMError
from apps.runs.engine.llm import LLM, Attempt, Echo, Reply
from apps.runs.models import Endpoint, ErrorKind, Run


# ---- the interface ---------------------------------------------------------------------------
@dataclass
class Progress:
    done: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def __iadd__(self, other: "Progress") -> "Progress":
        self.done += other.done
        self.failed += other.failed
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost
        return self


@dataclass
class Result:
    """The outcome of one unit; `data` is the plug-in's own (a reply, scores, an error…)."""

    key: str
    item_id: int
    ok: bool
    attempts: list[Attempt] = field(default_factory=list)
    data: Any = None
    # A finished part of a unit that is still going (a turn of a multi-turn item, `Call.emit`):
    # committed like any result, but the unit stays the chunk's until its final result.
    partial: bool = False


@dataclass(frozen=True)
class PlannedRequest:
    """One request a unit would send (what `Call.chat` gets), for the cost estimate."""

    messages: list[dict[str, str]]
    params: dict[str, Any]
    epoch: int = 0
    round: int | None = None
    # Sent to another endpoint than the run's (a simulated user's, `Call.chat_to`): priced at
    # that endpoint's price.
    endpoint: Endpoint | None = None


# Another endpoint's client for a chunk (a simulated user's): within the same shared limits,
# cache and budget as the run's own (ChunkRunner.client_for).
Clients = Callable[[Endpoint], Awaitable[LLM]]


class Call:
    """What `perform` may do with the outside world for one unit."""

    def __init__(
        self,
        llm: LLM | None,
        item_id: int,
        unit: int | None = None,
        sink: Callable[[Result], None] | None = None,
        clients: Clients | None = None,
    ) -> None:
        self.llm = llm
        self.clients = clients
        self.item_id = item_id
        # A unit that makes items instead of answering one (dataset generation): its
        # attempts are logged under this number (AttemptLog.unit).
        self.unit = unit
        self.log: list[Attempt] = []
        # Where `emit` hands parts of the unit to be committed (the chunk's write buffer);
        # without one (batch mode, the cost estimate) they are only kept in `parts`.
        self.sink = sink
        self.parts: list[Result] = []
        self._emitted = 0  # attempts already handed on with a part

    def emit(self, key: str, data: Any, *, ok: bool = True) -> None:
        """Commit a finished part of the unit now, before the unit ends (a turn of a
        multi-turn item): `persist` gets it as a partial Result with the attempts made since
        the last part, so a worker that dies later loses only what came after it."""
        part = Result(key, self.item_id, ok, self.rest(), data, partial=True)
        self._emitted = len(self.log)
        self.parts.append(part)
        if self.sink is not None:
            self.sink(part)

    def rest(self) -> list[Attempt]:
        """The attempts no part has carried yet (what the unit's final result carries)."""
        return self.log[self._emitted :]

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        if self.llm is None:
            raise LLMError(ErrorKind.INTERNAL, "this run has no endpoint to ask")
        return await self._chat(self.llm, messages, round=round, epoch=epoch, **params)

    async def chat_to(
        self,
        endpoint: Endpoint,
        messages: list[dict[str, str]],
        *,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        """`chat` with another endpoint than the run's (a simulated user's): as cached, held
        to that endpoint's shared concurrency and rate limits and reserved from the run's
        budget as the run's own requests, its attempts logged with them."""
        if self.llm is not None and endpoint.pk == self.llm.endpoint.pk:
            return await self._chat(self.llm, messages, epoch=epoch, **params)
        if self.clients is None:
            raise LLMError(ErrorKind.INTERNAL, f"endpoint {endpoint.name} cannot be asked here")
        llm = await self.clients(endpoint)
        return await self._chat(llm, messages, epoch=epoch, **params)

    async def _chat(
        self,
        llm: LLM,
        messages: list[dict[str, str]],
        *,
        round: int | None = None,
        epoch: int = 0,
        **params: Any,
    ) -> Reply:
        start = len(self.log)
        try:
            return await llm.chat(
                messages, log=self.log, item_id=self.item_id, round=round, epoch=epoch, **params
            )
        finally:
            if self.unit is not None:
                for attempt in self.log[start:]:
                    attempt.unit = self.unit

    async def prompt_logprobs(self, prompts: list[str], *, max_tokens: int = 0) -> Echo:
        """Each prompt's token log-probabilities from the endpoint's completions API."""
        if self.llm is None:
            raise LLMError(ErrorKind.INTERNAL, "this run has no endpoint to ask")
        return await self.llm.prompt_logprobs(
            prompts, log=self.log, item_id=self.item_id, max_tokens=max_tokens
        )

    def record(self, attempt: Attempt) -> None:
        attempt.unit = self.unit if attempt.unit is None else attempt.unit
        self.log.append(attempt)


class RunExecutor(Protocol):
    """What executes a kind's runs: the engine's side of a kind (chunks, batch mode, settling).
    Methods with a body are defaults a kind may override."""

    kind: ClassVar[str]

    def total(self, run: Run) -> int: ...

    def pending_keys(self, run: Run, mode: str) -> list[str]: ...

    def pending_count(self, run: Run, mode: str) -> int:
        return len(self.pending_keys(run, mode))

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]: ...

    def lanes(self, run: Run) -> int:
        return run.endpoint.concurrency_limit if run.endpoint is not None else 1

    def unsettled_keys(self, run: Run, keys: list[str]) -> list[str]:
        """Those of `keys` this launch still has to do (a dead chunk may have done some)."""
        pending = set(self.pending_keys(run, run.mode))
        return [key for key in keys if key in pending]

    def prepare(self, run: Run) -> Any:
        return None

    def batch_turn(self, unit: Any) -> int | None:
        """Batch mode: None sends all of the unit's requests in one batch; n (a unit asked turn
        by turn that has answered n turns) sends only its next turn, each answer emitted
        (`Call.emit`) and the next turn sent in a later batch (apps.runs.engine.batch)."""
        return None

    def load_units(self, run: Run, ctx: Any, keys: list[str]) -> list[Any]: ...

    async def perform(self, run: Run, ctx: Any, unit: Any, call: Call) -> Result: ...

    def failed_result(
        self, run: Run, ctx: Any, unit: Any, error_kind: str, message: str
    ) -> Result: ...

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress: ...


class RunStarter(Protocol):
    """What starts a kind's runs: `start_run <kind>` and the start form's cost estimate
    (apps.runs.estimate, which also renders units through the kind's `RunExecutor` side); and
    what the run's page shows of the kind."""

    kind: ClassVar[str]
    # Whether `start_run <kind>` makes runs of this kind (some are made only by their page).
    startable: ClassVar[bool] = True

    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        return None

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        # Two statements: a lone `raise NotImplementedError` would make it abstract to mypy.
        message = f"{self.kind} runs cannot be started from the command line"
        raise NotImplementedError(message)

    # -- the cost estimate, on an unsaved run as a start form makes it --
    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        """Up to `n` unit keys spread over the run, and how many units it has in all."""
        return [], 0

    def planned_requests(self, run: Run, ctx: Any, unit: Any) -> list[PlannedRequest]:
        """The requests performing `unit` would send."""
        return []

    # -- the run's page --
    def page_context(self, run: Run) -> dict[str, Any]:
        """What the run's page shows of this kind beyond what every run has: a kind in a later
        app brings its own rows, which the runs app cannot name."""
        return {}


class RunPlugin(RunExecutor, RunStarter, Protocol):
    """A run kind's plug-in, as the registry (settings.RUN_KINDS) names it: both sides."""


BATCH_HELP = (
    "send the requests through the provider's Batch API (endpoints marked as supporting it): "
    "answered within 24 h at the batch price"
)


def add_batch_argument(parser: ArgumentParser) -> None:
    """`--batch` for the `start_run` subcommands of kinds that ask a model."""
    parser.add_argument("--batch", action="store_true", help=BATCH_HELP)


def is_registered(kind: str) -> bool:
    """Whether runs of `kind` are executed (a response column read from a file is not)."""
    return kind in settings.RUN_KINDS


def plugin_of(kind: str) -> RunPlugin:
    """The plug-in of run kind `kind`, looked up in the registry of kinds, settings.RUN_KINDS
    (kind -> dotted path): the engine names no kind's module, and nothing registers on import."""
    return cast(RunPlugin, import_string(settings.RUN_KINDS[kind]))


def load_kinds() -> None:
    """Import every registered kind's plug-in now (a process about to fork work horses)."""
    for kind in settings.RUN_KINDS:
        plugin_of(kind)


def plugin_for(run: Run) -> RunPlugin:
    """Both sides of `run`'s kind (the cost estimate renders units to price them)."""
    return plugin_of(run.kind)


def executor_for(run: Run) -> RunExecutor:
    return plugin_of(run.kind)


def starter_of(kind: str) -> RunStarter:
    return plugin_of(kind)


def registered_kinds() -> list[str]:
    return sorted(settings.RUN_KINDS)
