"""`manage.py send_notifications`: attempt every delivery that is due now, here.

Workers deliver by themselves (each failed attempt schedules the next with RQ's scheduler);
this is for a Redis that lost its scheduled jobs, or a cron line as a safety net.
"""

from typing import Any

from django.core.management.base import BaseCommand

from apps.notifications.jobs import deliver_due


class Command(BaseCommand):
    help = "Attempt every notification delivery that is due now."

    def handle(self, *args: Any, **options: Any) -> None:
        went = deliver_due()
        delivered = sum(line == "delivered" for line in went)
        self.stdout.write(f"{len(went)} due, {delivered} delivered.")
