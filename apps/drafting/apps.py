from django.apps import AppConfig


class DraftingConfig(AppConfig):
    name = "apps.drafting"
    label = "drafting"
