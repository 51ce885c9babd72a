"""#26.2: settings and links of later apps leave the tables of earlier ones. Each move is a
migration that copies the values into the later app's row before the earlier app drops its
column; these tests make rows in the shape before the move and check them after it."""

from collections.abc import Iterator

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

DOUBT = ("doubt_spread", "doubt_repaired", "doubt_confidence")
BEFORE_TASK_SETTINGS = [
    ("datasets", "0012_item_conversation"),
    ("judges", "0018_per_turn"),
    ("leaderboards", "0002_summary_vectors"),
    ("runs", "0021_chat_templates"),
]


@pytest.fixture
def migrate() -> Iterator[MigrationExecutor]:
    """An executor; the database goes back to the latest migrations afterwards, whatever the
    test left it at."""
    executor = MigrationExecutor(connection)
    yield executor
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def at(executor: MigrationExecutor, targets: list[tuple[str, str]]) -> Apps:
    """Migrate to `targets` and give the models as they were there."""
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def add_old_foreign_key(table: str, column: str, target: str) -> None:
    """A database made before #26.2 has the foreign key's index and constraint on the column
    (the migrations now make it a plain indexed column): add them. SQLite's ALTER TABLE DROP
    COLUMN refuses an indexed column (an upgraded install failed so: "error in index … after
    drop column"); PostgreSQL's drops both with it. SQLite cannot add a constraint to a table."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX {table}_{column}_old ON {table} ({column})")
        if connection.vendor != "postgresql":
            return
        cursor.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {column}_old_fk FOREIGN KEY ({column}) "
            f"REFERENCES {target} (id) DEFERRABLE INITIALLY DEFERRED"
        )


@pytest.mark.django_db(transaction=True)
def test_task_settings_move_into_rows_of_their_apps(migrate: MigrationExecutor) -> None:
    """The default judge, its endpoint and the rule for "needs a person" into
    judges.TaskJudging, the agreement threshold into leaderboards.BoardSettings."""
    old = at(migrate, BEFORE_TASK_SETTINGS)
    task_model = old.get_model("datasets", "Task")
    judged = task_model.objects.create(slug="judged", name="Judged")
    plain = task_model.objects.create(slug="plain", name="Plain")
    only_endpoint = task_model.objects.create(slug="only-endpoint", name="Only endpoint")
    untouched = task_model.objects.create(slug="untouched", name="Untouched")
    judge = old.get_model("judges", "Judge").objects.create(
        task_id=judged.pk, name="quality", kind="rubric"
    )
    endpoint = old.get_model("runs", "Endpoint").objects.create(name="judge-ep", model="m")
    task_model.objects.filter(pk=judged.pk).update(
        default_judge=judge.pk, default_judge_endpoint=endpoint.pk, doubt_repaired=True
    )
    task_model.objects.filter(pk=only_endpoint.pk).update(
        default_judge_endpoint=endpoint.pk, doubt_spread=1.5
    )
    task_model.objects.filter(pk=plain.pk).update(alignment_threshold=0.7, doubt_confidence=0.4)
    add_old_foreign_key("datasets_task", "default_judge_id", "judges_judge")
    add_old_foreign_key("datasets_task", "default_judge_endpoint_id", "runs_endpoint")

    new = at(migrate, migrate.loader.graph.leaf_nodes())
    fields = ("default_judge", "default_judge_endpoint", *DOUBT)
    rows = {
        task_id: tuple(values)
        for task_id, *values in new.get_model("judges", "TaskJudging").objects.values_list(
            "task_id", *fields
        )
    }
    assert rows == {
        judged.pk: (judge.pk, endpoint.pk, None, True, None),
        only_endpoint.pk: (None, endpoint.pk, 1.5, False, None),
        plain.pk: (None, None, None, False, 0.4),
    }
    boards = new.get_model("leaderboards", "BoardSettings").objects
    assert list(boards.values_list("task_id", "alignment_threshold")) == [(plain.pk, 0.7)]
    with connection.cursor() as cursor:
        columns = {
            c.name for c in connection.introspection.get_table_description(cursor, "datasets_task")
        }
    gone = {"default_judge_id", "default_judge_endpoint_id", "alignment_threshold", *DOUBT}
    assert not columns & gone

    # And back: the columns return with their values.
    old = at(migrate, BEFORE_TASK_SETTINGS)
    back = old.get_model("datasets", "Task").objects.order_by("slug")
    assert list(back.values_list("slug", *fields, "alignment_threshold")) == [
        ("judged", judge.pk, endpoint.pk, None, True, None, None),
        ("only-endpoint", None, endpoint.pk, 1.5, False, None, None),
        ("plain", None, None, None, False, 0.4, 0.7),
        ("untouched", None, None, None, False, None, None),
    ]
    assert untouched.pk not in rows


BEFORE_JUDGE_RUN = [
    ("datasets", "0013_task_judging_moved"),
    ("judges", "0019_task_judging"),
    ("runs", "0021_chat_templates"),
]


@pytest.mark.django_db(transaction=True)
def test_the_judge_of_a_run_moves_into_judge_run(migrate: MigrationExecutor) -> None:
    old = at(migrate, BEFORE_JUDGE_RUN)
    task = old.get_model("datasets", "Task").objects.create(slug="t", name="T")
    dataset = old.get_model("datasets", "Dataset").objects.create(task_id=task.pk, name="d")
    judge_model = old.get_model("judges", "Judge")
    rubric = judge_model.objects.create(task_id=task.pk, name="quality", kind="rubric")
    which = judge_model.objects.create(task_id=task.pk, name="which", kind="pairwise")
    run_model = old.get_model("runs", "Run")
    generation = run_model.objects.create(task_id=task.pk, kind="generation", dataset=dataset)
    judged = run_model.objects.create(
        task_id=task.pk, kind="judge", dataset=dataset, judge=rubric.pk, source_run=generation
    )
    pairwise = run_model.objects.create(
        task_id=task.pk, kind="pairwise", dataset=dataset, judge=which.pk
    )
    response = old.get_model("runs", "Response").objects.create(
        run=generation,
        item=old.get_model("datasets", "Item").objects.create(
            dataset=dataset, key="k", position=0, fields={}
        ),
        text="an answer",
        status="ok",
    )
    add_old_foreign_key("runs_run", "judge_id", "judges_judge")

    new = at(migrate, migrate.loader.graph.leaf_nodes())
    rows = dict(new.get_model("judges", "JudgeRun").objects.values_list("run_id", "judge_id"))
    assert rows == {judged.pk: rubric.pk, pairwise.pk: which.pk}
    # The table rebuilt without the column (SQLite) kept every run and what points at them.
    runs = new.get_model("runs", "Run").objects
    assert set(runs.values_list("pk", flat=True)) == {generation.pk, judged.pk, pairwise.pk}
    assert runs.get(pk=judged.pk).source_run_id == generation.pk
    assert new.get_model("runs", "Response").objects.get(pk=response.pk).run_id == generation.pk
    with connection.cursor() as cursor:
        columns = {
            c.name for c in connection.introspection.get_table_description(cursor, "runs_run")
        }
    assert "judge_id" not in columns

    old = at(migrate, BEFORE_JUDGE_RUN)
    back = old.get_model("runs", "Run").objects.order_by("pk")
    assert list(back.values_list("kind", "judge")) == [
        ("generation", None),
        ("judge", rubric.pk),
        ("pairwise", which.pk),
    ]
