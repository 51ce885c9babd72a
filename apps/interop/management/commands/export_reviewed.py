"""Write an imported response set back in its tool's shape, with the scores people left."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.interop.models import ImportedLog
from apps.interop.results import ImportError_
from apps.interop.tools import export_reviewed


class Command(BaseCommand):
    help = "Export an imported response set (run id) in its tool's format, with the reviews."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("run", type=int, help="the imported response set's run id")
        parser.add_argument(
            "-o",
            "--output",
            help="file or directory (default: the tool's names; lm-eval's files go in a directory)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        log = ImportedLog.objects.filter(run_id=options["run"]).select_related("source").first()
        if log is None:
            raise CommandError(f"Run #{options['run']} was not imported from another tool.")
        try:
            files = export_reviewed(log)
        except ImportError_ as exc:
            raise CommandError(str(exc)) from None
        given = Path(options["output"]) if options["output"] else None
        for name, content in files:
            if given is None:
                target = Path(name)
            elif given.is_dir() or len(files) > 1:
                target = given / name
            else:
                target = given
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            self.stdout.write(f"Wrote {target}")
