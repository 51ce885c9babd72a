"""What the board page shows: its columns and formatted cells (the CLI table uses the same)."""

from dataclasses import dataclass

from apps.leaderboards.boards import Board, Cell, Row
from apps.leaderboards.stats import Interval


def number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def percent(share: float | None) -> str:
    return "—" if share is None else f"{share * 100:.1f}%"


SCORING_TEXT = {
    "strict": "strict: failed and missing items count at the subject's worst value",
    "answered": "answered only: failed and missing items left out of the means",
}


def other_mean(cell: Cell, board: Board) -> float | None:
    """The mean the board does not rank by, shown beside the one it does."""
    return cell.answered_mean if board.params.scoring == "strict" else cell.strict_mean


def interval(ci: Interval | None) -> str:
    if ci is None:
        return "—"
    mark = "≈" if ci.method in ("normal", "clustered") else ""
    return f"{mark}[{ci.low:.2f}, {ci.high:.2f}]"


@dataclass(frozen=True)
class Column:
    subject: str
    mode: str
    stat: str  # mean | other_mean | coverage | ci | n | failed | missing | overridden
    label: str
    sort: str | None  # the board's sort key, if the column sorts


@dataclass(frozen=True)
class Shown:
    column: Column
    text: str
    title: str
    differs: bool  # human-corrected differs from judge-only here


STAT_LABELS = {
    "coverage": "cover.",
    "ci": "95% CI",
    "n": "n",
    "failed": "failed",
    "missing": "missing",
    "overridden": "overr.",
}


def columns(board: Board) -> list[tuple[str, list[Column]]]:
    """Per subject its columns, in the order the page (and the CLI table) show them."""
    groups = []
    both = board.params.values == "both"
    for info in board.subjects:
        name, mode = info.name, board.mode
        cols = []
        if both:
            cols.append(Column(name, "judge", "mean", "judge", f"judge:{name}"))
            cols.append(Column(name, "human", "mean", "human", f"mean:{name}"))
        else:
            cols.append(Column(name, mode, "mean", "mean", f"mean:{name}"))
        cols.append(Column(name, mode, "ci", STAT_LABELS["ci"], None))
        other = "answered" if board.params.scoring == "strict" else "strict"
        cols.append(Column(name, mode, "other_mean", other, None))
        cols.append(Column(name, mode, "coverage", STAT_LABELS["coverage"], f"coverage:{name}"))
        for stat in ("n", "failed"):
            cols.append(Column(name, mode, stat, STAT_LABELS[stat], f"{stat}:{name}"))
        if any(row.cells[mode][name].missing for row in board.rows):
            cols.append(Column(name, mode, "missing", STAT_LABELS["missing"], f"missing:{name}"))
        cols.append(
            Column(name, mode, "overridden", STAT_LABELS["overridden"], f"overridden:{name}")
        )
        groups.append((info.label + (f" ({info.unit})" if info.unit else ""), cols))
    return groups


def shown(board: Board, row: Row, column: Column) -> Shown:
    cell = row.cells[column.mode][column.subject]
    other = row.cells["judge" if column.mode == "human" else "human"][column.subject]
    if column.stat == "mean":
        text = number(cell.mean)
        title = (
            f"judge-only {number(other.mean)}"
            if column.mode == "human"
            else f"human-corrected {number(other.mean)}"
        )
        return Shown(column, text, title, cell.mean != other.mean)
    if column.stat == "other_mean":
        value = other_mean(cell, board)
        title = (
            "mean over answered items only"
            if board.params.scoring == "strict"
            else "strict mean: failed and missing items at the worst value"
        )
        return Shown(column, number(value), title, False)
    if column.stat == "coverage":
        return Shown(
            column,
            percent(cell.coverage),
            f"{cell.answered} answered of {cell.answered + cell.failed + cell.missing} items",
            cell.coverage != other.coverage,
        )
    if column.stat == "ci":
        method = cell.ci.method_label if cell.ci else "no values"
        return Shown(column, interval(cell.ci), f"95% CI, {method}", cell.ci != other.ci)
    value = getattr(cell, column.stat)
    title = {
        "failed": "failed items: not in the mean",
        "missing": "items of the dataset without a score yet",
        "overridden": "scores a reviewer overrode",
        "n": "items in the mean",
    }[column.stat]
    return Shown(column, str(value), title, value != getattr(other, column.stat))


def table(board: Board) -> list[tuple[Row, list[Shown]]]:
    cols = [c for _, group in columns(board) for c in group]
    return [(row, [shown(board, row, c) for c in cols]) for row in board.rows]


def epoch_views(board: Board) -> list[tuple[str, str]]:
    """The epochs toggle: mean, majority and pass@k for every k the most epochs allow
    (`?epochs=`); empty when no model answered an item more than once."""
    if board.epochs == 1 and board.reduction.is_mean:
        return []
    ks = range(1, board.epochs + 1)  # each model's pass@k from its own epochs
    return [("mean", "Mean"), ("majority", "Majority vote")] + [
        (f"pass@{k}", f"pass@{k}") for k in ks
    ]
