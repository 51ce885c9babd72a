from django.contrib import admin
from django.http import HttpRequest

from apps.datasets.models import Dataset, Item, Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "default_judge", "created_at")
    search_fields = ("slug", "name")
    raw_id_fields = ("default_judge", "default_judge_endpoint", "created_by")


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "task", "status", "row_count", "created_at")
    list_filter = ("status", "format", "task")
    search_fields = ("name",)
    raw_id_fields = ("task", "previous", "created_by")
    # Items are the file's content: they change only through a new upload (a new version).
    readonly_fields = ("columns", "row_count", "tag_counts", "progress")


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("key", "position", "dataset")
    search_fields = ("key",)
    raw_id_fields = ("dataset",)
    list_select_related = ("dataset",)
    show_full_result_count = False  # no COUNT(*) over 100k-item tables on every page

    def has_change_permission(
        self, request: HttpRequest, obj: object = None
    ) -> bool:  # frozen data: see above
        return False
