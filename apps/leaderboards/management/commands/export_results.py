"""Export a run's results per item, streamed to a file or stdout:

    python manage.py export_results RUN_ID --format csv|jsonl -o FILE

One row per item of the run's dataset, in item order; items without a score have empty
cells (null in JSONL), like ml3m's load_scores gives NaN.
"""

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.leaderboards import exports
from apps.runs.models import Run


class Command(BaseCommand):
    help = "Export one run's per-item results (scores or responses) as CSV or JSONL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument("--format", choices=sorted(exports.FORMATS), default="csv")
        parser.add_argument("-o", "--output", default="-", help="file to write; - for stdout")

    def handle(self, *args: Any, run_id: int, format: str, output: str, **options: Any) -> None:
        run = Run.objects.select_related("dataset", "judged_with__judge").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"There is no run #{run_id}.")
        chunks = exports.results_csv(run) if format == "csv" else exports.results_jsonl(run)
        if output == "-":
            for chunk in chunks:
                sys.stdout.write(chunk)
            return
        path = Path(output)
        partial = path.with_name(path.name + ".partial")
        try:
            # newline="" keeps the CSV's own \r\n line ends as they are.
            with partial.open("w", encoding="utf-8", newline="") as handle:
                for chunk in chunks:
                    handle.write(chunk)
            partial.replace(path)  # never leave a half-written export under the real name
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise CommandError(f"Could not write {path}: {error.strerror or error}") from error
        self.stderr.write(f"Wrote run #{run.pk} results to {path}.")
