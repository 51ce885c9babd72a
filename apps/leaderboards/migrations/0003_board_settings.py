"""A task's agreement threshold (the board warns below it) moves from datasets.Task into a
row of leaderboards, BoardSettings (#26.2). Each task that has one gets its row; datasets 0014
drops Task's column after this copy (run_before)."""

import django.db.models.deletion
from django.db import migrations, models


def forwards(apps, schema_editor):
    Task = apps.get_model("datasets", "Task")
    BoardSettings = apps.get_model("leaderboards", "BoardSettings")
    rows = [
        BoardSettings(task_id=task_id, alignment_threshold=threshold)
        for task_id, threshold in Task.objects.filter(
            alignment_threshold__isnull=False
        ).values_list("pk", "alignment_threshold")
    ]
    BoardSettings.objects.bulk_create(rows, batch_size=1000)


def backwards(apps, schema_editor):
    Task = apps.get_model("datasets", "Task")
    BoardSettings = apps.get_model("leaderboards", "BoardSettings")
    for task_id, threshold in BoardSettings.objects.values_list("task_id", "alignment_threshold"):
        Task.objects.filter(pk=task_id).update(alignment_threshold=threshold)


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0013_task_judging_moved"),
        ("leaderboards", "0002_summary_vectors"),
    ]
    run_before = [("datasets", "0014_board_settings_moved")]

    operations = [
        migrations.CreateModel(
            name="BoardSettings",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("alignment_threshold", models.FloatField(blank=True, null=True)),
                (
                    "task",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="board_settings",
                        to="datasets.task",
                    ),
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
