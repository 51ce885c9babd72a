from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "apps.judges"
    label = "judges"
