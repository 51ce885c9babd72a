"""`manage.py create_generator`: save a dataset generator (or its next version) from the shell.

    create_generator --task T --name NAME --from-json prompts.json
    create_generator --task T --name NAME --content "…" --questions "…" --answers "…" [--system "…"]

The JSON file holds the three prompts under "content", "questions" and "answers" (GoodAI's LTM
files name the last two "question" and "answer"; both spellings are read) and optionally
"system". A name that exists gets a new version; runs keep the version they used.
"""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.datasets.models import Task
from apps.drafting.forms import GeneratorForm
from apps.drafting.models import Generator

KEYS = {
    "system_message": ("system",),
    "content_prompt": ("content",),
    "questions_prompt": ("questions", "question"),
    "answers_prompt": ("answers", "answer"),
}


class Command(BaseCommand):
    help = "Save a dataset generator's prompts (a new version when the name exists)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--task", required=True, help="task slug")
        parser.add_argument("--name", required=True, help="generator name (a slug)")
        parser.add_argument("--from-json", help="a JSON file with the prompts")
        parser.add_argument("--system", help="system message")
        parser.add_argument("--content", help="content prompt")
        parser.add_argument("--questions", help="questions prompt")
        parser.add_argument("--answers", help="answers prompt")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"No task {options['task']!r}.")
        prompts = self._from_json(options["from_json"]) if options["from_json"] else {}
        for field, names in KEYS.items():
            if options.get(names[0]) is not None:
                prompts[field] = options[names[0]]
        current = (
            Generator.objects.filter(task=task, name=options["name"]).order_by("-version").first()
        )
        data = {"name": options["name"], **prompts}
        if current is not None:
            data = {**{f: getattr(current, f) for f in Generator.CONTENT_FIELDS}, **data}
        form = GeneratorForm(data, instance=current, task=task, editing=current is not None)
        if not form.is_valid():
            errors = [
                f"{name.replace('_', ' ') if name != '__all__' else 'prompts'}: {error}"
                for name, messages in form.errors.items()
                for error in messages
            ]
            raise CommandError("; ".join(errors))
        generator = form.save(commit=False)
        generator.task = task
        generator.save_as_new_version(None)
        self.stdout.write(f"Saved generator {generator} in task {task.slug} (id {generator.pk}).")

    @staticmethod
    def _from_json(path: str) -> dict[str, str]:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CommandError(f"{path}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise CommandError(f"{path}: give a JSON object with content, questions and answers.")
        prompts = {}
        for field, names in KEYS.items():
            found = next((data[n] for n in names if isinstance(data.get(n), str)), None)
            if found is not None:
                prompts[field] = found
        return prompts
