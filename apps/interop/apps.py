from django.apps import AppConfig


class InteropConfig(AppConfig):
    name = "apps.interop"
    label = "interop"
