import logging
import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from apps.datasets.models import Dataset, Item, Task, Versioned, slug_validator
from apps.datasets.values import as_text
from apps.runs import response_schema
from apps.runs.prompts import ItemData, PromptError, PromptRenderer
from apps.runs.signals import run_stopped
from apps.runs.turns import dialogue


class ErrorKind(models.TextChoices):
    """Why an attempt failed. Failures are never scored; their logs are kept."""

    API_ERROR = "api_error", "API error"
    TIMEOUT = "timeout", "Timeout"
    UNPARSEABLE = "unparseable", "Unparseable reply"
    MISSING_SUBJECT = "missing_subject", "Missing subject"
    OUT_OF_RANGE = "out_of_range", "Out of range"
    TEMPLATE = "template", "Template error"
    INTERNAL = "internal", "Internal error"
    # A judge run item whose generation run has no answer: judging it again cannot help until
    # the generation run answers (its own "retry failed"), so it is kept apart from the rest.
    NO_RESPONSE = "no_response", "No response: generation failed"


# How Run.error records a failure of the run as a whole: a fatal endpoint error is one plain
# line after this prefix (engine.ChunkRunner.fatal); anything else is a crashed job's traceback.
STOPPED = "Stopped: "
logger = logging.getLogger(__name__)
_FRAME = re.compile(r'^\s+File "')
# "module.ExceptionName: message" (the message may be missing).
_EXCEPTION_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::[ \t]?(?P<message>.*))?$")
# An absolute server path (POSIX or Windows), not the path of a URL ("http://host/v1/…").
_SERVER_PATH = re.compile(
    r"(?<![\w:/.\\-])(?:[A-Za-z]:)?[/\\](?:[\w.@+-]+[/\\])+(?P<name>[\w.@+-]*)"
)
CAUSE_LENGTH = 300


def usd(amount: float | None) -> str:
    """Dollars as pages show them: cents from $1, four decimals below ("$0.00" for none)."""
    if not amount:
        return "$0.00"
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def failure_cause(error: str) -> str:
    """One line of plain words for a whole-run failure recorded as `error` (see STOPPED).

    From a traceback: its exception line (the last line of the exception, not a frame), the
    exception's module dropped, and only the message for our own exceptions (apps.*), which are
    written for people. Server paths become their last part, so no page tells where code lives.
    """
    text = error.strip()
    if text.startswith(STOPPED):
        line = text[len(STOPPED) :]
    else:
        line = _exception_line(text)
        if match := _EXCEPTION_LINE.match(line):
            name, message = match["name"], (match["message"] or "").strip()
            if name.startswith("apps.") and message:
                line = message
            else:
                short = name.rsplit(".", 1)[-1]
                line = f"{short}: {message}" if message else short
    line = " ".join(line.split())
    line = _SERVER_PATH.sub(lambda m: f"…/{m['name']}", line)
    return line if len(line) <= CAUSE_LENGTH else line[: CAUSE_LENGTH - 1] + "…"


def _exception_line(traceback_text: str) -> str:
    """The first unindented line after the last frame (a message may go on below it)."""
    lines = traceback_text.splitlines()
    frames = [n for n, line in enumerate(lines) if _FRAME.match(line)]
    if frames:
        for line in lines[frames[-1] + 1 :]:
            if line.strip() and not line[0].isspace():
                return line
    return next((line for line in reversed(lines) if line.strip()), "")


class LLMCall(models.Model):
    """The columns every row that records a model call's outcome shares: responses, judge
    rounds and their archive, pairwise comparisons, attempt logs. One definition, so that they
    agree on types and names (a price sums the same way whatever the row)."""

    raw_reply = models.TextField(blank=True)  # what the model said, as it said it
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0.0)  # USD, at the endpoint's price
    latency_ms = models.PositiveIntegerField(default=0)
    error_kind = models.CharField(max_length=32, choices=ErrorKind.choices, blank=True)
    error = models.TextField(blank=True)
    launch = models.PositiveIntegerField(default=0)  # the run launch that wrote the row

    # What a launch writes into such a row (with the model's own result fields).
    CALL_FIELDS = (
        "raw_reply",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "latency_ms",
        "error_kind",
        "error",
        "launch",
    )

    class Meta:
        abstract = True


class LoggingMode(models.TextChoices):
    ALL = "all", "All attempts"
    FAILED = "failed", "Failed attempts only"
    NONE = "none", "None"


