"""The launch counter was called "epoch"; "epoch" now means one of K samples per item."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("judges", "0006_no_response_existing_rows"), ("runs", "0004_epoch_is_launch")]

    operations = [
        migrations.RemoveConstraint("retryscope", "retry_scope_once_per_epoch"),
        migrations.RenameField("judgeround", "epoch", "launch"),
        migrations.RenameField("archivedround", "epoch", "launch"),
        migrations.RenameField("retryscope", "epoch", "launch"),
        migrations.RenameField("score", "epoch", "launch"),
        migrations.AddConstraint(
            "retryscope",
            models.UniqueConstraint(fields=["run", "launch"], name="retry_scope_once_per_launch"),
        ),
    ]
