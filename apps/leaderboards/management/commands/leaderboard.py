"""Print a task's leaderboard: means per subject (like ml3m's load_avg_score) with 95% CIs,
and how many items failed or are missing, since a mean that drops them silently misleads.

    python manage.py leaderboard TASK [--judge NAME] [--judge-version N] [--values human|judge]
                                      [--scoring strict|answered] [--tag TAG]
                                      [--dataset ID] [--pairs [--correction holm|bh]]
                                      [--robustness]
                                      [--format table|csv|jsonl]

Strict scoring (the default) counts a failed or missing item at its subject's worst value, so
a model never ranks higher by failing; `--scoring answered` ranks by the answered items only.
"""

import json
import math
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.datasets.models import Task
from apps.leaderboards import (
    boards,
    corrected,
    exports,
    formatting,
    pairs,
    pairwise_board,
    robustness,
)
from apps.leaderboards.epochs import Reduction


class Command(BaseCommand):
    help = "Print a task's leaderboard (means per subject, CIs, failed and missing items)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="the task's slug")
        parser.add_argument("--judge", help="judge name (default: the task's default judge)")
        parser.add_argument(
            "--judge-version", type=int, help="judge version (default: the newest with runs)"
        )
        parser.add_argument("--values", choices=["human", "judge"], default="human")
        parser.add_argument(
            "--scoring",
            choices=boards.SCORINGS,
            default="strict",
            help="strict: failed and missing items count at the worst value (default); "
            "answered: the mean over answered items only",
        )
        parser.add_argument(
            "--epochs",
            default="mean",
            metavar="mean|majority|pass@K",
            help="how an item's epochs (repeated generations) make its value (default: mean)",
        )
        parser.add_argument("--tag", help="only items with this tag")
        parser.add_argument(
            "--dataset",
            type=int,
            help="only runs over this dataset id (default: every dataset but perturbed copies)",
        )
        parser.add_argument(
            "--robustness",
            action="store_true",
            help="each model on perturbed copies minus on their originals instead: per subject "
            "(and per tag in CSV/JSONL), the mean difference with its 95%% t-interval",
        )
        parser.add_argument(
            "--cluster",
            metavar="TAG_PREFIX",
            help="cluster-robust CIs on the items' tag with this prefix (e.g. passage:)",
        )
        parser.add_argument(
            "--common",
            action="store_true",
            help="only the items every model has (when they cover different items)",
        )
        parser.add_argument(
            "--pairs",
            action="store_true",
            help="every pair of models instead: difference, CI, raw and adjusted p-values",
        )
        parser.add_argument("--correction", choices=list(pairs.CORRECTIONS), default="holm")
        parser.add_argument(
            "--corrected-pairs",
            action="store_true",
            help="every pair of models on their judge-corrected (PPI++) scores instead, "
            "Holm-adjusted (CSV; needs the review policy's random sample)",
        )
        parser.add_argument(
            "--pairwise",
            action="store_true",
            help="Bradley–Terry ratings from the task's pairwise runs instead (CSV or JSONL)",
        )
        parser.add_argument(
            "--source",
            choices=list(pairwise_board.SOURCES),
            default="judge",
            help="with --pairwise: the judge's battles, people's (the A/B queue) or both",
        )
        parser.add_argument(
            "--baseline",
            help="with --pairwise: a model's name; adds win rates against it, raw and "
            "length-controlled",
        )
        parser.add_argument(
            "--target",
            type=float,
            help="an interval width: the corrected board adds the reviews of the random sample "
            "each model's interval needs to reach it (as ?target= on the page and export)",
        )
        parser.add_argument("--format", choices=["table", "csv", "jsonl"], default="table")

    def _pairwise(self, task: Task, options: dict[str, Any]) -> None:
        judge = None
        if options["judge"]:
            judge = pairwise_board.find_judge(task, options["judge"])
            if judge is None:
                raise CommandError(f"No pairwise judge {options['judge']!r} has runs in {task}.")
        baseline = None
        if options["baseline"]:
            baseline = pairwise_board.find_set(task, options["baseline"])
            if baseline is None:
                raise CommandError(f"No response set {options['baseline']!r} in {task}.")
        built = pairwise_board.build(task, judge, options["source"], baseline)
        if built.ratings is None:
            raise CommandError(f"No pairwise run of {task.slug} has finished a comparison.")
        fmt = options["format"]
        write = exports.pairwise_jsonl if fmt == "jsonl" else exports.pairwise_csv
        sys.stdout.writelines(write(built))

    def _robustness(self, task: Task, options: dict[str, Any]) -> None:
        judge = None
        if options["judge"]:
            judges = boards.judges_with_runs(task)
            judge = boards.pick_judge(
                judges, name=options["judge"], version=options["judge_version"]
            )
            if judge is None:
                raise CommandError(f"No judge {options['judge']!r} has judged anything in {task}.")
        found = robustness.build(
            task, judge.pk if judge else None, options["values"], options["scoring"]
        )
        if not found.copies:
            raise CommandError(f"{task.slug} has no perturbed copy (manage.py perturb_dataset).")
        records = robustness.records(found)
        if options["format"] == "csv":
            self.stdout.write(exports.records_csv(robustness.HEADER, records), ending="")
            return
        if options["format"] == "jsonl":
            for record in records:
                self.stdout.write(json.dumps(record, ensure_ascii=False))
            return
        lines = [
            ["perturbed copy", "model", "subject", "n", "original", "perturbed", "Δ", "95% CI"]
        ]
        for record in records:
            if record["tag"]:
                continue
            ci = record["ci_low"], record["ci_high"]
            lines.append(
                [
                    record["perturbed_dataset"],
                    record["model"],
                    record["subject"],
                    str(record["n"]),
                    formatting.number(record["original_mean"]),
                    formatting.number(record["perturbed_mean"]),
                    formatting.number(record["delta"]),
                    "—" if ci[0] is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]",
                ]
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
        for line in lines:
            self.stdout.write(
                "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
            )
        self.stdout.write(
            f"Δ = perturbed − original per item (paired by key), 95% Student-t interval; "
            f"{found.mode} values, {formatting.SCORING_TEXT[found.scoring]}."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"There is no task {options['task']!r}.")
        if options["pairwise"]:
            self._pairwise(task, options)
            return
        if options["robustness"]:
            self._robustness(task, options)
            return
        params = boards.Params(
            judge_name=options["judge"],
            judge_version=options["judge_version"],
            values=options["values"],
            tag=options["tag"],
            scoring=options["scoring"],
            common=options["common"],
            cluster=options["cluster"] or None,
            epochs=_reduction(options["epochs"]),
            dataset_id=options["dataset"],
        )
        board = boards.build(task, params)
        if board.judge is None:
            names = sorted({j.name for j in board.judges})
            hint = f" Judges with runs: {', '.join(names)}." if names else ""
            wanted = f" {options['judge']!r}" if options["judge"] else ""
            raise CommandError(f"No judge{wanted} has judged anything in {task.slug}.{hint}")
        if options["tag"] and options["tag"] not in board.tags:
            raise CommandError(f"No item of {task.slug} has the tag {options['tag']!r}.")
        matrix = pairs.build(board, options["correction"])
        target = options["target"]
        if target is not None and not (math.isfinite(target) and target > 0):
            raise CommandError(f"--target must be a width above 0, not {target}.")
        board.corrected = corrected.build(board, target)
        if options["corrected_pairs"]:
            if board.corrected is None:
                raise CommandError(
                    f"{task.slug}'s review policy draws no random sample, so there are no "
                    "corrected scores: set “Review a random N % of items” on its review policy."
                )
            self.stdout.write("".join(exports.corrected_pairs_csv(board.corrected)), ending="")
        elif options["pairs"]:
            if options["format"] != "csv":
                raise CommandError("--pairs prints CSV: add --format csv.")
            sys.stdout.writelines(exports.pairs_csv(board, matrix))
        elif options["format"] == "csv":
            sys.stdout.writelines(exports.board_csv(board))
        elif options["format"] == "jsonl":
            sys.stdout.writelines(exports.board_jsonl(board))
        else:
            self.stdout.write(table(board))


