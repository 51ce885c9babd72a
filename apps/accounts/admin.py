from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.accounts.models import ApiToken, Membership, Project, SsoIdentity, User


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    list_display = ("username", "email", "role", "is_staff", "is_active")
    list_filter = ("role", "is_staff", "is_active")
    search_fields = ("username", "email")
    fieldsets = (*(BaseUserAdmin.fieldsets or ()), ("evalsite", {"fields": ("role",)}))
    add_fieldsets = (*(BaseUserAdmin.add_fieldsets or ()), ("evalsite", {"fields": ("role",)}))


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Every user's tokens, for an admin to see and revoke; never the hash, and none made here
    (a token is shown once, to its user, on the account page)."""

    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "user__username", "prefix")
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset.filter(revoked_at=None):
            token.revoke()


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """Projects and their members: who sees which tasks, with which role there."""

    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Who each single sign-on user is at the identity provider and what their groups were at
    their last sign-in; made and kept up to date by sign-ins, not by hand."""

    list_display = ("user", "subject", "issuer", "groups", "last_sign_in", "deactivated_by_groups")
    search_fields = ("user__username", "subject")
    readonly_fields = (
        "user",
        "issuer",
        "subject",
        "groups",
        "last_sign_in",
        "deactivated_by_groups",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
