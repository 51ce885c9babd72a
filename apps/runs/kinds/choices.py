"""Choice scoring by log-likelihood: dataset × endpoint × template version → for each item, the
option the model finds most likely, without generating anything (UltraEval's "PPL" mode,
lm-eval-harness's multiple_choice).

For each item:
- the *context* is the template rendered as for a generation run, its messages' contents
  joined by a blank line (a completions API has no roles), trailing spaces and tabs removed
  (one would merge with the continuation's space into a token that starts in the context);
- each option's *continuation* is `JOIN` (one space) + the option text, and the prompt sent is
  context + continuation; all options of the item go in one request (a list prompt) with
  `echo`, `logprobs=1`, `max_tokens=0` (apps.runs.engine.llm.LLM.prompt_logprobs);
- an option's log-likelihood is the sum of the log-probabilities of the tokens that *start* in
  its continuation (text_offset ≥ len(context), counted from where the prompt starts in the
  echoed text, and before the prompt's end: a token a server generates anyway is left out);
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
token of its own, or log-probabilities that are all 0 (a server that does not compute them:
llama.cpp scored every choice 0). Before a run is created the endpoint is probed
(`check_prompt_logprobs`): a chat-only endpoint or one without real log-probabilities is refused
with the cause, and no run is left behind.
"""

from argparse import ArgumentParser
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
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Echo, PromptLogprobs, check_prompt_logprobs
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


def continuation_logprob(echoed: PromptLogprobs, prompt: str, context: str) -> tuple[float, int]:
    """(sum of the log-probabilities, number of tokens) of the tokens starting in the
    continuation, i.e. at or after len(context) and before the end of `prompt`."""
    base = max(echoed.text.find(prompt), 0)  # a server may put a BOS text before the prompt
    start, end = base + len(context), base + len(prompt)
    values = [
        value
        for value, offset in zip(echoed.logprobs, echoed.offsets, strict=True)
        if start <= offset < end
    ]
    if not values:
        raise ScoringError("no token starts in its continuation")
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
        return ChoiceContext(renderer, list(setup.option_columns), setup.label_type)

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

    async def perform(  # type: ignore[override]
        self, run: Run, ctx: ChoiceContext, unit: ChoiceUnit, call: Call
    ) -> Result:
        if unit.error:
            return self.failed_result(run, ctx, unit, unit.error_kind, unit.error)
        prompts = [unit.context + JOIN + option for option in unit.options]
        echo = await call.prompt_logprobs(prompts)  # LLMError: the engine records the failure
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


def check_first_item(
    dataset: Dataset, template: PromptTemplate, columns: list[str], kind: str
) -> None:
    """The first item renders and has its options, or ChoiceRunError says why (a wrong mapping
    shows here, not as every item failing)."""
    row = dataset.items.order_by("position").values(*ItemData.VALUES).first()
    if row is None:
        raise ChoiceRunError(f"Dataset {dataset} has no items.")
    item = ItemData.from_values(row)
    try:
        rendered = PromptRenderer.for_template(template, dataset.pk).render(item, preview=True)
        item_options(item.fields, columns, kind)
    except (PromptError, OptionsError) as exc:
        raise ChoiceRunError(f"Item {item.key}: {exc}") from None
    if rendered.missing:
        raise ChoiceRunError(
            f"The template uses {', '.join(rendered.missing)}, which item {item.key} of "
            f"{dataset} does not have."
        )


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
    check_first_item(dataset, template, columns, kind)
    if probe:
        # Outside the transaction: a network round trip must not hold the database.
        check = check_prompt_logprobs(endpoint)
        if not check.ok:
            raise ChoiceRunError(
                f"Endpoint {endpoint.name} cannot score choices by log-likelihood: "
                f"{check.message}. Choice scoring needs a completions API that returns prompt "
                "log-probabilities (echo + logprobs), as vLLM serves."
            )
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
        ChoiceSetup.objects.create(run=run, option_columns=columns, label_type=kind)
        launch(run, Run.Mode.RESUME)
    return run


CHOICE = ChoicePlugin()  # named in settings.RUN_KINDS
