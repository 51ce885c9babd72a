"""Choice scoring by log-likelihood: dataset × endpoint × template version → for each item, the
option the model finds most likely, without generating anything (UltraEval's "PPL" mode,
lm-eval-harness's multiple_choice).

For each item:
- the *context* is the template rendered as for a generation run, its messages' contents
  joined by a blank line (a completions API has no roles), trailing spaces and tabs removed
  (one would merge with the continuation's space into a token that starts in the context);
- each option's *continuation* is `JOIN` (one space) + the option text, and the prompt sent is
  context + continuation; all options of the item go in one request (a list prompt) with
  `echo`, `logprobs=1`, `max_tokens=0` (apps.runs.engine.llm.LLM.prompt_logprobs), or as the
  probe found the endpoint must be asked (`Asking`: one request per option, max_tokens 1);
- an option's log-likelihood is the sum of the log-probabilities of the tokens that *start* in
  its continuation (text_offset ≥ len(context), counted from where the prompt starts in the
  echoed text, and before the prompt's end: a token a server generates anyway is left out),
  once the offsets are checked against the tokens' text (`offset_shift`, corrected by a known
  shift when every token then fits) and those tokens spell the continuation;
- the raw pick is the option with the greatest sum; the normalised pick the greatest sum per
  character of the option text (Python characters, the leading space not counted: what
  lm-eval-harness's acc_norm divides by). Characters, not tokens: a token count depends on the
  model's tokenizer, so two models would be normalised differently; per character the same
  option is measured the same for every model. Ties go to the first option (numpy's argmax).

The Response's text is the raw pick's label, so a multiple-choice judge reads it like any
answer; `Response.details` keeps both picks and every option's scores, which the log-likelihood
choice judge (apps.judges, kind "choice") turns into accuracy and accuracy_norm on the board.

Failures are the item's, with a plain message: a template or option that cannot be read, an
API error after retries, a reply without log-probabilities, an option whose continuation has no
token of its own, offsets that do not point at the tokens' text, or log-probabilities that are
all 0 (a server that does not compute them: llama.cpp scored every choice 0). Before a run is
created the endpoint is probed with the dataset's first item, sent exactly as the run will send
it (`probe_endpoint`): a chat-only endpoint, one without real log-probabilities or with offsets
that cannot be trusted is refused with the cause, and no run is left behind; one that refuses a
list of prompts (llama-cpp-python's server) is asked one option at a time.
"""

from argparse import ArgumentParser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from apps.datasets.models import Dataset, Item
from apps.datasets.options import (
    OptionsError,
    default_option_columns,
    item_options,
    labels_for,
)
from apps.runs.engine.contract import Call, Result
from apps.runs.engine.errors import LLMError
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import LLM, Attempt, Echo, PromptLogprobs, probe_client, run_async
from apps.runs.kinds.generation import Failure, GenerationPlugin, GenerationUnit
from apps.runs.models import (
    ChoiceSetup,
    Endpoint,
    ErrorKind,
    LoggingMode,
    PromptTemplate,
    Response,
    Run,
)
from apps.runs.prompts import ItemData, PromptError, PromptRenderer

JOIN = " "  # between the context and each option


class ChoiceRunError(ValueError):
    """A choice-scoring run that cannot be made; the message says why (nothing was saved)."""


def choice_context(messages: list[dict[str, str]]) -> str:
    """The rendered template as one text for a completions API (see the module doc)."""
    return "\n\n".join(message["content"] for message in messages).rstrip(" \t")


@dataclass(slots=True)
class OptionScore:
    label: str
    text: str
    logprob: float  # the sum over the continuation's tokens
    tokens: int
    chars: int

    @property
    def per_char(self) -> float:
        return self.logprob / self.chars

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "text": self.text,
            "logprob": self.logprob,
            "tokens": self.tokens,
            "chars": self.chars,
            "logprob_per_char": self.per_char,
        }


