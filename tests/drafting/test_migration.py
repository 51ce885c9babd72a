"""The move of drafting out of runs keeps every generator, draft and run's link to its
generator: migrated forward from runs' last schema with them, and back again."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0016_response_schema"), ("drafting", None)]


def migrate(targets: list[tuple[str, str | None]]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def latest() -> list[tuple[str, str | None]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def test_a_runs_generator_becomes_its_draft_setup_and_comes_back_when_migrated_back(task):
    old = migrate(BEFORE)
    Generator = old.get_model("runs", "Generator")
    Run = old.get_model("runs", "Run")
    Dataset = old.get_model("datasets", "Dataset")
    generator = Generator.objects.create(
        task_id=task.pk, name="worlds", content_prompt="c", questions_prompt="q", answers_prompt="a"
    )
    draft = Dataset.objects.create(task_id=task.pk, name="worlds", status="draft")
    other = Dataset.objects.create(task_id=task.pk, name="plain")
    made = Run.objects.create(
        task_id=task.pk, kind="gen_dataset", dataset=draft, generator=generator
    )
    plain = Run.objects.create(task_id=task.pk, kind="generation", dataset=other)

    new = migrate(latest())
    DraftSetup = new.get_model("drafting", "DraftSetup")
    assert list(DraftSetup.objects.values_list("run_id", "generator_id")) == [
        (made.pk, generator.pk)
    ]
    assert new.get_model("drafting", "Generator").objects.get().name == "worlds"  # same table
    with connection.cursor() as cursor:
        columns = [
            c.name for c in connection.introspection.get_table_description(cursor, "runs_run")
        ]
    assert "generator_id" not in columns

    old = migrate(BEFORE)
    Run = old.get_model("runs", "Run")
    assert dict(Run.objects.values_list("pk", "generator_id")) == {
        made.pk: generator.pk, plain.pk: None
    }  # fmt: skip
    migrate(latest())
