"""`manage.py export_config TASK [-o FILE]`: a task as the configuration file `apply` reads.

The newest version of each template, judge and generator, the endpoints the task's file named
and its runs use (API keys never: only the name of their environment variable), the default
judge and the review policy; fields at their defaults are left out. Applied again, it changes
nothing.
"""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.configs.taskfile import export
from apps.datasets.models import Task


class Command(BaseCommand):
    help = "Write a task's configuration (YAML) to standard output or a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="task slug")
        parser.add_argument("-o", "--output", help="write to this file instead")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"There is no task {options['task']!r}.")
        text = export(task)
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
