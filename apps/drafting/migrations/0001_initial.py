# Dataset drafting in its own app, after runs (#26.1). Generator, DraftUnit and DraftItem move
# here from runs with their tables (state only: db_table keeps the runs_ names); the link from a
# dataset generation run to its generator, Run.generator, becomes a row of this app's,
# DraftSetup, so that runs never names drafting.

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True
    # Run.generator's values are copied here before runs drops the column.
    run_before = [('runs', '0017_drafting_moves_out')]

    dependencies = [
        ('datasets', '0012_item_conversation'),
        ('runs', '0014_response_cache_and_budget'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='DraftUnit',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('index', models.PositiveIntegerField()),
                        ('status', models.CharField(choices=[('ok', 'OK'), ('failed', 'Failed')], max_length=8)),
                        ('content', models.TextField(blank=True)),
                        ('seed', models.IntegerField(blank=True, null=True)),
                        ('error_kind', models.CharField(blank=True, choices=[('api_error', 'API error'), ('timeout', 'Timeout'), ('unparseable', 'Unparseable reply'), ('missing_subject', 'Missing subject'), ('out_of_range', 'Out of range'), ('template', 'Template error'), ('internal', 'Internal error'), ('no_response', 'No response: generation failed')], max_length=32)),
                        ('error', models.TextField(blank=True)),
                        ('prompt_tokens', models.PositiveIntegerField(default=0)),
                        ('completion_tokens', models.PositiveIntegerField(default=0)),
                        ('cost', models.FloatField(default=0.0)),
                        ('launch', models.PositiveIntegerField(default=0)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='draft_units', to='runs.run')),
                    ],
                    options={
                        'db_table': 'runs_draftunit',
                        'ordering': ['run', 'index'],
                    },
                ),
                migrations.CreateModel(
                    name='Generator',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, validators=[django.core.validators.RegexValidator('^[a-z0-9]+(?:-[a-z0-9]+)*$', 'Use lowercase letters, digits and single dashes (for example support-qa).')])),
                        ('version', models.PositiveIntegerField(default=1)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('system_message', models.TextField(blank=True)),
                        ('content_prompt', models.TextField()),
                        ('questions_prompt', models.TextField()),
                        ('answers_prompt', models.TextField()),
                        ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('task', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='generators', to='datasets.task')),
                    ],
                    options={
                        'db_table': 'runs_generator',
                        'ordering': ['task', 'name', '-version'],
                    },
                ),
                migrations.CreateModel(
                    name='DraftItem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('number', models.PositiveIntegerField()),
                        ('content', models.TextField()),
                        ('question', models.TextField()),
                        ('reference', models.TextField(blank=True)),
                        ('generated', models.JSONField(default=dict)),
                        ('decision', models.CharField(choices=[('pending', 'To review'), ('approved', 'Approved'), ('edited', 'Edited'), ('rejected', 'Rejected')], default='pending', max_length=16)),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='draft_items', to='datasets.dataset')),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('item', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='draft_item', to='datasets.item')),
                        ('unit', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='drafting.draftunit')),
                        ('generator', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='draft_items', to='drafting.generator')),
                    ],
                    options={
                        'db_table': 'runs_draftitem',
                        'ordering': ['dataset', 'unit__index', 'number'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='draftunit',
                    constraint=models.UniqueConstraint(fields=('run', 'index'), name='draft_unit_once'),
                ),
                migrations.AddConstraint(
                    model_name='generator',
                    constraint=models.UniqueConstraint(fields=('task', 'name', 'version'), name='generator_unique_version'),
                ),
                migrations.AddIndex(
                    model_name='draftitem',
                    index=models.Index(fields=['dataset', 'decision'], name='runs_drafti_dataset_0d105a_idx'),
                ),
                migrations.AddConstraint(
                    model_name='draftitem',
                    constraint=models.UniqueConstraint(fields=('unit', 'number'), name='draft_item_once'),
                ),
            ],
            database_operations=[],
        ),
        migrations.CreateModel(
            name='DraftSetup',
            fields=[
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='draft_setup', serialize=False, to='runs.run')),
                ('generator', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='drafting.generator')),
            ],
        ),
        migrations.RunSQL(
            "INSERT INTO drafting_draftsetup (run_id, generator_id)"
            " SELECT id, generator_id FROM runs_run WHERE generator_id IS NOT NULL",
            reverse_sql="UPDATE runs_run SET generator_id = (SELECT generator_id"
            " FROM drafting_draftsetup WHERE drafting_draftsetup.run_id = runs_run.id)"
            " WHERE id IN (SELECT run_id FROM drafting_draftsetup)",
        ),
    ]
