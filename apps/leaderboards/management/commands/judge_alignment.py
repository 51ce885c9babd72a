"""`manage.py judge_alignment JUDGE [--version N] [--task SLUG] --format csv|json`: a judge
version's agreement with people on its checks' held-out reviewed items (#14.2), per subject,
with CIs, beside the values people reviewed, and the items used."""

import json
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.datasets.models import Item
from apps.judges.models import Judge
from apps.leaderboards.alignment import CheckReport, Metrics, report
from apps.leaderboards.exports import records_csv
from apps.leaderboards.stats import Interval

HEADER = [
    "subject",
    "values",
    "n",
    "accuracy",
    "accuracy_low",
    "accuracy_high",
    "kappa",
    "weighted_kappa",
    "weighted_kappa_low",
    "weighted_kappa_high",
    "mad",
    "mad_low",
    "mad_high",
    "verdict",
    "seed",
    "held_out_items",
]


def _ci(interval: Interval | None) -> list[float] | None:
    return None if interval is None else [interval.low, interval.high]


def _metrics(m: Metrics) -> dict[str, Any]:
    return {
        "accuracy": m.accuracy,
        "accuracy_ci": _ci(m.accuracy_ci),
        "kappa": m.kappa,
        "weighted_kappa": m.weighted_kappa,
        "weighted_kappa_ci": _ci(m.weighted_kappa_ci),
        "mad": m.mad,
        "mad_ci": _ci(m.mad_ci),
    }


def as_record(found: CheckReport) -> dict[str, Any]:
    keys = dict(Item.objects.filter(pk__in=[i for _, i in found.items]).values_list("pk", "key"))
    first = found.checks[0]
    return {
        "judge": str(found.judge),
        "seed": first.seed,
        "held_out_share": first.held_out_share,
        "held_out": found.held_out,
        "reviewed_versions": found.before,
        "subjects": [
            {
                "subject": s.subject,
                "n": s.n,
                "verdict": s.verdict,
                "mad_difference": s.mad_difference,
                "mad_difference_ci": _ci(s.mad_difference_ci),
                "this_version": _metrics(s.checked),
                "reviewed": _metrics(s.before),
            }
            for s in found.subjects
        ],
        "items": [{"run": run, "item": keys.get(item, "")} for run, item in found.items],
    }


class Command(BaseCommand):
    help = "A judge version's agreement with people on held-out reviewed items, with CIs."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # --version is the judge's version here, as the other commands spell it; Django's own
        # --version (the Django release) gives way.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("judge", help="the judge's name")
        parser.add_argument("--version", type=int, help="default: the latest version")
        parser.add_argument("--task", help="the task's slug, when two tasks have the judge")
        parser.add_argument("--format", choices=["csv", "json"], default="csv")

    def handle(self, *args: Any, **options: Any) -> None:
        judges = Judge.objects.filter(name=options["judge"])
        if options["task"]:
            judges = judges.filter(task__slug=options["task"])
        if options["version"]:
            judges = judges.filter(version=options["version"])
        tasks = set(judges.values_list("task__slug", flat=True))
        if not tasks:
            raise CommandError(f"No judge {options['judge']!r} (at that version).")
        if len(tasks) > 1:
            raise CommandError(f"Judges named {options['judge']!r} in {sorted(tasks)}: --task.")
        judge = judges.order_by("-version").first()
        assert judge is not None
        found = report(judge)
        if not found.checks:
            raise CommandError(f"{judge} has not been checked against reviews yet.")
        record = as_record(found)
        if options["format"] == "json":
            self.stdout.write(json.dumps(record, indent=2))
            return
        self.stdout.write(records_csv(HEADER, csv_rows(record)), ending="")


def csv_rows(record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Two rows per subject (this version, the values people reviewed) with CIs as low/high."""
    items = "|".join(row["item"] for row in record["items"])
    for s in record["subjects"]:
        for label in ("this_version", "reviewed"):
            m = s[label]
            row = {"subject": s["subject"], "values": label, "n": s["n"]}
            for name in ("accuracy", "kappa", "weighted_kappa", "mad"):
                row[name] = m[name]
                low, high = m.get(f"{name}_ci") or (None, None)
                row |= {f"{name}_low": low, f"{name}_high": high}
            row |= {"verdict": s["verdict"], "seed": record["seed"], "held_out_items": items}
            yield row
