from django.contrib import admin

from apps.datasets.admin import FrozenOnceUsedAdmin
from apps.runs.models import (
    AttemptLog,
    Endpoint,
    PromptTemplate,
    Response,
    Run,
    WorkerCheck,
)


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "model",
        "base_url",
        "concurrency_limit",
        "rpm_limit",
        "tpm_limit",
        "has_secret",
    )
    # The stored key is write-only: it is set on the app's endpoint page, never shown here.
    exclude = ("api_key_secret",)

    @admin.display(boolean=True, description="stored secret set")
    def has_secret(self, obj: Endpoint) -> bool:
        return obj.has_secret


@admin.register(PromptTemplate)
class PromptTemplateAdmin(FrozenOnceUsedAdmin):
    list_display = ("name", "version", "task", "fewshot_k", "created_at")
    list_filter = ("task",)
    raw_id_fields = ("task", "fewshot_dataset", "created_by")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "pk",
        "kind",
        "label",
        "task",
        "status",
        "done",
        "failed",
        "total",
        "created_at",
    )
    list_filter = ("kind", "status", "task")
    raw_id_fields = ("task", "dataset", "endpoint", "template", "source_run", "created_by")
    # Status and counters belong to the engine; change them through the run page's actions.
    readonly_fields = (
        "status",
        "done",
        "failed",
        "total",
        "heartbeat_at",
        "started_at",
        "finished_at",
    )


@admin.register(Response)
class ResponseAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "status", "error_kind", "latency_ms")
    list_filter = ("status", "error_kind")
    raw_id_fields = ("run", "item")
    show_full_result_count = False


@admin.register(AttemptLog)
class AttemptLogAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "round", "attempt", "ok", "error_kind", "created_at")
    list_filter = ("ok", "error_kind")
    raw_id_fields = ("run", "item")
    show_full_result_count = False


@admin.register(WorkerCheck)
class WorkerCheckAdmin(admin.ModelAdmin):
    list_display = ("requested_at", "requested_by", "completed_at", "worker")