class Endpoint(models.Model):
    """An OpenAI-compatible chat model. Its stored API key is write-only."""

    name = models.CharField(max_length=100, unique=True, validators=[slug_validator])
    base_url = models.URLField(blank=True, help_text="Blank means OpenAI (or $OPENAI_BASE_URL).")
    model = models.CharField(max_length=200)
    # Who made the model ("openai", "anthropic", "llama"): a judge's bias report compares the
    # values it gives models of its own family with the rest (self-preference, #31.3).
    family = models.CharField(
        max_length=100,
        blank=True,
        help_text="Who made the model, e.g. openai, anthropic, llama: judge bias reports compare "
        "how a judge scores its own family. Blank: unknown.",
    )
    temperature = models.FloatField(null=True, blank=True)
    top_p = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    seed = models.IntegerField(null=True, blank=True)
    extra_params = models.JSONField(default=dict, blank=True)
    api_key_env = models.CharField(max_length=100, blank=True, default="OPENAI_API_KEY")
    # Never rendered, logged or exported: forms show only whether it is set.
    api_key_secret = models.CharField(max_length=500, blank=True)
    concurrency_limit = models.PositiveIntegerField(default=8)
    rpm_limit = models.PositiveIntegerField(null=True, blank=True)
    # Tokens per minute as the provider counts them: the prompt plus max_tokens, reserved when
    # a request is sent (apps.runs.engine.limits.request_tokens).
    tpm_limit = models.PositiveIntegerField(null=True, blank=True)
    timeout_seconds = models.FloatField(default=60.0)
    max_retries = models.PositiveIntegerField(default=4)
    supports_structured_output = models.BooleanField(default=False)
    # The provider offers OpenAI's Batch API (/v1/files + /v1/batches) at this base URL: runs
    # may then be sent as one batch at the batch price instead of request by request.
    supports_batch = models.BooleanField(
        default=False,
        verbose_name="Supports the Batch API",
        help_text="The provider offers OpenAI's Batch API (files + batches) at this base URL: "
        "runs may be sent as a batch, answered within 24 h at the batch price.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_secret(self) -> bool:
        return bool(self.api_key_secret)

    def api_key(self) -> str:
        """The key to send; the stored secret wins over the environment variable."""
        import os

        if self.api_key_secret:
            return self.api_key_secret
        return os.environ.get(self.api_key_env or "OPENAI_API_KEY", "") or settings.OPENAI_API_KEY

    def effective_base_url(self) -> str | None:
        return self.base_url or settings.OPENAI_BASE_URL or None

    def request_params(self) -> dict:
        params = {
            k: v
            for k, v in {
                "temperature": self.temperature,
                "top_p": self.top_p,
                "max_tokens": self.max_tokens,
                "seed": self.seed,
            }.items()
            if v is not None
        }
        return {**params, **(self.extra_params or {})}

    @property
    def is_deterministic(self) -> bool:
        """Whether a request says how to answer the same way again, by what is actually sent
        (extra parameters included): temperature 0 set explicitly, or a seed. An unset
        temperature is sent as nothing, and the provider then samples at its own default
        (OpenAI's is 1), so it does not count (#29.11)."""
        params = self.request_params()
        temperature = params.get("temperature")
        zero = (
            isinstance(temperature, int | float)
            and not isinstance(temperature, bool)
            and temperature == 0
        )
        return zero or params.get("seed") is not None

    def price_per_million(self) -> tuple[float, float]:
        prompt, completion = settings.PRICE_TABLE.get(self.model, (0.0, 0.0))
        return float(prompt), float(completion)

    @property
    def has_price(self) -> bool:
        """Whether the price table lists the model; a listed [0, 0] is a real price (free)."""
        return self.model in settings.PRICE_TABLE

    def cost_is_known(self, cost: float, prompt_tokens: int, completion_tokens: int) -> bool:
        """Whether a recorded cost is what was spent, not a $0 that only means "no price".

        Unknown: the model has no price, or it has one now but these tokens were counted at
        $0 before it was set (the cost of a past attempt is never recomputed).
        """
        if cost > 0:
            return True
        if not self.has_price:
            return False
        return self.cost(prompt_tokens, completion_tokens) == 0

    def unknown_cost_hint(self) -> str:
        """Why a cost of this endpoint is unknown (see `cost_is_known`) and how to set prices."""
        if self.has_price:
            return f"these tokens were counted before “{self.model}” had a price"
        return f"“{self.model}” has no price: set EVALSITE_PRICE_TABLE in .env (see .env.example)"

    def batch_refusal(self) -> str:
        """Why runs on this endpoint cannot be sent as a batch; blank when they can."""
        if self.supports_batch:
            return ""
        return (
            f"Endpoint “{self.name}” is not marked as supporting the Batch API: tick "
            "“Supports the Batch API” on the endpoint if its provider offers /v1/files and "
            "/v1/batches, or start the run without batch mode."
        )

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float:
        """USD for these tokens; `batch` bills them at the Batch API's share of the price."""
        prompt, completion = self.price_per_million()
        usd = (prompt_tokens * prompt + completion_tokens * completion) / 1_000_000
        return usd * settings.BATCH_PRICE_FACTOR if batch else usd


class PromptTemplateQuerySet(models.QuerySet["PromptTemplate"]):
    def latest_versions(self) -> "PromptTemplateQuerySet":
        """The newest version of every template name (one row per task and name)."""
        newer = PromptTemplate.objects.filter(
            task=models.OuterRef("task"),
            name=models.OuterRef("name"),
            version__gt=models.OuterRef("version"),
        )
        return self.exclude(models.Exists(newer))


class PromptTemplate(Versioned):
    """The messages a run sends for an item: a system + user message over item fields, or a
    list of chat messages (`messages`: few-shot assistant turns, the item's conversation; see
    apps/runs/prompts.py). Editing makes a new version."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="templates")
    system_message = models.TextField(blank=True)
    user_message = models.TextField(blank=True)
    # A chat template: [{"role": "system" | "user" | "assistant", "content": template}, and at
    # most one {"role": "conversation"} for the item's conversation]. Empty: the system and
    # user message above (templates made before chat templates keep rendering as they did).
    messages = models.JSONField(default=list, blank=True)
    fewshot_dataset = models.ForeignKey(
        Dataset, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    fewshot_k = models.PositiveIntegerField(default=0)
    fewshot_seed = models.IntegerField(default=0)
    # How one example is written, over the example item's fields.
    fewshot_format = models.TextField(blank=True)
    objects = PromptTemplateQuerySet.as_manager()

    class Meta:
        ordering = ["task", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "name", "version"], name="template_unique_version"
            )
        ]

    def get_absolute_url(self) -> str:
        return reverse("runs:template-detail", args=[self.pk])

    @property
    def is_chat(self) -> bool:
        return bool(self.messages)

    @property
    def sends_conversation(self) -> bool:
        """Whether it sends the item's conversation (what a multi-turn run asks turn by turn)."""
        return any(m.get("role") == "conversation" for m in self.messages or [])

    CONTENT_FIELDS = (
        "system_message",
        "user_message",
        "messages",
        "fewshot_dataset_id",
        "fewshot_k",
        "fewshot_seed",
        "fewshot_format",
    )


class RunQuerySet(models.QuerySet["Run"]):
    def active(self) -> "RunQuerySet":
        return self.filter(status__in=Run.ACTIVE_STATUSES)

    def generation(self) -> "RunQuerySet":
        return self.filter(kind=Run.Kind.GENERATION)

    def judging(self) -> "RunQuerySet":
        return self.filter(kind=Run.Kind.JUDGE)

    def response_sets(self) -> "RunQuerySet":
        """Runs that hold answers: generation runs and response columns."""
        return self.filter(kind__in=Run.RESPONSE_KINDS)

    def for_column(self, dataset: Dataset, column: str) -> "Run":
        """The response set of a dataset's response column, made once (with a Response per
        item: failed where the file has no value) and shared by every run that compares it."""
        if column not in dataset.response_columns:
            known = ", ".join(dataset.response_columns) or "none"
            raise ValueError(
                f"Dataset {dataset} has no response column {column!r} (response columns: {known})."
            )
        with transaction.atomic():
            run, created = Run.objects.get_or_create(
                kind=Run.Kind.COLUMN,
                dataset=dataset,
                source_column=column,
                defaults={"task_id": dataset.task_id, "label": column, "launch": 1},
            )
            if created:
                run.copy_column()
        return run

    def with_names(self) -> "RunQuerySet":
        """What `Run.title` and `Run.cost_known` read, in the same query (lists of runs)."""
        # judged_with: the judge of a judge, check or pairwise run (judges.JudgeRun).
        return self.select_related("dataset", "judged_with__judge", "source_run", "endpoint")


class Run(models.Model):
    """A generation or judge run. This row is the truth about status and progress."""

    class Kind(models.TextChoices):
        GENERATION = "generation", "Generation"
        JUDGE = "judge", "Judge"
        PAIRWISE = "pairwise", "Pairwise"
        # A dataset's response column read as a response set (`Run.objects.for_column`), so
        # pairwise runs compare it like a generation run; nothing is generated or launched.
        COLUMN = "column", "Response column"
        # A judge version judging only held-out reviewed items of a judge run, to measure it
        # against people (apps/judges/learning.py); kept off boards and review queues.
        CHECK = "check", "Judge check"
        # Each item's options scored by their log-likelihood through a completions API
        # (apps/runs/kinds/choices.py): a Response per item whose text is the most likely option's
        # label, with every option's score in `Response.details`.
        CHOICE = "choice", "Choice scoring (log-likelihood)"
        # A generator's prompts asked N times (apps.drafting): makes a draft dataset
        # (Run.dataset) whose items a person reviews before any run may use them.
        GENERATE_DATASET = "gen_dataset", "Dataset generation"
        # A memory script per item (GoodAI's LTM benchmark; apps/runs/kinds/scripts.py): the
        # item's statements, filler up to the information gap, then its question, each a turn;
        # the Response is the answer to the question, with the gap actually realised.
        SCRIPT = "script", "Memory script"
        # A simulated user per item (apps/runs/kinds/simulation.py): another endpoint, with its
        # own prompt and goal, converses with the model for up to K turns or until it says it
        # is done; the Response is the whole transcript, which judges score.
        SIMULATION = "simulation", "Simulated conversation"

    # Kinds whose rows hold Responses: what pairwise runs compare and run pages list.
    RESPONSE_KINDS = (Kind.GENERATION, Kind.COLUMN, Kind.SCRIPT, Kind.SIMULATION)
    # Kinds whose answers judges score as a run (a response column is judged by its column).
    JUDGEABLE_KINDS = (Kind.GENERATION, Kind.CHOICE, Kind.SCRIPT, Kind.SIMULATION)

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        COMPLETED_WITH_FAILURES = "completed_with_failures", "Completed with failures"
        CANCELLED = "cancelled", "Cancelled"
        FAILED = "failed", "Failed"

    class Mode(models.TextChoices):
        """What a launch of the run works on (see apps.runs.engine)."""

        RESUME = "resume", "Items without a result"
        RETRY_FAILED = "retry_failed", "Failed items only"
        OVERWRITE = "overwrite", "Every item again"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)
    TERMINAL_STATUSES = (
        Status.COMPLETED,
        Status.COMPLETED_WITH_FAILURES,
        Status.CANCELLED,
        Status.FAILED,
    )
    STALL_AFTER = timedelta(seconds=90)
    MAX_EPOCHS = 100

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.QUEUED)
    label = models.CharField(max_length=200, blank=True)  # the model's name on leaderboards
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="runs")
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    template = models.ForeignKey(
        PromptTemplate, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    # What a judge run scores: a generation run's responses, or a response column of the dataset.
    source_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="judge_runs"
    )
    source_column = models.CharField(max_length=200, blank=True)
    logging_mode = models.CharField(
        max_length=8, choices=LoggingMode.choices, default=LoggingMode.FAILED
    )
    chunk_size = models.PositiveIntegerField(default=200)
    # Samples per item (generation runs): each item is answered this many times, one Response
    # per epoch, and judges score every epoch (see `judged_epochs`).
    epochs = models.PositiveIntegerField(default=1)
    # Generation runs: the JSON each response must be (apps/runs/response_schema.py, Dynabench's
    # verify_response); {} for free text. An invalid response is kept and judges fail its item.
    response_schema = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost = models.FloatField(default=0.0)
    cancel_requested = models.BooleanField(default=False)
    # When the run failed as a whole: a crashed job's traceback, or "Stopped: …" (see STOPPED).
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Each start, resume, retry or overwrite is a new launch: chunk jobs of an older launch
    # stop at their next check, and results remember the launch that wrote them.
    launch = models.PositiveIntegerField(default=0)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.RESUME)
    # done + failed when this launch started, so items/s measures this launch only.
    progress_base = models.PositiveIntegerField(default=0)
    # Set when the last live chunk found work that a dead worker had taken: resume finishes it.
    interrupted_at = models.DateTimeField(null=True, blank=True)
    # Batch mode: the run's requests go to the provider's Batch API as JSONL files (RunBatch),
    # answered within 24 h at the batch price, instead of request by request (apps.runs.engine.batch).
    batch = models.BooleanField(default=False)
    # Generation runs over conversation items: each user turn is asked in order with the
    # model's own earlier answers in context, one `Turn` row per answered turn (the Response is
    # the whole item). Off: one request per item, as for single-turn prompts.
    multi_turn = models.BooleanField(default=False)
    # Whether identical requests already answered (CachedReply) are reused instead of sent;
    # chosen at creation (see `default_use_cache`), every launch honours it except overwrite.
    use_cache = models.BooleanField(default=True)
    # Requests answered from the cache / sent to the endpoint (retries count as sent), and
    # what the cached ones would have cost at the endpoint's price when they were reused.
    cached_count = models.PositiveIntegerField(default=0)
    sent_count = models.PositiveIntegerField(default=0)
    saved_cost = models.FloatField(default=0.0)
    # A cap on what the run may spend (USD, over all its launches); the engine stops sending
    # before a request could cross it (apps/runs/engine/budget.py). Null: no cap.
    budget_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "source_column"],
                condition=models.Q(kind="column"),
                name="column_run_once",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} run #{self.pk} {self.title}".strip()

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.pk])

    # ---- names -----------------------------------------------------------------
    def copy_column(self) -> None:
        """A response column run's answers, read from its items (`for_column`)."""
        rows = []
        for item_id, fields in Item.objects.filter(dataset_id=self.dataset_id).values_list(
            "pk", "fields"
        ):
            value = (fields or {}).get(self.source_column)
            rows.append(
                Response(
                    run=self,
                    item_id=item_id,
                    status=Response.Status.OK if value is not None else Response.Status.FAILED,
                    text=as_text(value),
                    error=""
                    if value is not None
                    else f"The file has no value in column “{self.source_column}” for this item.",
                    launch=1,
                )
            )
        Response.objects.bulk_create(rows, batch_size=2000)
        failed = sum(row.status == Response.Status.FAILED for row in rows)
        now = timezone.now()
        self.total, self.done, self.failed = len(rows), len(rows) - failed, failed
        self.status = self.Status.COMPLETED_WITH_FAILURES if failed else self.Status.COMPLETED
        self.started_at = self.finished_at = now
        self.save(update_fields=["total", "done", "failed", "status", "started_at", "finished_at"])

    @property
    def holds_responses(self) -> bool:
        return self.kind in self.RESPONSE_KINDS or self.kind == self.Kind.CHOICE

    @property
    def judged_label(self) -> str:
        """What a judge run scores: the generation run's label (its id when it has none),
        or the dataset and column. Blank for generation runs."""
        if self.kind not in (self.Kind.JUDGE, self.Kind.CHECK):
            return ""
        if self.source_run is not None:
            return self.source_run.label or f"run #{self.source_run_id}"
        return f"{self.dataset} · column {self.source_column}"

    @property
    def size_text(self) -> str:
        """How much work the run is, in words: "30 items", or with epochs
        "30 items × 3 epochs = 90 responses" (`total` counts responses then)."""
        if self.kind == self.Kind.GENERATION and self.epochs > 1:
            items = self.total // self.epochs
            return f"{items} items × {self.epochs} epochs = {self.total} responses"
        if self.kind == self.Kind.GENERATE_DATASET:
            return (
                f"{self.total} unit{'s' if self.total != 1 else ''} (content → questions → answers)"
            )
        return f"{self.total} items"

    def response_problem(self, text: str) -> str:
        """Why a response of this run is invalid under its response schema ("" when valid)."""
        return response_schema.check(text, self.response_schema)[0]

    @property
    def response_schema_text(self) -> str:
        return response_schema.describe(self.response_schema) if self.response_schema else ""

    @property
    def judged_epochs(self) -> int:
        """How many responses per item a judge run scores: its generation run's epochs (a
        response column has one)."""
        return self.source_run.epochs if self.source_run is not None else 1

    @property
    def title(self) -> str:
        """The run's name wherever it is listed or headed (after its "#id").

        Judge runs of one judge differ by what they judged, so their title names both, e.g.
        "quality v2 on model-a"; the run's own label leads when it says something more.
        Needs judge, dataset and source_run loaded (`RunQuerySet.with_names`) in lists.
        """
        if self.kind == self.Kind.COLUMN:
            return f"{self.dataset} · column {self.source_column}"
        if self.kind == self.Kind.GENERATE_DATASET:
            return self.label or f"draft {self.dataset}"
        # The judge is judges' row (JudgeRun, `Run.judged_with`): runs shows it, names no model.
        judged_with = getattr(self, "judged_with", None)
        if self.kind not in (self.Kind.JUDGE, self.Kind.CHECK) or judged_with is None:
            return self.label
        judged = self.judged_label
        if self.kind == self.Kind.CHECK:
            return f"{judged_with.judge} checked against reviews of {judged}"
        title = f"{judged_with.judge} on {judged}"
        return f"{self.label} · {title}" if self.label and self.label != judged else title

    # ---- cost ------------------------------------------------------------------
    @property
    def cost_known(self) -> bool:
        """False when `cost` is $0 only because the endpoint's model has no price: shown as
        "—", never as free. Runs without an endpoint (rule-based judges) really cost $0."""
        if self.endpoint is None:
            return True
        return self.endpoint.cost_is_known(self.cost, self.prompt_tokens, self.completion_tokens)

    @property
    def cost_hint(self) -> str:
        """Why the cost is unknown and how to set prices; blank when it is known."""
        if self.endpoint is None or self.cost_known:
            return ""
        return self.endpoint.unknown_cost_hint()

    # ---- state ---------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL_STATUSES

    @property
    def results_fingerprint(self) -> str:
        """Changes whenever the engine writes results for this run: every launch starts a new
        launch, every written chunk moves the counters and the heartbeat, settling moves the
        status. Caches of what only the results decide (review counts and orders, leaderboard
        summaries) key on it. created_at keeps a reused primary key (a new database, a
        rolled-back test) from reading another run's entry."""
        parts = (
            self.pk,
            self.created_at.timestamp() if self.created_at else 0,
            self.launch,
            self.status,
            self.done,
            self.failed,
            self.total,
            self.heartbeat_at.isoformat() if self.heartbeat_at else "",
            self.finished_at.isoformat() if self.finished_at else "",
            self.dataset_id,
        )
        return "|".join(str(part) for part in parts)

    @property
    def is_stalled(self) -> bool:
        """Running, but no worker has reported for a while (or the last one found lost work)."""
        if self.status != self.Status.RUNNING:
            return False
        if self.interrupted_at is not None:
            return True
        if self.heartbeat_at is None:
            return False
        limit = self.STALL_AFTER
        if self.batch:  # a batch run reports at every poll
            limit = max(limit, timedelta(seconds=3 * settings.BATCH_POLL_SECONDS + 30))
        return timezone.now() - self.heartbeat_at > limit

    @property
    def batch_parts(self) -> list["RunBatch"]:
        """The batch files of a batch-mode run, oldest first (the run page)."""
        return list(self.batches.order_by("launch", "part")) if self.batch else []

    @property
    def batch_waiting(self) -> tuple[int, int]:
        """(requests the provider has settled, requests sent) of the batches whose results
        are not written yet: the progress of a batch run, where nothing is written until a
        batch ends."""
        rows = self.batches.unapplied().exclude(batch_id="")
        counts = rows.aggregate(
            settled=models.Sum(F("completed") + F("failed")), sent=models.Sum("requests")
        )
        return counts["settled"] or 0, counts["sent"] or 0

    @property
    def status_label(self) -> str:
        """The status in words. "Run failed", not "Failed": beside the failed-items count it
        must not read as if items failed when the run as a whole did (no item may have)."""
        if self.is_stalled:
            return "Stalled"
        if self.status == self.Status.FAILED:
            return "Run failed"
        return self.get_status_display()

    @property
    def failure_cause(self) -> str:
        """Why the run failed as a whole, in one line; blank unless it did. Shown to everyone."""
        if self.status != self.Status.FAILED:
            return ""
        return failure_cause(self.error) or "no cause was recorded"

    @property
    def failure_traceback(self) -> str:
        """The crashed job's traceback: server paths and code, for admins only (folded)."""
        if self.status != self.Status.FAILED or self.error.startswith(STOPPED):
            return ""
        return self.error

    @property
    def not_run(self) -> int | None:
        """Items a run that has stopped never settled (it failed, or was cancelled, before
        reaching them), so done + failed + not run = total; None while it may still do them."""
        return self.remaining if self.is_terminal else None

    @property
    def can_resume(self) -> bool:
        """Resuming makes sense when the run stopped (or stalled) with items left to do (a
        response column is read, not run: there is nothing to resume)."""
        if self.kind == self.Kind.COLUMN:
            return False
        return (self.is_terminal and self.status != self.Status.COMPLETED) or self.is_stalled

    @property
    def can_retry_failed(self) -> bool:
        if self.kind == self.Kind.COLUMN:
            return False
        return self.failed > 0 and (self.is_terminal or self.is_stalled)

    @property
    def remaining(self) -> int:
        return max(self.total - self.done - self.failed, 0)

    @property
    def percent(self) -> int:
        return int(100 * (self.done + self.failed) / self.total) if self.total else 0

    @property
    def items_per_second(self) -> float | None:
        """The rate of the current launch (a resume does not count the earlier work)."""
        if not self.started_at:
            return None
        end = self.finished_at or timezone.now()
        seconds = (end - self.started_at).total_seconds()
        settled = max(self.done + self.failed - self.progress_base, 0)
        return settled / seconds if seconds > 0 else None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def eta_seconds(self) -> float | None:
        rate = self.items_per_second
        return self.remaining / rate if rate and self.is_active else None

    def mark_running(self) -> None:
        now = timezone.now()
        Run.objects.filter(pk=self.pk, status=self.Status.QUEUED).update(
            status=self.Status.RUNNING, started_at=now, heartbeat_at=now
        )
        self.refresh_from_db()

    def heartbeat(self) -> None:
        Run.objects.filter(pk=self.pk).update(heartbeat_at=timezone.now())

    def add_progress(
        self,
        done: int = 0,
        failed: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float = 0.0,
        cached: int = 0,
        sent: int = 0,
        saved: float = 0.0,
    ) -> None:
        Run.objects.filter(pk=self.pk).update(
            done=F("done") + done,
            failed=F("failed") + failed,
            prompt_tokens=F("prompt_tokens") + prompt_tokens,
            completion_tokens=F("completion_tokens") + completion_tokens,
            cost=F("cost") + cost,
            cached_count=F("cached_count") + cached,
            sent_count=F("sent_count") + sent,
            saved_cost=F("saved_cost") + saved,
            heartbeat_at=timezone.now(),
        )

    def set_budget(self, budget: Any) -> None:
        """A new cap (None: none), e.g. raised to resume a run its budget stopped."""
        Run.objects.filter(pk=self.pk).update(budget_usd=budget)
        self.refresh_from_db()

    def stop_for_budget(self, spent: float) -> bool:
        """The budget is reached: end like a cancel (finished results stay, resume does the
        rest), with the reason in `error`. False when the run had already been stopped."""
        budget = float(self.budget_usd or 0)
        return self.stop_by_itself(
            f"budget of {usd(budget)} reached: {usd(spent)} spent, and the next "
            f"request could cost more than the {usd(max(budget - spent, 0.0))} left"
        )

    def stop_by_itself(self, reason: str) -> bool:
        """End like a cancel (finished results stay, resume does the rest) for `reason`, one
        line in plain words (its budget, a comparison that has decided). False when the run
        was not going or had already been stopped. The engine's chunks see it at their next
        check (apps.runs.engine.lifecycle.stop_itself tells them at once)."""
        changed = Run.objects.filter(
            pk=self.pk, status__in=self.ACTIVE_STATUSES, cancel_requested=False
        ).update(cancel_requested=True, error=f"{STOPPED}{reason}")
        self.refresh_from_db()
        return bool(changed)

    @property
    def stop_reason(self) -> str:
        """Why a cancelled run stopped by itself (its budget, a comparison that decided), in
        one line; blank otherwise."""
        if self.status != self.Status.CANCELLED or not self.error.startswith(STOPPED):
            return ""
        return self.error[len(STOPPED) :]

    @property
    def stopped_by_budget(self) -> bool:
        return self.stop_reason.startswith("budget of ")

    @property
    def cache_text(self) -> str:
        """ "cached 30 / sent 0, saved $0.0120" (blank before any request)."""
        if not self.cached_count and not self.sent_count:
            return ""
        text = f"cached {self.cached_count} / sent {self.sent_count}"
        if self.cached_count and (self.endpoint is None or self.endpoint.has_price):
            text += f", saved {usd(self.saved_cost)}"
        return text

    @staticmethod
    def default_use_cache(kind: str, endpoint: "Endpoint | None") -> bool:
        """Judges reuse cached replies; generation only when its requests are deterministic
        as sent (`Endpoint.is_deterministic`): otherwise a rerun is meant to draw new answers,
        and an unset temperature samples at the provider's default (#29.11)."""
        if kind == Run.Kind.GENERATE_DATASET:
            return False  # its units ask one prompt N times for N different drafts
        if kind != Run.Kind.GENERATION or endpoint is None:
            return True
        return endpoint.is_deterministic

    def request_cancel(self) -> None:
        Run.objects.filter(pk=self.pk).update(cancel_requested=True)
        ended = Run.objects.filter(pk=self.pk, status=self.Status.QUEUED).update(
            status=self.Status.CANCELLED, finished_at=timezone.now()
        )
        self.refresh_from_db()
        if ended:
            self._tell_stopped()

    def mark_failed(self, traceback_text: str) -> None:
        """The run itself broke (a crashed job, a refused API key): it stops where it is."""
        changed = Run.objects.filter(pk=self.pk, status__in=self.ACTIVE_STATUSES).update(
            status=self.Status.FAILED, error=traceback_text, finished_at=timezone.now()
        )
        self.refresh_from_db()
        if changed:
            self._tell_stopped()

    def _tell_stopped(self) -> None:
        """`run_stopped` for later apps (notifications); a receiver that breaks is logged and
        never changes how the run ended."""
        for receiver, error in run_stopped.send_robust(sender=Run, run=self):
            if isinstance(error, Exception):
                logger.error(
                    "run_stopped receiver %s failed on run #%s: %r", receiver, self.pk, error
                )

    def begin_launch(self, mode: str) -> int:
        """Start a new launch (start, resume, retry failed, overwrite) and return its launch.

        The caller then sets the counters to the results this launch keeps (see engine.launch).
        """
        Run.objects.filter(pk=self.pk).update(
            launch=F("launch") + 1,
            mode=mode,
            status=self.Status.QUEUED,
            cancel_requested=False,
            error="",
            started_at=None,
            finished_at=None,
            # The launch is its first sign of life: the recovery (apps.runs.engine.recovery)
            # leaves a launch alone until it has been quiet for a while.
            heartbeat_at=timezone.now(),
            interrupted_at=None,
        )
        self.refresh_from_db()
        return self.launch

    def finish(self, status: str, *, done: int, failed: int) -> bool:
        """Settle an active run in `status` with exact counts; False if it had already ended."""
        changed = Run.objects.filter(pk=self.pk, status__in=self.ACTIVE_STATUSES).update(
            status=status, done=done, failed=failed, finished_at=timezone.now()
        )
        self.refresh_from_db()
        if changed and status == self.Status.CANCELLED:
            self._tell_stopped()
        return bool(changed)

    def mark_interrupted(self) -> None:
        Run.objects.filter(pk=self.pk, status=self.Status.RUNNING).update(
            interrupted_at=timezone.now()
        )


