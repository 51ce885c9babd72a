"""Demo data for a first look: three users (one per role) and a multiple-choice task whose
dataset already holds the answers of two models. Running it again changes nothing.

It lives in the last app of the flow because it makes rows of the apps before it (users, a
task and its dataset, a judge)."""

import csv
import io
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from apps.accounts.models import Project, User
from apps.datasets.importing import import_dataset
from apps.datasets.models import Dataset, Task
from apps.judges.models import Judge, TaskJudging

# Demo logins, created only when the username is free. Change them before sharing a server.
DEMO_USERS: list[tuple[str, str, str]] = [
    ("admin", "demo-admin", User.Role.ADMIN),
    ("reviewer", "demo-reviewer", User.Role.REVIEWER),
    ("viewer", "demo-viewer", User.Role.VIEWER),
]

TASK_SLUG = "demo-mcq"
TASK_NAME = "Demo: multiple choice"
DATASET_NAME = "general-knowledge-mcq"
DEMO_JUDGE = "choice-match"
RESPONSE_COLUMNS = ["model_a", "model_b"]
COLUMNS = ["id", "subject", "question", "A", "B", "C", "D", "answer", *RESPONSE_COLUMNS]
MAPPING = {
    "id_column": "id",
    "input_columns": ["question", "A", "B", "C", "D"],
    "reference_column": "answer",
    "tags_column": "subject",
    "response_columns": RESPONSE_COLUMNS,
}

# id, subject, question, A, B, C, D, answer, model_a, model_b. The answers are free text in the
# shapes real models produce; some are right, some wrong, one answers two options.
ROWS: list[tuple[str, ...]] = [
    ("q01", "science", "Which planet is known as the Red Planet?",
     "Venus", "Mars", "Jupiter", "Saturn", "B",
     "The answer is B.", "B) Mars"),
    ("q02", "science", "What gas do plants absorb from the air for photosynthesis?",
     "Oxygen", "Nitrogen", "Carbon dioxide", "Helium", "C",
     "(C)", "Plants take in oxygen, so the answer is A."),
    ("q03", "science", "Which of these are noble gases? Select all that apply.",
     "Neon", "Chlorine", "Argon", "Hydrogen", "A, C",
     "A, C", "A"),
    ("q04", "math", "What is 7 × 8?",
     "54", "56", "58", "64", "B",
     "7 × 8 = 56, so B.", "Answer: B"),
    ("q05", "math", "Which number is prime?",
     "21", "27", "29", "33", "C",
     "The answer is (D).", "C. 29 has no divisors other than 1 and itself."),
    ("q06", "math", "What is the derivative of x²?",
     "x", "2x", "x²/2", "2", "B",
     "b", "The derivative is 2x, option B."),
    ("q07", "history", "In which year did the Berlin Wall fall?",
     "1987", "1989", "1991", "1993", "B",
     "B. 1989", "I believe it was 1991: C."),
    ("q08", "history", "Who was the first person to walk on the Moon?",
     "Buzz Aldrin", "Yuri Gagarin", "Neil Armstrong", "Michael Collins", "C",
     "C) Neil Armstrong", "The answer is C."),
    ("q09", "history", "Which ancient civilisation built Machu Picchu?",
     "Aztec", "Maya", "Olmec", "Inca", "D",
     "D", "答案是D"),
    ("q10", "geography", "What is the capital of Australia?",
     "Sydney", "Melbourne", "Canberra", "Perth", "C",
     "Sydney is the largest city, so A.", "(C) Canberra"),
    ("q11", "geography", "Which river is the longest in Europe?",
     "Danube", "Volga", "Rhine", "Dnieper", "B",
     "The Volga (B).", "A. The Danube"),
    ("q12", "geography", "Which of these countries lie on the equator? Select all that apply.",
     "Kenya", "Egypt", "Ecuador", "Chile", "A, C",
     "The answer is A, C.", "C"),
]  # fmt: skip


def demo_csv() -> bytes:
    """The demo dataset as the CSV file a user would upload."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    writer.writerows(ROWS)
    return buffer.getvalue().encode()


def ensure_users() -> list[tuple[str, str | None, str]]:
    """Create the demo users that are missing; return (username, password or None, role).

    The password is None when the account exists with a password other than the demo one.
    """
    logins: list[tuple[str, str | None, str]] = []
    for username, password, role in DEMO_USERS:
        user = User.objects.filter(username=username).first()
        if user is None:
            user = User(username=username, role=role, is_staff=role == User.Role.ADMIN)
            user.set_password(password)
            user.save()
            # The demo task is in the default project: each demo user is a member there.
            Project.default().add_member(user, role)
        shown = password if user.check_password(password) else None
        logins.append((username, shown, user.role))
    return logins


def ensure_demo_task(owner: User | None) -> tuple[Task, Dataset]:
    """The demo task and its dataset, imported like an upload; left as they are when they exist."""
    with transaction.atomic():
        task, _ = Task.objects.get_or_create(
            slug=TASK_SLUG,
            defaults={
                "name": TASK_NAME,
                "description": (
                    "Twelve general-knowledge multiple-choice questions with the answers of "
                    "two models (columns model_a and model_b), ready to judge."
                ),
                "created_by": owner,
            },
        )
        dataset = Dataset.objects.filter(task=task, name=DATASET_NAME).order_by("version").first()
        if dataset is None:
            # The default judge must exist before the import: the import then starts a judge
            # run for each response column, and the worker fills the leaderboard at start-up.
            ensure_demo_judge(task, owner)
            dataset = import_dataset(
                task,
                DATASET_NAME,
                demo_csv(),
                MAPPING,
                fmt="csv",
                user=owner,
                file_name=f"{DATASET_NAME}.csv",
            )
    return task, dataset


def ensure_demo_judge(task: Task, owner: User | None) -> Judge:
    """A rule-based multiple-choice judge (no API key needed) as the task's default judge."""
    judge, _ = Judge.objects.get_or_create(
        task=task,
        name=DEMO_JUDGE,
        version=1,
        defaults={
            "kind": Judge.Kind.MCQ_RULE,
            "label_type": Judge.LabelType.UPPER,
            "label_count": 4,
            "subjects": [{"name": "score", "min": 0, "max": 100}],
            "created_by": owner,
        },
    )
    judging = TaskJudging.for_task(task)
    if judging.default_judge_id is None:
        judging.choose(judge, judging.default_judge_endpoint)
    return judge


class Command(BaseCommand):
    help = "Create the demo users (admin, reviewer, viewer) and the demo-mcq task, if missing."

    def handle(self, *args: Any, **options: Any) -> None:
        logins = ensure_users()
        task, dataset = ensure_demo_task(User.objects.filter(username="admin").first())
        self.stdout.write(
            f"Demo task: {task.slug} ({task.name}), dataset {dataset.name} with "
            f"{dataset.items.count()} items and responses from {', '.join(dataset.response_columns)}."
        )
        self.stdout.write("Demo logins:")
        for username, password, role in logins:
            shown = password or "(password changed since: not shown)"
            self.stdout.write(f"  {username:<9} / {shown:<14}  {role}")
