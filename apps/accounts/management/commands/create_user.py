import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.models import User


class Command(BaseCommand):
    help = "Create a user with a role (admin, reviewer, viewer), or update the role of an existing one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=User.Role.values, default=User.Role.VIEWER)
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password",
            help="The password; else read from $EVALSITE_PASSWORD, else the user cannot log in yet.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        password = opts["password"] or os.environ.get("EVALSITE_PASSWORD")
        user, created = User.objects.get_or_create(username=opts["username"])
        user.role = opts["role"]
        user.email = opts["email"] or user.email
        # Admins also get the Django admin and the RQ dashboard.
        user.is_staff = opts["role"] == User.Role.ADMIN
        if password:
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        if not opts["username"].strip():
            raise CommandError("The username must not be blank.")
        user.save()
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} {user.username} ({user.role}).")