class RunBatchQuerySet(models.QuerySet["RunBatch"]):
    def unapplied(self) -> "RunBatchQuerySet":
        """Batches whose results are not written yet: still at the provider, or being read."""
        return self.filter(applied_at__isnull=True)


class RunBatch(models.Model):
    """One JSONL file of a batch-mode run sent to the provider's Batch API (apps.runs.engine.batch).

    The row is written with its unit keys before anything is uploaded, and each provider id as
    soon as the provider gives it, so a job that dies anywhere finds the same file and batch
    again (by filename and by the file id) instead of uploading twice.
    """

    # The provider's batch statuses (OpenAI's words), and ours before the batch exists.
    PREPARING = "preparing"
    TERMINAL = ("completed", "failed", "expired", "cancelled")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="batches")
    launch = models.PositiveIntegerField()  # the launch that sent it
    part = models.PositiveIntegerField()  # its file's number within that launch
    keys = models.JSONField(default=list)  # the run's units whose requests are in the file
    requests = models.PositiveIntegerField(default=0)  # lines in the file
    input_file_id = models.CharField(max_length=200, blank=True)
    batch_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=32, default=PREPARING)
    # The provider's request_counts, copied at every poll: progress while nothing is written.
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    output_file_id = models.CharField(max_length=200, blank=True)
    error_file_id = models.CharField(max_length=200, blank=True)
    # Why the provider failed the batch as a whole (its errors), API keys scrubbed.
    error = models.TextField(blank=True)
    cancel_sent_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)  # results written
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RunBatchQuerySet.as_manager()

    class Meta:
        ordering = ["run", "launch", "part"]
        constraints = [
            models.UniqueConstraint(fields=["run", "launch", "part"], name="run_batch_once")
        ]

    def __str__(self) -> str:
        return f"run #{self.run_id} batch {self.launch}.{self.part} ({self.status})"

    @property
    def filename(self) -> str:
        """The uploaded file's name: how a job that died after uploading finds it again."""
        return f"evalsite-run-{self.run_id}-l{self.launch}-part-{self.part}.jsonl"

    @property
    def is_over(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def settled(self) -> int:
        return self.completed + self.failed


class ResponseQuerySet(models.QuerySet["Response"]):
    def ok(self) -> "ResponseQuerySet":
        return self.filter(status=Response.Status.OK)

    def failed(self) -> "ResponseQuerySet":
        return self.filter(status=Response.Status.FAILED)

    def answered_items(self, epochs: int = 1) -> "models.QuerySet[Any]":
        """Ids of the items answered in every one of `epochs` epochs (for `__in` filters)."""
        ok = self.ok()
        if epochs == 1:
            return ok.values("item_id")
        return (
            ok.filter(epoch__lt=epochs)
            .values("item_id")
            .annotate(answers=models.Count("pk"))
            .filter(answers__gte=epochs)
            .values("item_id")
        )


def set_names(runs: list[Run]) -> dict[int, str]:
    """Each response set's name where sets are compared: its label (its id when it has none),
    with the id added where two share a label, so two models never read as one."""
    plain = {run.pk: run.label or f"run #{run.pk}" for run in runs}
    counts: dict[str, int] = {}
    for name in plain.values():
        counts[name] = counts.get(name, 0) + 1
    return {pk: f"{name} (#{pk})" if counts[name] > 1 else name for pk, name in plain.items()}


class Response(LLMCall):
    """A generation run's answer to one item: at most one per (run, item, epoch)."""

    class Status(models.TextChoices):
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="responses")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="responses")
    status = models.CharField(max_length=8, choices=Status.choices)
    # The answer: the model's reply as it said it (a choice-scoring run: the picked label).
    # It stands for LLMCall's raw_reply, which a response does not have.
    text = models.TextField(blank=True)
    raw_reply = None  # type: ignore[assignment]  # None takes an inherited field away (Django)
    finish_reason = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # Which of the run's samples of this item it is (0 … Run.epochs − 1).
    epoch = models.PositiveIntegerField(default=0)
    # What a run kind knows beyond the text: a choice-scoring run's picks and every option's
    # log-likelihood (apps/runs/kinds/choices.py). Empty for generation runs.
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ResponseQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "epoch"], name="response_once_per_item_epoch"
            )
        ]
        indexes = [models.Index(fields=["run", "status"])]

    def turns(self) -> list["Turn"]:
        """This response's turns in order (a multi-turn run's; none for a single-turn run)."""
        return list(Turn.objects.filter(run_id=self.run_id, item_id=self.item_id, epoch=self.epoch))

    def turn_answers(self, turns: "list[Turn] | None" = None) -> list[str]:
        """The model's answer to each user turn, in order, up to the first one not answered.
        A single-turn response has one: its text. `turns` (from `Turn.objects.by_response`)
        saves the query when many responses are read."""
        if not self._multi_turn():
            return [self.text] if self.status == self.Status.OK else []
        rows = self.turns() if turns is None else turns
        answers = []
        for number, turn in enumerate(sorted(rows, key=lambda t: t.number), 1):
            if turn.number != number or not turn.is_answered:
                break
            answers.append(turn.text)
        return answers

    def transcript(self, turns: "list[Turn] | None" = None) -> list[dict[str, Any]]:
        """The dialogue as canonical chat messages, ending with the last answer: a multi-turn
        response's item conversation with the model's answers in place (`turns.dialogue`); a
        single-turn one's request (the item's conversation as recorded, or the template's user
        message over a plain item) followed by its answer."""
        answers = self.turn_answers(turns)
        item = self.item
        if self._multi_turn() and (
            not item.is_conversation or self.run.kind != Run.Kind.GENERATION
        ):
            # A run that says its own turns (a memory script, a simulated user): what each
            # turn asked, answered.
            rows = sorted(self.turns() if turns is None else turns, key=lambda t: t.number)
            return [
                message
                for turn in rows[: len(answers)]
                for message in (
                    {"role": "user", "content": turn.asked},
                    {"role": "assistant", "content": turn.text},
                )
            ]
        if self._multi_turn():
            return dialogue(item.messages(), answers)
        asked = item.messages() if item.is_conversation else self._rendered_user_message()
        return asked + [{"role": "assistant", "content": answer} for answer in answers]

    def _rendered_user_message(self) -> list[dict[str, Any]]:
        """The user message the run sent for a plain item, rendered again from its template
        (the few-shot draw is seeded, so it is the same); [] without one, or if it no longer
        renders."""
        template = self.run.template
        if template is None:
            return []
        item = self.item
        data = ItemData(
            id=item.pk,
            dataset_id=item.dataset_id,
            key=item.key,
            position=item.position,
            fields=item.fields,
            reference=item.reference,
            tags=item.tags,
            conversation=item.conversation,
        )
        try:
            rendered = PromptRenderer.for_template(template, self.run.dataset_id).render(data)
        except PromptError:
            return []
        return [dict(m) for m in rendered.messages if m.get("role") != "system"]

    def _multi_turn(self) -> bool:
        return bool(self.run.multi_turn)


