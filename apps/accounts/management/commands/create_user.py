import os
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug

from apps.accounts.models import Project, User


class Command(BaseCommand):
    help = (
        "Create a user with a role (admin, reviewer, viewer), or update the role of an existing "
        "one, as a member of the projects named (default: the default project) with that role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=User.Role.values, default=User.Role.VIEWER)
        parser.add_argument(
            "--project",
            action="append",
            metavar="SLUG",
            help="A project the user becomes a member of, with the role (repeatable; made if "
            "missing). Default: the default project.",
        )
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--password",
            help="The password; else read from $EVALSITE_PASSWORD, else the user cannot log in yet.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        slugs = opts["project"] or [Project.DEFAULT_SLUG]
        for slug in slugs:
            try:
                validate_slug(slug)
            except ValidationError as error:
                raise CommandError(f"--project {slug!r}: {error.messages[0]}") from None
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
        for slug in slugs:
            project = (
                Project.default()
                if slug == Project.DEFAULT_SLUG
                else Project.objects.get_or_create(slug=slug, defaults={"name": slug})[0]
            )
            project.add_member(user, opts["role"])
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} {user.username} ({user.role}).")
