from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "apps.notifications"
    label = "notifications"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from apps.judges.models import ScoreEvent
        from apps.leaderboards.models import BoardSettings
        from apps.leaderboards.signals import gate_decided
        from apps.notifications import receivers
        from apps.runs.signals import run_finished, run_stopped

        run_finished.connect(receivers.on_run_finished, dispatch_uid="notifications-finished")
        run_stopped.connect(receivers.on_run_stopped, dispatch_uid="notifications-stopped")
        gate_decided.connect(receivers.on_gate_decided, dispatch_uid="notifications-gate")
        post_save.connect(
            receivers.on_score_event, sender=ScoreEvent, dispatch_uid="notifications-reviews"
        )
        post_save.connect(
            receivers.on_board_settings, sender=BoardSettings, dispatch_uid="notifications-board"
        )
