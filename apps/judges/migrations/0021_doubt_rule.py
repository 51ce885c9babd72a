"""The rule that sends judged items to people ("needs a person", #14.4) moves from
datasets.Task into judges' TaskJudging (#26.2): judges is the first app that reads it. Each
task with a rule gets it on its row (made when missing); datasets 0015 drops Task's columns
after this copy (run_before)."""

from django.db import migrations, models

RULE = ("doubt_spread", "doubt_repaired", "doubt_confidence")


def forwards(apps, schema_editor):
    Task = apps.get_model("datasets", "Task")
    TaskJudging = apps.get_model("judges", "TaskJudging")
    with_rule = Task.objects.filter(
        models.Q(doubt_spread__isnull=False)
        | models.Q(doubt_repaired=True)
        | models.Q(doubt_confidence__isnull=False)
    )
    for task_id, *values in with_rule.values_list("pk", *RULE).iterator():
        TaskJudging.objects.update_or_create(task_id=task_id, defaults=dict(zip(RULE, values)))


def backwards(apps, schema_editor):
    Task = apps.get_model("datasets", "Task")
    TaskJudging = apps.get_model("judges", "TaskJudging")
    for task_id, *values in TaskJudging.objects.values_list("task_id", *RULE).iterator():
        Task.objects.filter(pk=task_id).update(**dict(zip(RULE, values)))


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0014_board_settings_moved"),
        ("judges", "0020_judge_runs"),
    ]
    run_before = [("datasets", "0015_doubt_rule_moved")]

    operations = [
        migrations.AddField(
            model_name="taskjudging",
            name="doubt_confidence",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="taskjudging",
            name="doubt_repaired",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="taskjudging",
            name="doubt_spread",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.RunPython(forwards, backwards),
    ]