@dataclass(slots=True)
class Picks:
    raw: str
    norm: str
    options: list[OptionScore]


class ScoringError(ValueError):
    """The reply cannot give this item's log-likelihoods; the message says which option/why."""


# Where a server's text_offset may be off by a known amount, tried in this order after 0:
# llama-cpp-python counts each offset in a text that starts with the tokenizer's space prefix,
# so every token after the first is said to start one character late.
KNOWN_SHIFTS = (1, -1)


def _checkable(token: str) -> bool:
    """Whether a token's text can be looked for in the echoed text: not empty, not a byte
    fragment of a character ("bytes:\\xe2", or a lone replacement character)."""
    return bool(token) and not token.startswith("bytes:") and "\ufffd" not in token


def _fits(echoed: PromptLogprobs, shift: int) -> bool:
    """Whether every checkable token's text is in the echoed text at its offset - `shift`.
    The first token may carry a space the text lacks (a tokenizer's space prefix), or point
    before the text once shifted."""
    text = echoed.text
    for index, (token, offset) in enumerate(zip(echoed.tokens, echoed.offsets, strict=True)):
        at = offset - shift
        if not _checkable(token):
            continue
        if index == 0 and (at < 0 or text.startswith(token.removeprefix(" "), max(at, 0))):
            continue
        if at < 0 or text[at : at + len(token)] != token:
            return False
    return True


def offset_shift(echoed: PromptLogprobs) -> int:
    """How far the server's text_offset values are from where its tokens' text is in the echoed
    text: 0 when they point right, else a shift of `KNOWN_SHIFTS` that makes every token's text
    fit; ScoringError naming the first token out of place when none does."""
    for shift in (0, *KNOWN_SHIFTS):
        if _fits(echoed, shift):
            return shift
    text = echoed.text
    for index, (token, offset) in enumerate(zip(echoed.tokens, echoed.offsets, strict=True)):
        if index and _checkable(token) and text[offset : offset + len(token)] != token:
            raise ScoringError(
                f"the token offsets do not point at the tokens' text (token {index} "
                f"{token!r} is said to start at {offset}, where the text reads "
                f"{text[offset : offset + len(token)]!r})"
            )
    raise ScoringError("the token offsets do not point at the tokens' text")


def continuation_logprob(echoed: PromptLogprobs, prompt: str, context: str) -> tuple[float, int]:
    """(sum of the log-probabilities, number of tokens) of the tokens starting in the
    continuation, i.e. at or after len(context) and before the end of `prompt`, once their
    offsets are checked against their text (`offset_shift`) and they are seen to spell the
    continuation; ScoringError otherwise."""
    base = echoed.text.find(prompt)  # a server may put a BOS text before the prompt
    if base < 0:
        raise ScoringError("the endpoint did not echo the prompt as it was sent")
    shift = offset_shift(echoed)
    start, end = base + len(context), base + len(prompt)
    inside = [index for index, offset in enumerate(echoed.offsets) if start <= offset - shift < end]
    if not inside:
        raise ScoringError("no token starts in its continuation")
    before = inside[0] - 1
    token = echoed.tokens[before] if before >= 0 else ""
    if _checkable(token) and echoed.offsets[before] - shift + len(token) > start:
        raise ScoringError(
            f"the token {token!r} spans the context's end and the option's start, so no "
            "log-probability is the option's alone"
        )
    tokens = [echoed.tokens[index] for index in inside]
    if all(_checkable(token) for token in tokens) and "".join(tokens) != prompt[len(context) :]:
        raise ScoringError(
            f"the tokens at its offsets spell {''.join(tokens)!r}, not its continuation "
            f"{prompt[len(context) :]!r}"
        )
    values = [echoed.logprobs[index] for index in inside]
    if any(value is None for value in values):
        raise ScoringError("the endpoint gave no log-probability for a token of it")
    return float(sum(v for v in values if v is not None)), len(values)


