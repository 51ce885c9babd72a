from django.contrib import admin

from apps.datasets.admin import FrozenOnceUsedAdmin
from apps.drafting.models import DraftItem, Generator


@admin.register(Generator)
class GeneratorAdmin(FrozenOnceUsedAdmin):
    list_display = ("name", "version", "task", "created_at")
    list_filter = ("task",)
    raw_id_fields = ("task", "created_by")


@admin.register(DraftItem)
class DraftItemAdmin(admin.ModelAdmin):
    list_display = ("pk", "dataset", "generator", "decision", "decided_by", "decided_at")
    list_filter = ("decision",)
    raw_id_fields = ("unit", "dataset", "generator", "decided_by", "item")
