"""The launch counter was called "epoch"; "epoch" now means one of K samples per item."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_error_kind_no_response")]

    operations = [
        migrations.RenameField("run", "epoch", "launch"),
        migrations.RenameField("response", "epoch", "launch"),
    ]