def table(board: boards.Board) -> str:
    mode = board.mode
    header = ["#", "tied", "model", "overall (0–100)" if board.normalised else "overall", "95% CI"]
    for info in board.subjects:
        other = "answered only" if board.params.scoring == "strict" else "strict"
        header += [f"{info.name} mean", "95% CI", other, "coverage", "failed", "missing"]
    lines = [header]
    for rank, row in enumerate(board.rows, start=1):
        line = [
            str(rank),
            str(board.tied_ranks.get(row.run.pk, "")),
            row.label,
            formatting.number(row.overall[mode]),
            formatting.interval(row.overall_ci.get(mode)),
        ]
        for info in board.subjects:
            c = row.cells[mode][info.name]
            line += [
                formatting.number(c.mean),
                formatting.interval(c.ci),
                formatting.number(formatting.other_mean(c, board)),
                formatting.percent(c.coverage),
                str(c.failed),
                str(c.missing),
            ]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )
    judge = board.judge
    notes = [
        f"{board.task.slug} · judge {judge.name} v{judge.version} · "  # type: ignore[union-attr]
        f"{'human-corrected' if mode == 'human' else 'judge-only'} values · "
        f"{formatting.SCORING_TEXT[board.params.scoring]}"
        + (f" · items tagged {board.params.tag}" if board.params.tag else ""),
        # The overall sits beside subject means on other scales: say how it is formed.
        board.overall_formula,
    ]
    if board.params.epochs != board.reduction:
        notes.append(
            f"{board.params.epochs.label} needs {board.params.epochs.k} epochs and no model here "
            f"has more than {board.epochs}: showing {board.reduction.label}."
        )
    if board.short_epochs:
        notes.append(board.short_epochs_text)
    if board.epochs > 1:
        flaky = ", ".join(f"{row.label} {board.flaky.get(row.run.pk, 0)}" for row in board.rows)
        notes.append(f"Flaky items (epochs disagree): {flaky}.")
    if board.params.cluster:
        notes.append(
            f"95% CIs clustered on the tag starting with {board.params.cluster!r} "
            f"({board.clusters} clusters; cluster-robust standard errors)."
        )
    if board.coverage is not None:
        counts = ", ".join(f"{label}: {count}" for label, count in board.coverage.counts)
        shown = "common items only" if board.params.common else "add --common to compare on those"
        notes.append(
            f"The models cover different items ({counts}); {board.coverage.common} all of them "
            f"have: {shown}."
        )
    for row in board.rows:
        left_out = [
            f"{info.name}: {c.failed} failed, {c.missing} not scored"
            for info in board.subjects
            if (c := row.cells[mode][info.name]).failed or c.missing
        ]
        if left_out:
            how = "At the worst value in" if board.params.scoring == "strict" else "Not in"
            notes.append(f"{how} the means of {row.label}: " + "; ".join(left_out))
    return (
        "\n".join(notes[:2])
        + "\n"
        + text
        + ("\n" + "\n".join(notes[2:]) if notes[2:] else "")
        + "\n"
        + (corrected_table(board.corrected) if board.corrected is not None else "")
    )


