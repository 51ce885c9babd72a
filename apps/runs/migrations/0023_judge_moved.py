"""The judge of a run lives in judges.JudgeRun now (#26.2); judges 0020 copies it there before
this runs (its run_before), so nothing is lost when the column goes (on SQLite, dropping a
column rebuilds the table without it)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0022_judge_run_check_moved")]

    operations = [migrations.RemoveField(model_name="run", name="judge")]
