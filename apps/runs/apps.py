from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"

    def ready(self) -> None:
        # Run kinds register themselves on import; the engine finds them by Run.kind.
        from apps.runs import generation  # noqa: F401
