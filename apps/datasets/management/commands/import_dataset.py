"""Import a CSV, JSON, JSONL, Excel (.xlsx) or Parquet file as a dataset, with the same checks and
messages as the page."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.importing import Mapping, import_dataset
from apps.datasets.models import Dataset, Task
from apps.datasets.readers import FORMATS, DatasetError, binary_format, workbook_sheets


def previous_sheet(task: Task, name: str, path: Path, fmt: str | None) -> str | None:
    """The sheet the dataset's latest version was read from, when this workbook has it too."""
    previous = Dataset.objects.latest_version(task, name)
    if previous is None or not previous.sheet or (fmt or binary_format(path, path.name)) != "xlsx":
        return None
    return previous.sheet if previous.sheet in workbook_sheets(path) else None


class Command(BaseCommand):
    help = (
        "Import a CSV, JSON, JSONL, Excel (.xlsx) or Parquet file into a task as a new dataset "
        "(or its next version)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--task", required=True, help="The task's slug.")
        parser.add_argument("--name", help="Dataset name (default: the file name without suffix).")
        parser.add_argument("--format", choices=FORMATS, help="Override format detection.")
        parser.add_argument(
            "--sheet",
            help="Excel: the worksheet to read (default: the first, or the one the dataset's "
            "latest version was read from).",
        )
        parser.add_argument("--id-column", help="Column holding each row's id.")
        parser.add_argument("--reference-column", help="Column holding the reference answer.")
        parser.add_argument("--tags-column", help="Column holding tags (a list, or split on , ;).")
        parser.add_argument(
            "--response-column", action="append", default=[], help="Repeat for each model."
        )
        parser.add_argument(
            "--input-column", action="append", default=[], help="Repeat; default: unmapped ones."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"There is no task with the slug {options['task']!r}.")
        mapping = Mapping(
            id_column=options["id_column"],
            input_columns=options["input_column"],
            reference_column=options["reference_column"],
            tags_column=options["tags_column"],
            response_columns=options["response_column"],
        )
        name = options["name"] or path.stem
        try:
            sheet = options["sheet"] or previous_sheet(task, name, path, options["format"])
            dataset = import_dataset(task, name, path, mapping, fmt=options["format"], sheet=sheet)
        except DatasetError as exc:
            raise CommandError(f"{path}: {exc}") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {dataset.row_count} items from {path.name} into {task.slug} / "
                f"{dataset} (dataset #{dataset.pk}, {dataset.format}"
                f"{f', sheet {dataset.sheet!r}' if dataset.sheet else ''})."
            )
        )
        if (same := dataset.unchanged_from()) is not None:
            self.stdout.write(f"It has the same items as {same}: nothing was started.")
        elif started := dataset.runs.count():
            # Later apps react to the import (the default judge, "evaluate every model").
            self.stdout.write(f"{started} run{'s' * (started != 1)} started on it.")
