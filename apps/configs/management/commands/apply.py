"""`manage.py apply FILE [--dry-run]`: make a task what its configuration file says.

Endpoints, prompt templates, judges, generators, the default judge and the review policy
(apps/configs/taskfile.py). Prints the plan, one line per thing: create, update, new version or
unchanged. With --dry-run nothing is saved; a file with any problem saves nothing either, and
every problem is printed, naming its section, entry and field.
"""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import User
from apps.configs.taskfile import ConfigError, apply


class Command(BaseCommand):
    help = "Create or version a task's endpoints, templates, judges and more from a YAML file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the task's configuration file (YAML)")
        parser.add_argument("--dry-run", action="store_true", help="print the plan, save nothing")
        parser.add_argument("--user", help="username recorded as the author of new versions")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: cannot read it: {exc}") from None
        user = None
        if options["user"]:
            user = User.objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"There is no user {options['user']!r}.")
        try:
            plan = apply(text, user, dry_run=options["dry_run"])
        except ConfigError as exc:
            lines = "\n".join(f"  {problem}" for problem in exc.problems)
            raise CommandError(f"{path}: nothing was applied:\n{lines}") from None
        for line in plan.lines:
            self.stdout.write(line)
        verb = "would change" if options["dry_run"] else "changed"
        self.stdout.write(f"{plan.task}: {verb} {plan.changed} of {len(plan.changes)}.")
