import gc

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"

    def ready(self) -> None:
        # Run kinds register themselves on import; the engine finds them by Run.kind.
        from apps.runs import generation  # noqa: F401

        # Everything imported so far (Django, the openai SDK, aiohttp…) lives as long as the
        # process. Frozen, the collector stops walking it: a full collection at the start of a
        # chunk took 200 ms of a work horse's time, and forked horses keep sharing the pages.
        gc.freeze()
