from django.contrib import admin

from apps.review.models import BlindEntry, ReviewAssignment, ReviewLock


@admin.register(ReviewLock)
class ReviewLockAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "user", "expires_at")
    raw_id_fields = ("run", "item", "user")


@admin.register(ReviewAssignment)
class ReviewAssignmentAdmin(admin.ModelAdmin):
    list_display = ("run", "item", "user")
    raw_id_fields = ("run", "item", "user")


@admin.register(BlindEntry)
class BlindEntryAdmin(admin.ModelAdmin):
    list_display = ("score", "user")
    raw_id_fields = ("score", "user")
