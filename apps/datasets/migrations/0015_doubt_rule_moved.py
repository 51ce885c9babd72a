"""Task's rule for "needs a person" lives in judges.TaskJudging now (#26.2); judges 0021 copies
it there before this runs (its run_before)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("datasets", "0014_board_settings_moved")]

    operations = [
        migrations.RemoveField(model_name="task", name="doubt_spread"),
        migrations.RemoveField(model_name="task", name="doubt_repaired"),
        migrations.RemoveField(model_name="task", name="doubt_confidence"),
    ]
