import gc
import threading
from typing import Any

from django.apps import AppConfig
from django.core.signals import request_finished


class RunsConfig(AppConfig):
    name = "apps.runs"
    label = "runs"

    def ready(self) -> None:
        from apps.datasets import fulltext
        from apps.datasets.signals import dataset_imported
        from apps.runs.engine.contract import load_kinds
        from apps.runs.kinds import new_data

        # Evaluate every model on new data (a task option): new datasets get generation runs.
        dataset_imported.connect(new_data.on_dataset_imported, dispatch_uid="runs-new-data")

        # Every kind's plug-in, found through the registry, loaded before the freeze below and
        # before a worker forks work horses: else each horse imported ~200 modules (0.15 s of
        # CPU) for its run's kind, and shared none of them.
        load_kinds()

        from apps.runs.models import Response, Turn

        fulltext.register(Response, "text")  # searched beside the items (#28.5)
        # A multi-turn run's Response holds its last answer only: each turn's is searched too.
        fulltext.register(Turn, "text")

        # Everything imported so far (Django, the openai SDK, aiohttp…) lives as long as the
        # process. Frozen, the collector stops walking it: a full collection at the start of a
        # chunk took 200 ms of a work horse's time, and forked horses keep sharing the pages.
        gc.freeze()
        request_finished.connect(WARM_UP_FREEZER, dispatch_uid="runs-warm-up-freeze")

        # A worker process hands the units of chunks whose worker died to live workers.
        from apps.runs.engine import watchdog

        if watchdog.is_worker_process():
            watchdog.start()


class WarmUpFreezer:
    """Freeze again once a web process has warmed up.

    The first requests build what then lives as long as the process (compiled templates, URL
    resolvers, form classes); left in the collector's care, every full collection walks it
    again, and on a 500-row review page that turned every other request from 50 into 100 ms.
    A collection then a freeze after the 1st, 10th and 100th request costs three collections
    in a process's life; garbage is collected first, so none of it is kept for good.
    """

    def __init__(self, at: tuple[int, ...] = (1, 10, 100)) -> None:
        self.at = set(at)
        self.last = max(at)
        self.seen = 0
        self.lock = threading.Lock()

    def __call__(self, **kwargs: Any) -> None:
        if self.seen >= self.last:
            return
        with self.lock:
            self.seen += 1
            if self.seen not in self.at:
                return
        gc.collect()
        gc.freeze()


WARM_UP_FREEZER = WarmUpFreezer()
