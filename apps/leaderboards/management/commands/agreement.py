"""`manage.py agreement TASK [--run ID] --format csv|json|xlsx|parquet`: agreement between the people who
reviewed the task's scores (several reviewers per item), per subject, tag, pair of reviewers
and reviewer, beside the judge's agreement with them (apps.leaderboards.people)."""

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.datasets.models import Task
from apps.leaderboards import exports, tables
from apps.leaderboards.people import people_agreement
from apps.runs.models import Run


class Command(BaseCommand):
    help = "Agreement between reviewers (Krippendorff's α, Fleiss' κ, percent agreement)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="the task's slug")
        parser.add_argument("--run", type=int, help="only this judge run's reviews")
        parser.add_argument(
            "--format",
            choices=["csv", "json", *tables.FORMATS],
            default="csv",
            help="xlsx and parquet: the CSV's table, typed, written as bytes (> FILE)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"There is no task {options['task']!r}.")
        run_id = options["run"]
        if run_id is not None and not Run.objects.judging().filter(pk=run_id, task=task).exists():
            raise CommandError(f"Task {task.slug} has no judge run #{run_id}.")
        found = people_agreement(task, run_id)
        if found.empty:
            self.stderr.write(f"No reviews in {task.slug} yet.")
        if options["format"] == "json":
            sys.stdout.write(exports.people_json(found))
        elif options["format"] in tables.FORMATS:
            sys.stdout.flush()
            sys.stdout.buffer.write(tables.convert(exports.people_csv(found), options["format"]))
        else:
            sys.stdout.writelines(exports.people_csv(found))
