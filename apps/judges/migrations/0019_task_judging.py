"""The task's default judge and its endpoint move from datasets.Task into a row of judges,
TaskJudging (#26.2): the task (datasets) names no later app. Each task with a default gets its
row; datasets 0013 drops Task's columns after this copy (run_before), on SQLite too, where
dropping a column rebuilds the table without it."""

import django.db.models.deletion
from django.db import migrations, models


def forwards(apps, schema_editor):
    Task = apps.get_model("datasets", "Task")
    Judge = apps.get_model("judges", "Judge")
    Endpoint = apps.get_model("runs", "Endpoint")
    TaskJudging = apps.get_model("judges", "TaskJudging")
    judges = set(Judge.objects.values_list("pk", flat=True))
    endpoints = set(Endpoint.objects.values_list("pk", flat=True))
    rows = [
        TaskJudging(
            task_id=task_id,
            # Columns without a constraint since datasets 0002: keep only what still exists.
            default_judge_id=judge_id if judge_id in judges else None,
            default_judge_endpoint_id=endpoint_id if endpoint_id in endpoints else None,
        )
        for task_id, judge_id, endpoint_id in Task.objects.filter(
            models.Q(default_judge__isnull=False) | models.Q(default_judge_endpoint__isnull=False)
        ).values_list("pk", "default_judge", "default_judge_endpoint")
    ]
    TaskJudging.objects.bulk_create(rows, batch_size=1000)


def backwards(apps, schema_editor):
    Task = apps.get_model("datasets", "Task")
    TaskJudging = apps.get_model("judges", "TaskJudging")
    for row in TaskJudging.objects.all():
        Task.objects.filter(pk=row.task_id).update(
            default_judge=row.default_judge_id, default_judge_endpoint=row.default_judge_endpoint_id
        )


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0012_item_conversation"),
        ("judges", "0018_per_turn"),
        ("runs", "0014_response_cache_and_budget"),
    ]
    run_before = [("datasets", "0013_task_judging_moved")]

    operations = [
        migrations.CreateModel(
            name="TaskJudging",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "default_judge",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="judges.judge",
                    ),
                ),
                (
                    "default_judge_endpoint",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="runs.endpoint",
                    ),
                ),
                (
                    "task",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="judging",
                        to="datasets.task",
                    ),
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
