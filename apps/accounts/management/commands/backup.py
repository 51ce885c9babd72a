from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.backups import BackupError, backup


class Command(BaseCommand):
    help = (
        "Back up the database (SQLite's online backup, or pg_dump's custom format) and the "
        "uploaded files into one tar file, while the site runs. Restore it with `restore`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "output",
            nargs="?",
            type=Path,
            help="The new file to write (default: backups/evalsite-<UTC time>.tar in the data "
            "directory). It holds API keys and the secret key: keep it as safe as the server.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            done = backup(opts["output"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Backed up the {done.engine} database and {done.files} uploaded "
            f"file{'s' if done.files != 1 else ''} to {done.path} ({done.bytes:,} bytes)."
        )