def pick(context: str, labels: list[str], options: list[str], echo: Echo) -> Picks:
    """Both picks from the echoed log-probabilities of context + JOIN + each option."""
    scores = []
    for label, option, echoed in zip(labels, options, echo.prompts, strict=True):
        prompt = context + JOIN + option
        try:
            total, count = continuation_logprob(echoed, prompt, context)
        except ScoringError as exc:
            raise ScoringError(f"Option {label}: {exc}.") from None
        scores.append(OptionScore(label, option, total, count, len(option)))
    if all(score.logprob == 0 for score in scores):
        raise ScoringError(
            "Every option's log-probability is 0: the endpoint does not compute them, so "
            "every option would score the same."
        )
    raw = max(range(len(scores)), key=lambda i: (scores[i].logprob, -i))
    norm = max(range(len(scores)), key=lambda i: (scores[i].per_char, -i))
    return Picks(scores[raw].label, scores[norm].label, scores)


@dataclass(frozen=True, slots=True)
class Asking:
    """How a run asks its endpoint for the options' log-probabilities (ChoiceSetup's fields,
    found by `probe_endpoint`): all options in one request (a list prompt) or one request
    each, and the max_tokens sent (0; 1 where a server reads 0 as "no limit")."""

    one_prompt_per_request: bool = False
    max_tokens: int = 0


async def ask(
    prompts: list[str],
    asking: Asking,
    send: Callable[[list[str], int], Awaitable[Echo]],
) -> Echo:
    """The echo of every prompt, asked as `asking` says through `send(prompts, max_tokens)`;
    one request per prompt is merged into one Echo (tokens, cost, latency and requests added)."""
    if not asking.one_prompt_per_request:
        return await send(prompts, asking.max_tokens)
    echoes = [await send([prompt], asking.max_tokens) for prompt in prompts]
    return Echo(
        [echo.prompts[0] for echo in echoes],
        sum(echo.prompt_tokens for echo in echoes),
        sum(echo.completion_tokens for echo in echoes),
        sum(echo.cost for echo in echoes),
        sum(echo.latency_ms for echo in echoes),
        sum(echo.attempts for echo in echoes),
    )


@dataclass(slots=True)
class ChoiceUnit(GenerationUnit):
    context: str = ""
    labels: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    error_kind: str = ""


@dataclass
class ChoiceContext:
    renderer: PromptRenderer
    columns: list[str]
    label_type: str
    asking: Asking = field(default_factory=Asking)


@dataclass(slots=True)
class Scored:
    echo: Echo
    picks: Picks
    label_type: str
    context_chars: int


