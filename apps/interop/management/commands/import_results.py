"""Import another evaluation tool's result files into a task (all or nothing)."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import Task
from apps.interop.models import Import
from apps.interop.results import ImportError_
from apps.interop.tools import import_files


class Command(BaseCommand):
    help = (
        "Import result files another tool wrote (one Inspect log per model, …): a dataset, a "
        "response set per model and a judge run per scorer."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("files", nargs="+", help="the tool's files")
        parser.add_argument("--task", required=True, help="task slug")
        parser.add_argument("--tool", required=True, choices=[t.value for t in Import.Tool])
        parser.add_argument("--name", default="", help="dataset name (default: the tool's)")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"No task {options['task']!r}.")
        files = []
        for given in options["files"]:
            path = Path(given)
            if not path.is_file():
                raise CommandError(f"{given}: no such file.")
            files.append((path.name, path.read_bytes()))
        try:
            source = import_files(task, options["tool"], files, None, options["name"])
        except ImportError_ as exc:
            raise CommandError(str(exc)) from None
        dataset = source.dataset
        self.stdout.write(
            f"Imported {source}: {dataset.row_count} items into {task} / {dataset} "
            f"(dataset #{dataset.pk}); response sets "
            + ", ".join(f"#{log.run_id} {log.run.label}" for log in source.logs.all())
        )