def corrected_table(found: corrected.Corrected) -> str:
    """The judge-corrected ranking under the board: PPI++ estimate of the ranking key, its
    interval, the judge alone, labels used and what they are worth."""
    key = "overall" if found.key == "overall" else found.key
    lines = [
        ["#", "tied", "model", f"corrected {key}", "95% CI", "judge only", "labelled", "≈ labels"]
    ]
    for rank, row in enumerate(found.rows, start=1):
        cell = row.value(found.key)
        lines.append(
            [
                str(rank),
                str(found.ranks.get(row.run.pk, "")),
                row.label,
                formatting.number(cell.mean if cell else None),
                f"[{cell.low:.2f}, {cell.high:.2f}]" if cell else "—",
                formatting.number(row.judge_mean),
                f"{cell.n} of {row.sampled}" if cell else f"0 of {row.sampled}",
                f"{cell.effective_n:.0f}" if cell and cell.effective_n else "—",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )
    notes = [
        f"\nJudge-corrected (PPI++, power-tuned) from reviews of the policy's "
        f"{found.sample_label}; tied ranks from Holm-adjusted corrected pairs."
    ]
    if found.note:
        notes.append(found.note)
    return notes[0] + "\n" + text + "\n" + "".join(n + "\n" for n in notes[1:])


def _reduction(text: str) -> Reduction:
    reduction = Reduction.parse(text)
    if reduction.query != text.strip().lower():
        raise CommandError(f"--epochs takes mean, majority or pass@K (K ≥ 1), not {text!r}.")
    return reduction
