"""What the API's calls take and give, for the OpenAPI schema (the views build plain dicts)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _cache_word(value: object) -> object:
    """JSON true / false as the start forms' "on" / "off" (runs report it as a boolean)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


# The response cache: "on" or true, "off" or false, "" (or left out) for the run kind's default.
CacheChoice = Annotated[str, BeforeValidator(_cache_word)]


# The fixed choices the API takes, as enums in the schema (so generated clients offer them);
# tests/api/test_schema.py checks each against the model's or module's own list.
ExportFormat = Literal["csv", "jsonl", "xlsx", "parquet"]
UploadFormat = Literal["", "csv", "json", "jsonl", "xlsx", "parquet"]
LoggingModeName = Literal["all", "failed", "none"]
RelaunchMode = Literal["resume", "retry_failed", "overwrite"]
ErrorKindName = Literal[
    "",
    "api_error",
    "timeout",
    "unparseable",
    "missing_subject",
    "out_of_range",
    "template",
    "internal",
    "no_response",
]
BoardValues = Literal["both", "human", "judge"]
Scoring = Literal["strict", "answered"]
Correction = Literal["holm", "bh"]
PairwiseSource = Literal["judge", "human", "both"]
SortDirection = Literal["asc", "desc"]
# An epoch reduction: the mean, the majority value, or pass@K.
EPOCHS_PATTERN = r"^(mean|majority|pass@[1-9][0-9]{0,5})$"
# A judge: its id, or its name (the newest version of that name in the task).
JudgeRef = int | str


class Error(Schema):
    detail: str
    errors: Any = None


class TaskOut(Schema):
    slug: str
    name: str
    description: str
    datasets: int
    runs: int
    url: str


class DatasetOut(Schema):
    id: int
    task: str
    name: str
    version: int
    status: str
    error: str
    format: str
    file_name: str
    row_count: int
    columns: list[str]
    mapping: dict[str, Any]
    url: str


class Named(Schema):
    id: int
    name: str
    version: int
    kind: str = ""


class JudgeNamed(Named):
    # How a rubric judge's reply is read (json, brackets, result, score, last_number, regex).
    reply_format: str = ""
    # A rubric judge that scores each turn of a conversation (MT-Bench's turn 1, turn 2).
    per_turn: bool = False


class TaskDetailOut(TaskOut):
    datasets_list: list[DatasetOut]
    templates: list[Named]
    judges: list[JudgeNamed]
    default_judge: int | None


class UploadIn(Schema):
    """The upload page's two steps in one call: the file, then its column mapping. With no
    mapping field at all, the mapping the page would suggest is used (what each column name
    was in the task's earlier uploads, else a guess by its name)."""

    name: str = ""
    format: UploadFormat = ""  # "": by the file's name
    sheet: str = ""  # an Excel workbook's sheet (default: its first)
    id_column: str = ""
    input_columns: list[str] = []
    reference_column: str = ""
    tags_column: str = ""
    response_columns: list[str] = []
    conversation_column: str = ""


class GenerationIn(Schema):
    task: str
    dataset: int
    endpoint: int | str  # id or name
    template: int | str  # id, or name (its newest version)
    label: str = ""
    epochs: int = 1
    logging_mode: LoggingModeName = "failed"
    chunk_size: int = 200
    batch: bool = False  # through the provider's Batch API (endpoints that support it)
    use_cache: CacheChoice = ""
    budget_usd: float | None = None  # stop cleanly before the cost could pass this (USD)
    # Ask each user turn of the items' conversations in order, with the model's own earlier
    # answers in context (the template must send the item's conversation).
    multi_turn: bool = False


class ScriptRunIn(Schema):
    """A memory-script run (GoodAI's LTM): what `start_run script` takes."""

    dataset: int
    endpoint: int | str  # id or name
    statements_column: str
    question_column: str
    gap_tokens: int = 0  # filler tokens between the last statement and the question
    gap_column: str = ""  # or a column giving the gap per item
    filler_column: str = ""  # the item's own filler; else the bundled text
    filler_seed: int = 0
    system_message: str = ""
    label: str = ""
    epochs: int = 1
    logging_mode: LoggingModeName = "failed"
    budget_usd: float | None = None


class SimulationRunIn(Schema):
    """A simulated-user conversation run: what `start_run simulation` takes."""

    dataset: int
    endpoint: int | str  # the model's: id or name
    simulator: int | str  # the simulated user's: id or name
    instructions: str  # the simulated user's persona and goal, over the item's fields
    system_message: str = ""
    opening_column: str = ""
    max_turns: int = 4
    done_marker: str = "[DONE]"
    label: str = ""
    epochs: int = 1
    logging_mode: LoggingModeName = "failed"
    budget_usd: float | None = None


class JudgeRunIn(Schema):
    judge: JudgeRef
    # A generation run's id, "run:ID", or "column:DATASET_ID:COLUMN" (a response column).
    responses: int | str
    endpoint: int | str | None = None  # LLM judges: id or name
    label: str = ""
    logging_mode: LoggingModeName = "failed"
    chunk_size: int = 200
    batch: bool = False
    use_cache: CacheChoice = ""
    budget_usd: float | None = None  # stop cleanly before the cost could pass this (USD)


class PairwiseIn(Schema):
    judge: JudgeRef
    responses: list[int | str]  # two or more response sets (as in JudgeRunIn)
    baseline: int | str = ""
    endpoint: int | str
    logging_mode: LoggingModeName = "failed"
    batch: bool = False
    use_cache: CacheChoice = ""
    budget_usd: float | None = None  # stop cleanly before the cost could pass this (USD)


