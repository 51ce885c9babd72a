"""django.contrib.admin with evalsite's site (apps/accounts/admin_site.py): INSTALLED_APPS
names this config instead of the plain one. Kept apart so that loading it imports nothing
that needs the app registry."""

from django.contrib.admin.apps import AdminConfig


class AdminSiteConfig(AdminConfig):
    default_site = "apps.accounts.admin_site.EvalsiteAdminSite"