class TurnQuerySet(models.QuerySet["Turn"]):
    def answered(self) -> "TurnQuerySet":
        return self.filter(error_kind="")

    def by_response(self, responses: "list[Response]") -> dict[tuple[int, int, int], list["Turn"]]:
        """The turns of many responses in one query, keyed by (run, item, epoch) (the
        `turns` argument of `Response.turn_answers` / `transcript`)."""
        out: dict[tuple[int, int, int], list[Turn]] = {
            (r.run_id, r.item_id, r.epoch): [] for r in responses
        }
        if not out:
            return out
        rows = self.filter(
            run_id__in={r.run_id for r in responses}, item_id__in={r.item_id for r in responses}
        )
        for turn in rows:
            key = (turn.run_id, turn.item_id, turn.epoch)
            if key in out:
                out[key].append(turn)
        return out


class Turn(LLMCall):
    """One user turn of a multi-turn generation run, asked with the model's own earlier
    answers in context: at most one per (run, item, epoch, number), written as the turn
    finishes (answered, or failed with its error), so a resumed run asks from the first turn
    without an answer. The item's Response is written when its last turn is answered or one
    fails: it is the whole item (its text the last answer, its tokens and cost the sums)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="turns")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    epoch = models.PositiveIntegerField(default=0)  # as Response.epoch
    number = models.PositiveIntegerField()  # 1-based: the item's n-th user message
    asked = models.TextField()  # that user message's text
    # The model's answer as it said it ("" when the turn failed); it stands for LLMCall's
    # raw_reply, as Response.text does.
    text = models.TextField(blank=True)
    raw_reply = None  # type: ignore[assignment]
    finish_reason = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TurnQuerySet.as_manager()

    class Meta:
        ordering = ["run", "item", "epoch", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "epoch", "number"], name="turn_once_per_item_epoch"
            ),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="turn_number_from_1"),
        ]

    def __str__(self) -> str:
        return f"run #{self.run_id} item {self.item_id} epoch {self.epoch} turn {self.number}"

    @property
    def is_answered(self) -> bool:
        return not self.error_kind


class ChoiceSetup(models.Model):
    """What a choice-scoring run (`Run.Kind.CHOICE`) reads of each item: its options, from these
    columns in order, labelled by `label_type` (apps/datasets/options.py)."""

    class LabelType(models.TextChoices):
        UPPER = "upper", "A, B, C…"
        LOWER = "lower", "a, b, c…"
        DIGIT = "digit", "1, 2, 3…"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="choice_setup")
    option_columns = models.JSONField(default=list)
    label_type = models.CharField(max_length=8, choices=LabelType.choices, default=LabelType.UPPER)
    # How the endpoint is asked, as the probe before the run found it works
    # (apps.runs.kinds.choices.probe_endpoint): each option in a request of its own where a
    # list of prompts was refused (llama-cpp-python's server answers any list with a 500), and
    # max_tokens 1 where 0 was read as "no limit" (or lists were refused), not 0.
    one_prompt_per_request = models.BooleanField(default=False)
    max_tokens = models.PositiveSmallIntegerField(default=0)


class ScriptSetup(models.Model):
    """What a memory-script run (`Run.Kind.SCRIPT`) reads of each item (apps/runs/scripts.py):
    the statements and question columns (the expected answer is the item's reference), the
    information gap in tokens (or a column giving it per item), and the filler: a column of
    the item's own, else the bundled generic text drawn with `filler_seed`."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="script_setup")
    statements_column = models.CharField(max_length=200)
    question_column = models.CharField(max_length=200)
    gap_tokens = models.PositiveIntegerField(default=0)
    gap_column = models.CharField(max_length=200, blank=True)
    filler_column = models.CharField(max_length=200, blank=True)
    filler_seed = models.IntegerField(default=0)
    # Said to the model before the script, as GoodAI's agents are told (blank: nothing).
    system_message = models.TextField(blank=True)

    def script_kwargs(self) -> dict[str, Any]:
        return {
            "statements_column": self.statements_column,
            "question_column": self.question_column,
            "gap_tokens": self.gap_tokens,
            "gap_column": self.gap_column,
            "filler_column": self.filler_column,
        }


class SimulatorSetup(models.Model):
    """Who plays the user in a simulated-conversation run (`Run.Kind.SIMULATION`): another
    endpoint, told by `instructions` (a template over the item's fields: its persona and goal)
    to converse with the model, which gets `system_message` (a template too, may be blank). The
    simulator opens the conversation (or the item's `opening_column` does) and it ends after
    `max_turns` answers of the model, or as soon as the simulator says `done_marker`."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="simulator_setup")
    simulator = models.ForeignKey(Endpoint, on_delete=models.PROTECT, related_name="+")
    instructions = models.TextField()
    system_message = models.TextField(blank=True)
    opening_column = models.CharField(max_length=200, blank=True)
    max_turns = models.PositiveIntegerField(default=4)
    done_marker = models.CharField(max_length=100, default="[DONE]")

    MAX_TURNS = 50


class AttemptLog(LLMCall):
    """One API attempt (or rule evaluation), stored according to the run's logging mode."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempt_logs")
    # Blank only for a dataset generation run, whose units make items rather than answer them:
    # its attempts name their `unit` instead.
    item = models.ForeignKey(
        Item, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    unit = models.PositiveIntegerField(null=True, blank=True)
    round = models.PositiveIntegerField(null=True, blank=True)  # judge rounds only
    epoch = models.PositiveIntegerField(default=0)  # which response of the item (Response.epoch)
    attempt = models.PositiveIntegerField(default=1)
    ok = models.BooleanField(default=False)
    request_messages = models.JSONField(default=list)
    traceback = models.TextField(blank=True)
    # An attempt is not rewritten by a later launch (each one's attempts are added), so it
    # has no launch of its own.
    launch = None  # type: ignore[assignment]
    cached = models.BooleanField(default=False)  # answered from the response cache
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "item", "epoch", "round", "attempt"]
        indexes = [models.Index(fields=["run", "item"])]


class CachedReply(models.Model):
    """A successful chat completion, reused for an identical request (`apps.runs.engine.cache`).

    `key` is the sha256 of the request's canonical JSON: the endpoint's base URL (two
    providers serving one model name are different models), the model, every request
    parameter, the messages, and which sample it is (epoch, judge round). Never the API key.
    Only replies the run kept as good are stored (a judge reply that could not be scored is
    not), so a failure is never replayed.
    """

    key = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200)
    content = models.TextField()
    finish_reason = models.CharField(max_length=32, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0.0)  # what the request cost when it was sent
    created_at = models.DateTimeField(auto_now_add=True)


class WorkerCheck(models.Model):
    """A round trip through Redis and a worker, asked for from the system page."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)

    # Past this, a check still unanswered has no worker to answer it (the job's own timeout).
    ANSWER_WITHIN = timedelta(seconds=60)

    class Meta:
        ordering = ["-requested_at"]

    @property
    def round_trip_ms(self) -> int | None:
        if self.completed_at is None:
            return None
        return round((self.completed_at - self.requested_at).total_seconds() * 1000)

    @property
    def is_waiting(self) -> bool:
        """Unanswered, and an answer may still come."""
        return self.completed_at is None and timezone.now() - self.requested_at < self.ANSWER_WITHIN
