from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        REVIEWER = "reviewer", "Reviewer"
        VIEWER = "viewer", "Viewer"

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    # Roles are ordered: an admin may do what a reviewer may, a reviewer what a viewer may.
    RANK: dict[str, int] = {Role.VIEWER: 0, Role.REVIEWER: 1, Role.ADMIN: 2}

    @property
    def effective_role(self) -> str:
        return self.Role.ADMIN if self.is_superuser else self.role

    def has_role(self, role: str) -> bool:
        return self.is_active and self.RANK[self.effective_role] >= self.RANK[role]

    @property
    def can_edit(self) -> bool:
        return self.has_role(self.Role.REVIEWER)

    @property
    def is_admin(self) -> bool:
        return self.has_role(self.Role.ADMIN)

    # The admin role may do everything, the Django admin included, without
    # per-model permissions to keep in step with the role.
    def has_perm(self, perm: str, obj: models.Model | None = None) -> bool:
        return (self.is_active and self.role == self.Role.ADMIN) or super().has_perm(perm, obj)

    def has_module_perms(self, app_label: str) -> bool:
        return (self.is_active and self.role == self.Role.ADMIN) or super().has_module_perms(
            app_label
        )
