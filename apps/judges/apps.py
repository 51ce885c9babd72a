from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "apps.judges"
    label = "judges"

    def ready(self) -> None:
        # The judge run kind registers itself with the runs engine on import.
        from apps.judges import kind  # noqa: F401
