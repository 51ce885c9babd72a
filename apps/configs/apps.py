from django.apps import AppConfig


class ConfigsConfig(AppConfig):
    name = "apps.configs"
    label = "configs"
