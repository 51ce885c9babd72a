"""A judge run's judge moves to judges.JudgeRun (#26.2): first the check that a judge run has
one goes (JudgeRun.create_with makes the run and its row in one transaction). Its own
migration, so that undoing the move copies the judges back (judges 0020) before the check
returns: on SQLite the check comes back by rebuilding the table, and any judge run without its
judge then would fail it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0021_chat_templates")]

    operations = [migrations.RemoveConstraint(model_name="run", name="judge_run_has_judge")]
