"""The judge of a judge, check or pairwise run moves from runs.Run into a row of judges,
JudgeRun (#26.2): runs names no later app. Every run with a judge gets its row; runs 0023
drops Run's column after this copy (run_before), on SQLite too, where dropping a column
rebuilds the table without it."""

import django.db.models.deletion
from django.db import migrations, models


def forwards(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    JudgeRun = apps.get_model("judges", "JudgeRun")
    judges = set(apps.get_model("judges", "Judge").objects.values_list("pk", flat=True))
    pairs = Run.objects.filter(judge__isnull=False).values_list("pk", "judge").iterator()
    batch = []
    for run_id, judge_id in pairs:
        # A column without a constraint since runs 0001: keep only judges that exist.
        if judge_id in judges:
            batch.append(JudgeRun(run_id=run_id, judge_id=judge_id))
        if len(batch) >= 1000:
            JudgeRun.objects.bulk_create(batch)
            batch = []
    JudgeRun.objects.bulk_create(batch)


def backwards(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    JudgeRun = apps.get_model("judges", "JudgeRun")
    for run_id, judge_id in JudgeRun.objects.values_list("run_id", "judge_id").iterator():
        Run.objects.filter(pk=run_id).update(judge=judge_id)


class Migration(migrations.Migration):
    # After runs drops its check (a judge run has a judge), before it drops the column: undone,
    # the judges are back in the column before the check returns.
    dependencies = [
        ("judges", "0019_task_judging"),
        ("runs", "0022_judge_run_check_moved"),
    ]
    run_before = [("runs", "0023_judge_moved")]

    operations = [
        migrations.CreateModel(
            name="JudgeRun",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="judged_with",
                        serialize=False,
                        to="runs.run",
                    ),
                ),
                (
                    "judge",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="judge_runs",
                        to="judges.judge",
                    ),
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
