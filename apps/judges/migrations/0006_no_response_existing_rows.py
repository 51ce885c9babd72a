"""Items judged before `no_response` existed were "internal" errors with a message that says
the generation run's response failed or is missing: give them the kind they have now, so the
failed-items page and "retry failed" treat them alike. The message itself is unchanged."""

from django.db import migrations
from django.db.models import Q

# How JudgePlugin._texts (apps/judges/judging.py) words the two cases (a column without a value stays internal).
NO_RESPONSE = Q(error__startswith="Nothing to judge: the response of run #") | Q(
    error__startswith="Nothing to judge: run #"
)


def forwards(apps, schema_editor):
    for name in ("Score", "JudgeRound", "ArchivedRound"):
        model = apps.get_model("judges", name)
        model.objects.filter(NO_RESPONSE, error_kind="internal").update(error_kind="no_response")


def backwards(apps, schema_editor):
    for name in ("Score", "JudgeRound", "ArchivedRound"):
        model = apps.get_model("judges", name)
        model.objects.filter(error_kind="no_response").update(error_kind="internal")


class Migration(migrations.Migration):
    dependencies = [("judges", "0005_error_kind_no_response")]

    operations = [migrations.RunPython(forwards, backwards)]
