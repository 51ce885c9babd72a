# Dataset drafting moved to its own app, after runs in the flow (apps.drafting). Its tables keep
# their names, so the models leave this app's state only. Run.generator's values went to
# drafting.DraftSetup first (drafting's 0001 runs before this one), then the column goes.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_response_schema"),
    ]

    operations = [
        migrations.RemoveField(model_name="run", name="generator"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="DraftItem"),
                migrations.DeleteModel(name="DraftUnit"),
                migrations.DeleteModel(name="Generator"),
            ],
            database_operations=[],
        ),
    ]
