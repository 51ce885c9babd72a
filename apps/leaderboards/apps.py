from django.apps import AppConfig


class LeaderboardsConfig(AppConfig):
    name = "apps.leaderboards"
    label = "leaderboards"
