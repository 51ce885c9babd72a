from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    name = "apps.leaderboards"
    label = "leaderboards"

    def ready(self) -> None:
        from apps.leaderboards import jobs
        from apps.runs.signals import run_finished

        run_finished.connect(jobs.on_run_finished, dispatch_uid="leaderboards-summary")
