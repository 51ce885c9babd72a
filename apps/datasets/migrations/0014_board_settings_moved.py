"""Task's agreement threshold lives in leaderboards.BoardSettings now (#26.2); leaderboards 0003
copies it there before this runs (its run_before)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("datasets", "0013_task_judging_moved")]

    operations = [migrations.RemoveField(model_name="task", name="alignment_threshold")]
