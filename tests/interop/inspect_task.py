"""The Inspect AI task tests/interop runs against the loopback server (tests/interop/tools.py):
three capitals, two epochs, two scorers, metadata on every sample."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes, match
from inspect_ai.solver import generate


@task
def capitals() -> Task:
    return Task(
        dataset=[
            Sample(
                id="fr",
                input="What is the capital of France?",
                target="Paris",
                metadata={"region": "europe"},
            ),
            Sample(
                id="jp",
                input="What is the capital of Japan?",
                target="Tokyo",
                metadata={"region": "asia"},
            ),
            Sample(
                id="pe",
                input="What is the capital of Peru?",
                target="Lima",
                metadata={"region": "americas"},
            ),
        ],
        solver=generate(),
        scorer=[match(location="any"), includes()],
        epochs=2,
    )
