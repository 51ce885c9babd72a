from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.datasets.models import Dataset, Frozen, Item, Task, Versioned


class FrozenOnceUsedAdmin(admin.ModelAdmin):
    """A prompt template or judge version that a run used is shown read-only and kept: the
    run's results mean what that version said (edits in the app save a new version)."""

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if isinstance(obj, Versioned) and obj.is_used:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if isinstance(obj, Versioned) and obj.is_used:
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        try:
            for obj in queryset:
                obj.delete()
        except Frozen as exc:
            self.message_user(request, str(exc), messages.ERROR)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    raw_id_fields = ("created_by",)


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "task", "status", "row_count", "created_at")
    list_filter = ("status", "format", "task")
    search_fields = ("name",)
    raw_id_fields = ("task", "previous", "created_by")
    # Items are the file's content: they change only through a new upload (a new version).
    readonly_fields = ("columns", "row_count", "tag_counts", "progress")

    # Once a run used the dataset, its mapping and rows are what the results stand on.
    def has_change_permission(self, request: HttpRequest, obj: Dataset | None = None) -> bool:
        return (obj is None or not obj.is_frozen) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Dataset | None = None) -> bool:
        return (obj is None or not obj.is_frozen) and super().has_delete_permission(request, obj)


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

    def has_delete_permission(self, request: HttpRequest, obj: Item | None = None) -> bool:
        if obj is not None and obj.dataset.is_frozen:
            return False
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """The bulk delete's confirmation: refused, with the reason, if a run used any of them."""
        ids = [obj.pk for obj in objs]
        frozen = Dataset.objects.filter(items__in=ids, runs__isnull=False).distinct().first()
        if frozen is not None:
            raise PermissionDenied(f"Items of {frozen} are used by a run, so they are kept.")
        return super().get_deleted_objects(objs, request)
