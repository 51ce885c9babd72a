"""Several metric judges on one board, one row per model (#29.12; Dynabench's eval_metrics with
a perf_metric to sort by).

Each metric judge's own board is built as usual (`boards.build`: its means, intervals and
corpus metric), and the rows are joined by the response set they scored — a generation run,
or a response column of a dataset — so a model is one row with a column per metric. The
performance metric (`perf`) orders the rows in its own direction; models a judge has not
scored show a dash in its columns and sort last.
"""

from dataclasses import dataclass, field

from apps.datasets.models import Task
from apps.judges.models import Judge
from apps.leaderboards import boards
from apps.leaderboards.corpus import CorpusCell
from apps.leaderboards.stats import Interval
from apps.runs.models import Run

SCORINGS = boards.SCORINGS


@dataclass(frozen=True)
class Metric:
    """One column group: a metric judge, or its corpus-level value (`corpus`)."""

    key: str  # "<judge name>" or "<judge name>:corpus": what ?perf= names
    judge: Judge
    label: str
    unit: str
    higher_is_better: bool
    corpus: bool = False


@dataclass
class Value:
    value: float | None
    ci: Interval | None
    n: int


@dataclass
class Row:
    label: str
    source: tuple
    runs: dict[int, Run] = field(default_factory=dict)  # judge id → its judge run
    values: dict[str, Value] = field(default_factory=dict)  # Metric.key → value


@dataclass
class MetricBoard:
    task: Task
    judges: list[Judge]  # every metric judge of the task with runs (newest version per name)
    chosen: list[Judge]
    metrics: list[Metric] = field(default_factory=list)
    perf: Metric | None = None
    rows: list[Row] = field(default_factory=list)
    scoring: str = "strict"


def metric_judges(task: Task) -> list[Judge]:
    """The newest version of each metric judge that has scored a response set of the task."""
    newest: dict[str, Judge] = {}
    for judge in boards.judges_with_runs(task):  # newest version first per name
        if judge.kind == Judge.Kind.METRIC and judge.name not in newest:
            newest[judge.name] = judge
    return list(newest.values())


def source_of(run: Run) -> tuple:
    """The response set a judge run scored: what makes two judges' rows the same model."""
    if run.source_run_id:
        return ("run", run.source_run_id)
    return ("column", run.dataset_id, run.source_column)


def build(
    task: Task, names: list[str] | None = None, perf: str | None = None, scoring: str = "strict"
) -> MetricBoard:
    judges = metric_judges(task)
    chosen = [j for j in judges if j.name in names] if names else list(judges)
    board = MetricBoard(
        task=task,
        judges=judges,
        chosen=chosen,
        scoring=scoring if scoring in SCORINGS else "strict",
    )
    by_source: dict[tuple, Row] = {}
    for judge in chosen:
        built = boards.build(task, boards.Params(judge_id=judge.pk, scoring=board.scoring))
        if not built.subjects:
            continue
        info = built.subjects[0]  # a metric judge gives one value
        item = Metric(
            judge.name, judge, f"{judge.name} · {info.label}", info.unit, info.higher_is_better
        )
        board.metrics.append(item)
        corpus_metric = built.corpus_metric
        if corpus_metric is not None:
            board.metrics.append(
                Metric(
                    f"{judge.name}:corpus",
                    judge,
                    f"{judge.name} · {corpus_metric.label}",
                    info.unit,
                    info.higher_is_better,
                    corpus=True,
                )
            )
        for row in built.rows:
            source = source_of(row.run)
            joined = by_source.setdefault(source, Row(row.label, source))
            joined.runs[judge.pk] = row.run
            cell = row.cells[built.mode][info.name]
            joined.values[item.key] = Value(cell.mean, cell.ci, cell.n)
            found: CorpusCell | None = built.corpus.get(row.run.pk)
            if found is not None:
                joined.values[f"{judge.name}:corpus"] = Value(found.value, found.ci, found.n)
    board.perf = next((m for m in board.metrics if m.key == perf), None) or next(
        iter(board.metrics), None
    )
    board.rows = sort_rows(list(by_source.values()), board.perf)
    return board


def sort_rows(rows: list[Row], perf: Metric | None) -> list[Row]:
    """Best first by the performance metric in its direction; rows without it last, by name."""
    if perf is None:
        return sorted(rows, key=lambda row: row.label.lower())

    def key(row: Row) -> tuple:
        found = row.values.get(perf.key)
        if found is None or found.value is None:
            return (1, 0.0, row.label.lower())
        value = -found.value if perf.higher_is_better else found.value
        return (0, value, row.label.lower())

    return sorted(rows, key=key)
