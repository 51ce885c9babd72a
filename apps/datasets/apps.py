from django.apps import AppConfig
from django.db.models.signals import post_migrate


class DatasetsConfig(AppConfig):
    name = "apps.datasets"
    label = "datasets"

    def ready(self) -> None:
        from apps.datasets import fulltext
        from apps.datasets.models import Item

        fulltext.register(Item, "search_text")
        # After every migrate, once all apps' tables exist (runs registers its responses).
        post_migrate.connect(fulltext.ensure_indexes, sender=self, dispatch_uid="fulltext")
