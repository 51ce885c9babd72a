"""`manage.py generate_dataset`: a draft dataset from a generator's prompts, asked N times.

    generate_dataset --task T --generator NAME --endpoint E --count N [--generator-version V]
                     [--name DATASET] [--logging failed] [--chunk-size 50] [--wait]

Prints the run's id; with --wait it follows the run like `start_run --wait` (exit 0 when
every unit made its items, 1 when some failed, 2 when the run failed or was cancelled, 3 when
it stalled) and then says how many items wait for review and where. The draft is used by no
run until a person has reviewed and published it (the review page).
"""

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.urls import reverse

from apps.datasets.models import Task
from apps.drafting.drafts import MAX_UNITS, create_dataset_generation_run
from apps.drafting.models import DraftItem, Generator
from apps.runs.management.commands.start_run import Command as StartRun
from apps.runs.management.commands.start_run import _wait_arguments
from apps.runs.models import Endpoint, LoggingMode, Run


class Command(StartRun):
    help = "Generate a draft dataset with a generator and an endpoint; --wait follows it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--task", required=True, help="task slug")
        parser.add_argument("--generator", required=True, help="generator name")
        parser.add_argument(
            "--generator-version", type=int, help="generator version (default: the latest)"
        )
        parser.add_argument("--endpoint", required=True, help="endpoint name")
        parser.add_argument(
            "--count", type=int, required=True, help=f"units to generate, 1–{MAX_UNITS}"
        )
        parser.add_argument("--name", default="", help="dataset name (default: the generator's)")
        parser.add_argument(
            "--logging", choices=[m.value for m in LoggingMode], default=LoggingMode.FAILED.value
        )
        parser.add_argument("--chunk-size", type=int, default=50, help="units per background job")
        _wait_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            names = ", ".join(Task.objects.values_list("slug", flat=True)) or "none yet"
            raise CommandError(f"No task {options['task']!r} (there are: {names}).")
        generators = Generator.objects.filter(task=task, name=options["generator"])
        if options.get("generator_version"):
            generators = generators.filter(version=options["generator_version"])
        generator = generators.order_by("-version").first()
        if generator is None:
            names = ", ".join(
                Generator.objects.filter(task=task).latest_versions().values_list("name", flat=True)
            )
            at = (
                f" at version {options['generator_version']}"
                if options.get("generator_version")
                else ""
            )
            raise CommandError(
                f"No generator {options['generator']!r}{at} in task {task.slug} "
                f"(there are: {names or 'none yet'})."
            )
        endpoint = Endpoint.objects.filter(name=options["endpoint"]).first()
        if endpoint is None:
            names = ", ".join(Endpoint.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No endpoint named {options['endpoint']!r} (there are: {names}).")
        if not 1 <= options["count"] <= MAX_UNITS:
            raise CommandError(
                f"--count must be between 1 and {MAX_UNITS}, not {options['count']}."
            )
        run = create_dataset_generation_run(
            generator,
            endpoint,
            options["count"],
            name=options.get("name") or "",
            logging_mode=options["logging"],
            chunk_size=options.get("chunk_size") or 50,
        )
        self.stdout.write(f"Started run #{run.pk} ({run.title}): {run.size_text}.")
        if options["wait"]:
            code = self.wait(run, options["poll"])
            self.report(run)
            sys.exit(code)

    def report(self, run: Run) -> None:
        items = DraftItem.objects.filter(dataset_id=run.dataset_id).count()
        url = reverse("drafting:draft-review", args=[run.dataset_id])
        self.stdout.write(
            f"Draft dataset {run.dataset} (id {run.dataset_id}): {items} items to review at {url}"
        )
