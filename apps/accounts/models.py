import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone


class User(AbstractUser):
    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        REVIEWER = "reviewer", "Reviewer"
        VIEWER = "viewer", "Viewer"

    class TextView(models.TextChoices):
        RENDERED = "rendered", "Rendered"
        RAW = "raw", "Raw"
        WHITESPACE = "whitespace", "Raw, whitespace shown"

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    # How this person reads model output on every page (apps/datasets/rendering.py).
    text_view = models.CharField(max_length=16, choices=TextView.choices, default=TextView.RENDERED)

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

    def project_roles(self) -> dict[int, str]:
        """{project id: this user's role there} for the projects they are a member of, each
        capped at their own role (a viewer stays a viewer whatever a membership says), read
        once per user object (a request's user)."""
        cached: dict[int, str] | None = getattr(self, "_project_roles", None)
        if cached is None:
            cached = {}
            if self.pk is not None and self.is_active:
                for project_id, role in Membership.objects.filter(user=self).values_list(
                    "project_id", "role"
                ):
                    cached[project_id] = min(role, self.effective_role, key=self.RANK.__getitem__)
            self._project_roles = cached
        return cached

    def role_in(self, project: "Project | int") -> str | None:
        """This user's role in `project`: admin for an instance admin, the membership's role
        (capped at the user's own) for a member, None for anyone else."""
        if not self.is_active:
            return None
        if self.is_admin:
            return self.Role.ADMIN
        project_id = project if isinstance(project, int) else project.pk
        return self.project_roles().get(project_id)

    def has_role_in(self, project: "Project | int", role: str) -> bool:
        held = self.role_in(project)
        return held is not None and self.RANK[held] >= self.RANK[role]


class ProjectQuerySet(models.QuerySet["Project"]):
    def for_user(self, user: "User | Any", role: str = User.Role.VIEWER) -> "ProjectQuerySet":
        """The projects `user` may see (`role`: may act in with at least that role); an
        instance admin gets every project, an anonymous or inactive user none."""
        if not getattr(user, "is_authenticated", False) or not user.is_active:
            return self.none()
        if user.is_admin:
            return self.all()
        ids = [
            pid for pid, held in user.project_roles().items() if User.RANK[held] >= User.RANK[role]
        ]
        return self.filter(pk__in=ids)


class Project(models.Model):
    """A group's own tasks (with their datasets, runs, judges, reviews and boards) and the
    people who may see them: its members, each with a role there. An instance admin (the
    admin role) sees every project."""

    DEFAULT_SLUG = "default"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    members = models.ManyToManyField(User, through="Membership", related_name="projects")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @classmethod
    def default(cls) -> "Project":
        """The project of an install's tasks before projects existed, and of tasks made with
        none named (made on first use: a fresh install and a flushed test database have none)."""
        project, _ = cls.objects.get_or_create(
            slug=cls.DEFAULT_SLUG, defaults={"name": "Default project"}
        )
        return project

    def add_member(self, user: User, role: str) -> "Membership":
        """Make `user` a member with `role`, or change their role here."""
        membership, _ = Membership.objects.update_or_create(
            project=self, user=user, defaults={"role": role}
        )
        user.__dict__.pop("_project_roles", None)
        return membership


class Membership(models.Model):
    """A user's role in one project: what they may do with its tasks (capped at their own
    role, so that the read-only net for viewers holds everywhere)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=User.Role.choices, default=User.Role.VIEWER)

    class Meta:
        ordering = ["project__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> "ApiTokenQuerySet":
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A secret that lets a script call /api/v1/ as its user, with that user's role.

    Only the SHA-256 of the token is stored. A token is 32 random bytes, so nobody can guess
    it from its hash: a slow password hash (scrypt, PBKDF2) guards low-entropy passwords and
    would add nothing here but a cost on every API call. The role is never copied: each call
    reads the user, so a changed role or a deactivated user holds at once for their tokens.
    """

    PREFIX = "evs_"
    # How long a token's "last used" may lag: one write per minute at most, not one per call.
    LAST_USED_STEP = timedelta(minutes=1)

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The first characters of the token, to tell tokens apart on the page and in logs.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def issue(cls, user: User, name: str) -> tuple["ApiToken", str]:
        """A new token for `user`; the raw token is returned once and never stored."""
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name.strip(), prefix=raw[: len(cls.PREFIX) + 6], digest=cls.hash(raw)
        )
        return token, raw

    @classmethod
    def user_for(cls, raw: str) -> User | None:
        """The active user a presented token belongs to, or None (unknown, revoked, inactive)."""
        if not raw.startswith(cls.PREFIX):
            return None
        token = cls.objects.active().select_related("user").filter(digest=cls.hash(raw)).first()
        if token is None or not token.user.is_active:
            return None
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= cls.LAST_USED_STEP:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
