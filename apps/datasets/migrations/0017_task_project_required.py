"""Every task has a project now (0016 filled the column); a migration of its own, because
PostgreSQL refuses to alter a table with the updates' deferred checks pending in one transaction."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("datasets", "0016_task_project")]

    operations = [
        migrations.AlterField(
            model_name="task",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tasks",
                to="accounts.project",
            ),
        ),
    ]
