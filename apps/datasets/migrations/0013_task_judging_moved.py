"""Task's default judge and endpoint live in judges.TaskJudging now (#26.2); judges 0019 copies
them there before this runs (its run_before), so nothing is lost when the columns go."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("datasets", "0012_item_conversation")]

    operations = [
        migrations.RemoveField(model_name="task", name="default_judge"),
        migrations.RemoveField(model_name="task", name="default_judge_endpoint"),
    ]
