from django.contrib import admin
from django.http import HttpRequest

from apps.datasets.admin import FrozenOnceUsedAdmin
from apps.judges.models import (
    ArchivedRound,
    Judge,
    JudgeRound,
    JudgeRun,
    Score,
    ScoreEvent,
    TaskJudging,
)


@admin.register(Judge)
class JudgeAdmin(FrozenOnceUsedAdmin):
    list_display = ("name", "version", "task", "kind", "n_iter", "aggregation", "created_at")
    list_filter = ("kind", "task")
    search_fields = ("name",)


@admin.register(TaskJudging)
class TaskJudgingAdmin(admin.ModelAdmin):
    list_display = ("task", "default_judge", "default_judge_endpoint")
    raw_id_fields = ("task", "default_judge", "default_judge_endpoint")


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ("run", "judge")
    raw_id_fields = ("run", "judge")


@admin.register(JudgeRound)
class JudgeRoundAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "round", "status", "error_kind", "created_at")
    list_filter = ("status", "error_kind")
    raw_id_fields = ("run", "item")


class ScoreEventInline(admin.TabularInline):
    model = ScoreEvent
    extra = 0
    can_delete = False
    readonly_fields = ("kind", "old_value", "new_value", "reason", "user", "created_at")

    def has_add_permission(
        self, request: HttpRequest, obj: object = None
    ) -> bool:  # history is written by the app only
        return False


@admin.register(Score)
class ScoreAdmin(admin.ModelAdmin):
    list_display = (
        "run",
        "item",
        "subject",
        "status",
        "judge_value",
        "final_value",
        "override_value",
    )
    list_filter = ("status", "subject")
    raw_id_fields = ("run", "item", "override_by", "confirmed_by")
    # Human changes go through Score.override/confirm/revert so that history is kept.
    readonly_fields = (
        "judge_value",
        "final_value",
        "override_value",
        "override_reason",
        "override_by",
        "override_at",
        "confirmed_by",
        "confirmed_at",
        "revision",
    )
    inlines = [ScoreEventInline]


@admin.register(ArchivedRound)
class ArchivedRoundAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "round", "status", "archived_at")
    raw_id_fields = ("run", "item")
