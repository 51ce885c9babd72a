"""Generation runs: dataset × endpoint × template version → one Response per item and epoch."""

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
from apps.runs.engine.launch import launch
from apps.runs.engine.llm import Reply
from apps.runs.estimate import evenly_spaced
from apps.runs.models import Endpoint, ErrorKind, LoggingMode, PromptTemplate, Response, Run
from apps.runs.prompts import ItemData, PromptError, PromptRenderer
from apps.runs.response_schema import clean_schema


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
        responses = self._responses(run)
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
        ids = Item.objects.filter(dataset_id=run.dataset_id).order_by("position")
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

    def load_units(self, run: Run, ctx: PromptRenderer, keys: list[str]) -> list[GenerationUnit]:
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

    def sample_keys(self, run: Run, n: int) -> tuple[list[str], int]:
        ids = list(
            Item.objects.filter(dataset_id=run.dataset_id)
            .order_by("position")
            .values_list("id", flat=True)
        )
        chosen = evenly_spaced(ids, max(1, n // run.epochs))
        keys = [unit_key(item_id, epoch) for item_id in chosen for epoch in range(run.epochs)]
        return keys, len(ids) * run.epochs

    def planned_requests(self, run: Run, ctx: Any, unit: GenerationUnit) -> list[PlannedRequest]:
        if unit.error:
            return []
        params = {"seed": unit.seed} if unit.seed is not None else {}
        return [PlannedRequest(unit.messages, params, epoch=unit.epoch)]

    async def perform(self, run: Run, ctx: Any, unit: GenerationUnit, call: Call) -> Result:
        if unit.error:
            return self.failed_result(run, ctx, unit, ErrorKind.TEMPLATE, unit.error)
        params = {"seed": unit.seed} if unit.seed is not None else {}
        # No database here (async): everything comes in the unit. LLMError: the engine
        # records the failure.
        reply = await call.chat(unit.messages, epoch=unit.epoch, **params)
        return Result(unit.key, unit.item_id, True, data=reply)

    def failed_result(
        self, run: Run, ctx: Any, unit: GenerationUnit, error_kind: str, message: str
    ) -> Result:
        return Result(unit.key, unit.item_id, False, data=Failure(error_kind, message))

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress:
        """Write each unit's response exactly once per launch; count what was really written."""
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
            )
        except ValueError as exc:  # a budget it cannot keep
            raise CommandError(str(exc)) from None


def not_ready(dataset: Dataset) -> str:
    if dataset.is_draft:
        return (
            f"Dataset {dataset} (id {dataset.pk}) is a draft: review and publish its items "
            "before a run uses it."
        )
    return f"Dataset {dataset} (id {dataset.pk}) is not ready ({dataset.get_status_display()})."


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
) -> Run:
    """A new generation run, launched (its jobs are enqueued when the transaction commits);
    `batch` sends it through the provider's Batch API (apps.runs.engine.batch); `use_cache` None:
    the default for the endpoint (`Run.default_use_cache`)."""
    if template.task_id != dataset.task_id:
        raise ValueError("The template belongs to another task than the dataset.")
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
            total=dataset.items.count() * epochs,
            created_by=user if getattr(user, "pk", None) else None,
        )
        launch(run, Run.Mode.RESUME)
    return run


GENERATION = GenerationPlugin()  # named in settings.RUN_KINDS
