"""What the API's calls take and give, for the OpenAPI schema (the views build plain dicts)."""

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import BeforeValidator


def _cache_word(value: object) -> object:
    """JSON true / false as the start forms' "on" / "off" (runs report it as a boolean)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


# The response cache: "on" or true, "off" or false, "" (or left out) for the run kind's default.
CacheChoice = Annotated[str, BeforeValidator(_cache_word)]


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
    format: str = ""
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
    logging_mode: str = "failed"
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
    logging_mode: str = "failed"
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
    logging_mode: str = "failed"
    budget_usd: float | None = None


class JudgeRunIn(Schema):
    judge: int
    # A generation run's id, "run:ID", or "column:DATASET_ID:COLUMN" (a response column).
    responses: int | str
    endpoint: int | str | None = None  # LLM judges: id or name
    label: str = ""
    logging_mode: str = "failed"
    chunk_size: int = 200
    batch: bool = False
    use_cache: CacheChoice = ""
    budget_usd: float | None = None  # stop cleanly before the cost could pass this (USD)


class PairwiseIn(Schema):
    judge: int
    responses: list[int | str]  # two or more response sets (as in JudgeRunIn)
    baseline: int | str = ""
    endpoint: int | str
    logging_mode: str = "failed"
    batch: bool = False
    use_cache: CacheChoice = ""
    budget_usd: float | None = None  # stop cleanly before the cost could pass this (USD)


class RelaunchIn(Schema):
    # What the run page's buttons launch: "resume" (items without a result), "retry_failed"
    # or "overwrite" (every item again).
    mode: str = "resume"
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


class FailedOut(Schema):
    run: int
    kind: str
    count: int
    page: int
    pages: int
    groups: list[dict[str, Any]]
    items: list[dict[str, Any]]
