from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.backups import BackupError, restore


class Command(BaseCommand):
    help = (
        "Restore a backup made by `backup`: the whole database (all or nothing), the uploaded "
        "files and the secret key. Stop the web server and the workers first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("backup", type=Path, help="The backup's tar file.")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Go ahead when the database already holds tasks or users: they are replaced.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            manifest = restore(opts["backup"], replace=opts["replace"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        files = len(manifest["media"])
        self.stdout.write(
            f"Restored the {manifest['engine']} database of {manifest['created_at']} and "
            f"{files} uploaded file{'s' if files != 1 else ''}. Run `manage.py migrate` (a "
            "backup of an older evalsite needs it), then start the web server and workers."
        )
