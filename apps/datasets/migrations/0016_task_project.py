"""Tasks belong to a project (#32.2): every existing task goes to the default project, whose
members are every user with the role they had (accounts 0004); 0017 makes the column required."""

import django.db.models.deletion
from django.db import migrations, models


def into_default_project(apps, schema_editor):
    Project = apps.get_model("accounts", "Project")
    Task = apps.get_model("datasets", "Task")
    if Task.objects.filter(project=None).exists():
        project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default project"})
        Task.objects.filter(project=None).update(project=project)


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_projects'),
        ('datasets', '0015_doubt_rule_moved'),
    ]

    operations = [
        migrations.AddField(
            model_name='task',
            name='project',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='tasks', to='accounts.project'),
        ),
        migrations.RunPython(into_default_project, migrations.RunPython.noop),
    ]
