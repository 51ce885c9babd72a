from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    name = "apps.leaderboards"
    label = "leaderboards"

    def ready(self) -> None:
        from apps.leaderboards import jobs, stopping
        from apps.runs.signals import results_written, run_finished

        run_finished.connect(jobs.on_run_finished, dispatch_uid="leaderboards-summary")
        results_written.connect(stopping.on_results_written, dispatch_uid="leaderboards-stop")