class ChoicePlugin(GenerationPlugin):
    """Units are items (one epoch): a Response per item like a generation run, so resume,
    retry failed and overwrite work the same way."""

    kind = Run.Kind.CHOICE

    def prepare(self, run: Run) -> ChoiceContext:  # type: ignore[override]
        setup = ChoiceSetup.objects.get(run=run)
        renderer = PromptRenderer.for_template(run.template, item_dataset_id=run.dataset_id)
        asking = Asking(setup.one_prompt_per_request, setup.max_tokens)
        return ChoiceContext(renderer, list(setup.option_columns), setup.label_type, asking)

    def load_units(  # type: ignore[override]
        self, run: Run, ctx: ChoiceContext, keys: list[str]
    ) -> list[ChoiceUnit]:
        ids = [int(key) for key in keys]
        units = []
        for row in Item.objects.filter(id__in=ids).values(*ItemData.VALUES):
            item = ItemData.from_values(row)
            unit = ChoiceUnit(str(item.id), item.id, 0, [])
            try:
                unit.messages = ctx.renderer.render(item).messages
                unit.context = choice_context(unit.messages)
            except PromptError as exc:
                unit.error, unit.error_kind = str(exc), ErrorKind.TEMPLATE
            if not unit.error:
                try:
                    unit.options = item_options(item.fields, ctx.columns, ctx.label_type)
                    unit.labels = labels_for(ctx.label_type, len(unit.options))
                except OptionsError as exc:
                    unit.error, unit.error_kind = f"Bad item data: {exc}", ErrorKind.INTERNAL
            units.append(unit)
        return units

    async def perform(self, run: Run, ctx: ChoiceContext, unit: ChoiceUnit, call: Call) -> Result:
        if unit.error:
            return self.failed_result(run, ctx, unit, unit.error_kind, unit.error)
        prompts = [unit.context + JOIN + option for option in unit.options]

        async def send(some: list[str], most: int) -> Echo:
            return await call.prompt_logprobs(some, max_tokens=most)

        echo = await ask(prompts, ctx.asking, send)  # LLMError: the engine records the failure
        try:
            picks = pick(unit.context, unit.labels, unit.options, echo)
        except ScoringError as exc:
            if call.log and call.log[-1].ok:  # answered, but it cannot be scored: say so
                call.log[-1].ok = False
                call.log[-1].error_kind = ErrorKind.API_ERROR
                call.log[-1].error = str(exc)
            return Result(
                unit.key,
                unit.item_id,
                False,
                data=Failure(ErrorKind.API_ERROR, str(exc), echo.attempts),
            )
        scored = Scored(echo, picks, ctx.label_type, len(unit.context))
        return Result(unit.key, unit.item_id, True, data=scored)

    @staticmethod
    def _row(run: Run, result: Result, epoch: int) -> Response:
        if not result.ok:
            return GenerationPlugin._row(run, result, epoch)
        scored: Scored = result.data
        echo, picks = scored.echo, scored.picks
        return Response(
            run_id=run.pk,
            item_id=result.item_id,
            status=Response.Status.OK,
            text=picks.raw,
            finish_reason="logprobs",
            prompt_tokens=echo.prompt_tokens,
            completion_tokens=echo.completion_tokens,
            latency_ms=echo.latency_ms,
            cost=echo.cost,
            attempts=echo.attempts,
            launch=run.launch,
            epoch=epoch,
            details={
                "pick": picks.raw,
                "pick_norm": picks.norm,
                "label_type": scored.label_type,
                "join": JOIN,
                "context_chars": scored.context_chars,
                "options": [option.as_dict() for option in picks.options],
            },
        )

    # -- the command line ---------------------------------------------------------------------
    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dataset", type=int, required=True, help="dataset id")
        parser.add_argument("--endpoint", required=True, help="endpoint name (completions API)")
        parser.add_argument("--template", required=True, help="prompt template name")
        parser.add_argument("--template-version", type=int, help="default: the latest version")
        parser.add_argument(
            "--options",
            default="",
            help="option columns in label order, comma-separated (default: columns named "
            "A, B, C… or 1, 2, 3…); one column may hold a list of options",
        )
        parser.add_argument(
            "--labels",
            choices=[t.value for t in ChoiceSetup.LabelType],
            help="option labels (default: as the option columns are named, else upper)",
        )
        parser.add_argument("--label", default="", help="the model's name on leaderboards")
        parser.add_argument(
            "--logging", choices=[m.value for m in LoggingMode], default=LoggingMode.FAILED.value
        )
        parser.add_argument("--chunk-size", type=int, default=200)

    def create_from_cli(self, options: dict[str, Any], user: Any) -> Run:
        from django.core.management.base import CommandError

        dataset = Dataset.objects.filter(pk=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"No dataset with id {options['dataset']}.")
        endpoint = Endpoint.objects.filter(name=options["endpoint"]).first()
        if endpoint is None:
            names = ", ".join(Endpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No endpoint named {options['endpoint']!r} (there are: {names}).")
        templates = PromptTemplate.objects.filter(task_id=dataset.task_id, name=options["template"])
        if options.get("template_version"):
            templates = templates.filter(version=options["template_version"])
        template = templates.order_by("-version").first()
        if template is None:
            raise CommandError(f"No template {options['template']!r} in task {dataset.task.slug}.")
        columns = [c.strip() for c in (options.get("options") or "").split(",") if c.strip()]
        try:
            return create_choice_run(
                dataset,
                endpoint,
                template,
                option_columns=columns or None,
                label_type=options.get("labels") or None,
                user=user,
                label=options.get("label") or "",
                logging_mode=options.get("logging") or LoggingMode.FAILED,
                chunk_size=options.get("chunk_size") or 200,
            )
        except ChoiceRunError as exc:
            raise CommandError(str(exc)) from None


def resolve_options(
    dataset: Dataset, option_columns: list[str] | None, label_type: str | None
) -> tuple[list[str], str]:
    """The option columns and label type a run of `dataset` uses: those given, else the
    columns named like labels; ChoiceRunError when there are none or a column is unknown."""
    found, detected = default_option_columns(dataset.columns)
    columns = list(option_columns) if option_columns else found
    if not columns:
        raise ChoiceRunError(
            f"Dataset {dataset} has no columns named A, B, C… or 1, 2, 3…: choose the option "
            "columns."
        )
    unknown = [column for column in columns if column not in dataset.columns]
    if unknown:
        raise ChoiceRunError(
            f"Dataset {dataset} has no column {', '.join(map(repr, unknown))} "
            f"(its columns: {', '.join(dataset.columns)})."
        )
    if label_type is None:
        label_type = detected if columns == found else "upper"
    if label_type not in ChoiceSetup.LabelType.values:
        raise ChoiceRunError(f"Labels must be upper, lower or digit, not {label_type!r}.")
    return columns, label_type


@dataclass(slots=True)
class FirstItem:
    """The first item of a dataset as a run would score it (what the probe sends)."""

    key: str
    context: str
    labels: list[str]
    options: list[str]


def check_first_item(
    dataset: Dataset, template: PromptTemplate, columns: list[str], kind: str
) -> FirstItem:
    """The first item renders and has its options, or ChoiceRunError says why (a wrong mapping
    shows here, not as every item failing)."""
    row = dataset.items.order_by("position").values(*ItemData.VALUES).first()
    if row is None:
        raise ChoiceRunError(f"Dataset {dataset} has no items.")
    item = ItemData.from_values(row)
    try:
        rendered = PromptRenderer.for_template(template, dataset.pk).render(item, preview=True)
        options = item_options(item.fields, columns, kind)
    except (PromptError, OptionsError) as exc:
        raise ChoiceRunError(f"Item {item.key}: {exc}") from None
    if rendered.missing:
        raise ChoiceRunError(
            f"The template uses {', '.join(rendered.missing)}, which item {item.key} of "
            f"{dataset} does not have."
        )
    context = choice_context(rendered.messages)
    return FirstItem(item.key, context, labels_for(kind, len(options)), options)


class ProbeRefused(ValueError):
    """The endpoint cannot score choices; the message is the cause."""


def _generated(echo: Echo, prompts: list[str]) -> bool:
    """Whether the server made tokens after the prompts although asked for none."""
    return echo.completion_tokens > 0 or any(
        echoed.text.find(prompt) + len(prompt) < len(echoed.text)
        for echoed, prompt in zip(echo.prompts, prompts, strict=True)
    )


async def _ask_first(llm: LLM, prompts: list[str]) -> tuple[Asking, Echo, str]:
    """The first item's echo, asked as a run would ask it: all its options in one request with
    max_tokens 0; where that list is answered with an error status, one request per option
    with max_tokens 1 (the server that refuses lists, llama-cpp-python's, reads 0 as "no
    limit"). (how, echo, a note on what was found); LLMError when neither way is answered."""
    log: list[Attempt] = []
    try:
        echo = await llm.prompt_logprobs(prompts, log=log, item_id=0)
    except LLMError as exc:
        if exc.fatal or exc.status is None or len(prompts) < 2:
            raise
        asking = Asking(one_prompt_per_request=True, max_tokens=1)
        refused = exc.message
    else:
        if not _generated(echo, prompts):
            return Asking(), echo, ""
        asking = Asking(max_tokens=1)
        return asking, echo, "it generated tokens when asked for none, so it is sent max_tokens 1"

    async def send(some: list[str], most: int) -> Echo:
        return await llm.prompt_logprobs(some, log=log, item_id=0, max_tokens=most)

    try:
        echo = await ask(prompts, asking, send)
    except LLMError as exc:
        raise LLMError(
            exc.kind,
            f"a list of {len(prompts)} prompts was refused ({refused}), and one prompt alone "
            f"too: {exc.message}",
            fatal=exc.fatal,
            status=exc.status,
        ) from None
    return asking, echo, f"it refused a list of prompts ({refused}), so each option is sent alone"


async def _probe(endpoint: Endpoint, first: FirstItem) -> tuple[Asking, str]:
    prompts = [first.context + JOIN + option for option in first.options]
    llm = probe_client(endpoint)
    try:
        asking, echo, note = await _ask_first(llm, prompts)
    except LLMError as exc:
        raise ProbeRefused(exc.message) from None  # scrubbed by the client
    finally:
        await llm.close()
    try:
        pick(first.context, first.labels, first.options, echo)
    except ScoringError as exc:
        raise ProbeRefused(f"item {first.key}: {str(exc).rstrip('.')}") from None
    return asking, note


def probe_endpoint(endpoint: Endpoint, first: FirstItem) -> tuple[Asking, str]:
    """How a run can ask `endpoint` for the options' log-probabilities, found by scoring the
    dataset's first item exactly as the run will (`_ask_first`), its offsets checked against
    its tokens' text (`continuation_logprob`): (how, a note on what was found, blank when
    nothing was odd), or ProbeRefused with the cause."""
    return run_async(_probe(endpoint, first))


def create_choice_run(
    dataset: Dataset,
    endpoint: Endpoint,
    template: PromptTemplate,
    *,
    option_columns: list[str] | None = None,
    label_type: str | None = None,
    user: Any = None,
    label: str = "",
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 200,
    probe: bool = True,
) -> Run:
    """A new choice-scoring run, launched; ChoiceRunError (and no run) when the dataset, the
    template or the endpoint cannot do it. The endpoint is asked first (`probe`): a chat-only
    endpoint, or one whose log-probabilities are missing or all 0, is refused with the cause."""
    if template.task_id != dataset.task_id:
        raise ChoiceRunError("The template belongs to another task than the dataset.")
    columns, kind = resolve_options(dataset, option_columns, label_type)
    first = check_first_item(dataset, template, columns, kind)
    asking = Asking()
    if probe:
        # Outside the transaction: a network round trip must not hold the database.
        try:
            asking, _ = probe_endpoint(endpoint, first)
        except ProbeRefused as exc:
            raise ChoiceRunError(
                f"Endpoint {endpoint.name} cannot score choices by log-likelihood: {exc}. "
                "Choice scoring needs a completions API that returns prompt log-probabilities "
                "(echo + logprobs) whose token offsets point at the tokens' text, as vLLM "
                "serves."
            ) from None
    with transaction.atomic():
        run = Run.objects.create(
            task_id=dataset.task_id,
            kind=Run.Kind.CHOICE,
            dataset=dataset,
            endpoint=endpoint,
            template=template,
            label=label
            or f"{endpoint.model} · {template.name} v{template.version} · log-likelihood",
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            total=dataset.items.count(),
            created_by=user if getattr(user, "pk", None) else None,
        )
        ChoiceSetup.objects.create(
            run=run,
            option_columns=columns,
            label_type=kind,
            one_prompt_per_request=asking.one_prompt_per_request,
            max_tokens=asking.max_tokens,
        )
        launch(run, Run.Mode.RESUME)
    return run


CHOICE = ChoicePlugin()  # named in settings.RUN_KINDS
