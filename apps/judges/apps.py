from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "apps.judges"
    label = "judges"

    def ready(self) -> None:
        from apps.datasets.signals import dataset_imported
        from apps.judges import auto
        from apps.runs.signals import run_finished

        # Evaluate everything: the task's default judge judges each new response set.
        run_finished.connect(auto.on_run_finished, dispatch_uid="judges-auto-run")
        dataset_imported.connect(auto.on_dataset_imported, dispatch_uid="judges-auto-dataset")