class RelaunchIn(Schema):
    # A misspelt field would otherwise resume with the defaults: refused instead.
    model_config = ConfigDict(extra="forbid")

    # What the run page's buttons launch: "resume" (items without a result), "retry_failed"
    # or "overwrite" (every item again).
    mode: RelaunchMode = "resume"
    budget_usd: float | None = None  # a new budget (USD), e.g. raised past what stopped it


class RunOut(Schema):
    id: int
    kind: str
    title: str
    label: str
    status: str
    status_label: str
    task: str
    dataset: int
    judge: int | None
    source_run: int | None
    source_column: str
    epochs: int
    multi_turn: bool
    batch: bool
    use_cache: bool
    cached: int  # requests answered from the response cache
    sent: int  # requests sent to the provider (retries count)
    saved_cost: float  # what the cached requests cost when first sent
    budget_usd: float | None
    total: int
    done: int
    failed: int
    not_run: int | None
    percent: int
    items_per_second: float | None
    eta_seconds: float | None
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    failure_cause: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str


class FailedGroup(Schema):
    kind: str  # an error kind
    label: str
    count: int
    retryable: bool | None = None  # judge runs: whether "retry failed" can help


class FailedRound(Schema):
    """A judge run's failed round, or one order of a pairwise comparison."""

    round: int
    error_kind: str
    error: str
    raw_reply: str
    messages: list[dict[str, Any]] | None = None  # what was sent, when it was logged
    traceback: str | None = None  # admins only


class FailedItem(Schema):
    item_id: int
    key: str
    position: int
    error_kind: str
    error: str
    epoch: int | None = None  # generation runs
    attempts: int | None = None  # generation runs
    rounds: list[FailedRound] | None = None  # judge and pairwise runs
    model_a: str | None = None  # pairwise runs: the pair compared
    model_b: str | None = None
    run_a: int | None = None
    run_b: int | None = None


class FailedOut(Schema):
    run: int
    kind: str  # the error kind asked for ("" for all)
    count: int
    page: int
    pages: int
    groups: list[FailedGroup]
    items: list[FailedItem]


# ---- boards: the JSONL export's records, typed -------------------------------------------
class Open(BaseModel):
    """A record that may carry more than it declares (exports grow columns): a plain pydantic
    model, since ninja's Schema reads declared attributes only and would drop the rest."""

    model_config = ConfigDict(extra="allow")


class BoardStats(Open):
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    strict_mean: float | None
    answered_mean: float | None
    coverage: float | None
    n: int
    failed: int
    missing: int


class BoardSubject(Open):
    judge: BoardStats | None = None  # the judge's values (values=judge or both)
    human: BoardStats | None = None  # human-corrected (values=human or both)
    overridden: int  # items whose value a reviewer changed


class CorpusOut(Open):
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


class RunCostOut(Schema):
    run_id: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None  # null: the endpoint's model has no price
    batch: bool  # sent through the provider's Batch API
    batch_saved_usd: float | None  # against the request-by-request price
    cached: int  # requests answered from the response cache
    sent: int
    cache_saved_usd: float | None  # what the cached replies would have cost


class CostOut(Schema):
    """What a model on the board cost (#32.4): its generation run (null for a response column)
    and the judge run that scored it, their sum, per item answered, and the generation's
    latency over the requests that went to the model."""

    generation: RunCostOut | None
    judging: RunCostOut
    tokens: int
    usd: float | None
    batch_saved_usd: float | None
    cache_saved_usd: float | None
    items: int
    usd_per_item: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_n: int
    pareto_front: bool  # no other model scores as high for less (the board's overall)


class BoardRow(Open):
    rank: int
    tied_rank: int | None
    model: str
    run_id: int
    judged_run_id: int | None
    judged_column: str | None
    dataset: str
    run_status: str
    overall: dict[str, float | None]  # by view: judge, human
    overall_ci: dict[str, list[float] | None]
    subjects: dict[str, BoardSubject]
    epochs: int
    model_epoch_reduction: str
    flaky_items: int | None
    corpus: CorpusOut | None
    turns: list[float | None] | None
    corrected: dict[str, Any] | None = None  # the row's PPI++ scores (#31.1)
    cost: CostOut | None = None  # generation and judge cost, latency (#32.4)


class Scale(Schema):
    min: float | None
    max: float | None
    direction: str


class JudgeVersion(Schema):
    id: int
    name: str
    version: int
    per_turn: bool = False  # scores each turn of a conversation (MT-Bench)


class BoardOut(Open):
    task: str
    # PPI++ from the review policy's random sample (#31.1); null without one.
    judge_corrected: dict[str, Any] | None = None
    judge: str | None
    judge_version: int | None
    values: str
    scoring: str
    items: str  # "all" or "common"
    clustered_by: str | None
    epochs: str
    weights: dict[str, float]
    tag: str | None
    sort: str
    direction: str
    overall_formula: str
    scales: dict[str, Scale]
    judges: list[JudgeVersion]
    rows: list[BoardRow]


class PairwiseRow(Open):
    rank: int
    model: str
    rating: float
    ci_low: float
    ci_high: float
    battles: int
    win_rate: float
    prior_sd: float | None
    mle_exists: bool | None
    judge: str
    source: str
    position_consistency: float | None
    first_position_share: float | None
    # With a baseline: each model against it.
    baseline: str | None = None
    win_rate_vs_baseline: float | None = None
    lc_win_rate: float | None = None
    length_difference: float | None = None


class PairwiseBoardOut(Schema):
    task: str
    judge: int | None
    source: str
    rows: list[PairwiseRow] = Field(default_factory=list)
