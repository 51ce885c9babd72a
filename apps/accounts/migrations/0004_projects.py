"""Projects (#32.2): every user becomes a member of one default project with the role they
had (datasets 0016 puts every existing task in it), so an existing install sees what it saw."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def default_project_with_everyone(apps, schema_editor):
    Project = apps.get_model("accounts", "Project")
    Membership = apps.get_model("accounts", "Membership")
    User = apps.get_model("accounts", "User")
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default project"})
    Membership.objects.bulk_create(
        [Membership(project=project, user_id=pk, role=role) for pk, role in User.objects.values_list("pk", "role")]
    )


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_text_view'),
    ]

    operations = [
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('admin', 'Admin'), ('reviewer', 'Reviewer'), ('viewer', 'Viewer')], default='viewer', max_length=16)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['project__slug', 'user__username'],
            },
        ),
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('members', models.ManyToManyField(related_name='projects', through='accounts.Membership', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.AddField(
            model_name='membership',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='accounts.project'),
        ),
        migrations.AddConstraint(
            model_name='membership',
            constraint=models.UniqueConstraint(fields=('project', 'user'), name='one_membership_per_user'),
        ),
        migrations.RunPython(default_project_with_everyone, migrations.RunPython.noop),
    ]
