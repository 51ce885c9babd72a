"""Import a CSV, JSON, JSONL, Excel (.xlsx) or Parquet file as a dataset, with the same checks,
messages and suggested mapping as the page."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.importing import (
    SNIFFED_ROWS,
    Mapping,
    import_file,
    import_table,
    reference_inputs_warning,
    suggest_mapping,
)
from apps.datasets.models import Dataset, Task
from apps.datasets.readers import FORMATS, DatasetError, binary_format, read_head, workbook_sheets
from apps.datasets.uploads import PREVIEW_BYTES


def previous_sheet(task: Task, name: str, path: Path, fmt: str | None) -> str | None:
    """The sheet the dataset's latest version was read from, when this workbook has it too."""
    previous = Dataset.objects.latest_version(task, name)
    if previous is None or not previous.sheet or (fmt or binary_format(path, path.name)) != "xlsx":
        return None
    return previous.sheet if previous.sheet in workbook_sheets(path) else None


SINGLE_ROLES = ("id_column", "reference_column", "tags_column", "conversation_column")


def given_mapping(suggested: Mapping, options: dict[str, Any]) -> Mapping:
    """The page's suggestion with every role given on the command line put in its place: a
    column named for one role leaves the others it had; `--input-column` lists are taken as
    given, and '' for a single role means none."""
    mapping = Mapping.from_dict(suggested.to_dict())
    named: list[str] = []
    for key in SINGLE_ROLES:
        if options.get(key) is not None:
            setattr(mapping, key, options[key] or None)
            if key != "conversation_column":  # a conversation stays an input too
                named += [options[key]] if options[key] else []
    if options.get("response_column") is not None:
        mapping.response_columns = [name for name in options["response_column"] if name]
        named += mapping.response_columns
    for key in SINGLE_ROLES:
        if options.get(key) is None and getattr(mapping, key) in named:
            setattr(mapping, key, None)
    if options.get("response_column") is None:
        mapping.response_columns = [c for c in mapping.response_columns if c not in named]
    if options.get("input_column") is not None:
        mapping.input_columns = [name for name in options["input_column"] if name]
    else:
        mapping.input_columns = [c for c in mapping.input_columns if c not in named]
    return mapping


def described(mapping: Mapping) -> str:
    parts = [
        ("id", mapping.id_column or "the row position"),
        ("inputs", ", ".join(mapping.input_columns) or "none"),
        ("reference", mapping.reference_column or "none"),
        ("tags", mapping.tags_column or "none"),
        ("responses", ", ".join(mapping.response_columns) or "none"),
        ("conversation", mapping.conversation_column or "none"),
    ]
    return " · ".join(f"{role} {value}" for role, value in parts)


class Command(BaseCommand):
    help = (
        "Import a CSV, JSON, JSONL, Excel (.xlsx) or Parquet file into a task as a new dataset "
        "(or its next version). Columns are mapped as the upload page suggests; the options "
        "below change single roles."
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
        parser.add_argument("--id-column", help="Column holding each row's id ('' for none).")
        parser.add_argument(
            "--reference-column", help="Column holding the reference answer ('' for none)."
        )
        parser.add_argument(
            "--tags-column", help="Column holding tags (a list, or split on , ;; '' for none)."
        )
        parser.add_argument("--response-column", action="append", help="Repeat for each model.")
        parser.add_argument(
            "--conversation-column",
            help="Column of conversations: chat messages (role/content), MT-Bench turns or "
            "ShareGPT from/value ('' for none).",
        )
        parser.add_argument(
            "--input-column",
            action="append",
            help="Repeat; default: as suggested (every unmapped column not named like a "
            "reference answer).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["path"]
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"There is no task with the slug {options['task']!r}.")
        name = options["name"] or path.stem
        try:
            sheet = options["sheet"] or previous_sheet(task, name, path, options["format"])
            # A big file is read as the upload page reads it: its first part for the columns
            # and the suggested mapping, then streamed to the database a batch at a time.
            table = read_head(path, options["format"], path.name, PREVIEW_BYTES, sheet)
            suggested = suggest_mapping(task, name, table.columns, table.rows[:SNIFFED_ROWS])
            mapping = given_mapping(suggested, options)
            if table.complete:
                dataset = import_table(task, name, table, mapping, file_name=path.name)
            else:
                dataset = import_file(task, name, path, table, mapping)
        except DatasetError as exc:
            raise CommandError(f"{path}: {exc}") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {dataset.row_count} items from {path.name} into {task.slug} / "
                f"{dataset} (dataset #{dataset.pk}, {dataset.format}"
                f"{f', sheet {dataset.sheet!r}' if dataset.sheet else ''})."
            )
        )
        stored = Mapping.from_dict(dataset.mapping)
        self.stdout.write(f"Columns: {described(stored)}.")
        if shown := stored.reference_like_inputs():
            self.stdout.write(self.style.WARNING(reference_inputs_warning(shown)))
        if (same := dataset.unchanged_from()) is not None:
            self.stdout.write(f"It has the same items as {same}: nothing was started.")
        elif dataset.announced:
            # Later apps react to the import (the default judge, "evaluate every model").
            self.stdout.write(f"Started on it: {'; '.join(dataset.announced)}.")
