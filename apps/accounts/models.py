import hashlib
import secrets
from dataclasses import dataclass
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


class SignInRefused(Exception):
    """A single sign-on the identity provider vouched for that evalsite still refuses; the
    message is for the person signing in."""


class SsoIdentity(models.Model):
    """A user's account at the identity provider (OIDC): who they are there (issuer + `sub`,
    which never changes, unlike an email address) and what their groups gave them last time.

    The groups claim decides the role at every sign-in: the provider is where people are added
    to and removed from groups, so a removed group takes the role away at the next sign-in.
    """

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="sso_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)
    # True when the groups, not an admin, took this user's access away: then a group given back
    # at the provider gives it back here too; a user an admin deactivated stays deactivated.
    deactivated_by_groups = models.BooleanField(default=False)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"

    @classmethod
    def sign_in(cls, issuer: str, claims: dict, policy: "GroupPolicy") -> User:
        """The user these claims (ID token and userinfo) belong to, made on their first sign-in,
        with the role and projects their groups give now; SignInRefused when they give none."""
        subject = str(claims["sub"])
        groups = claims.get(policy.claim) or []
        groups = [groups] if isinstance(groups, str) else [str(group) for group in groups]
        projects = policy.projects(groups)
        role = policy.role(groups, projects)
        identity = cls.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
        if identity is None:
            if not role:
                raise SignInRefused(_NO_GROUP)
            user = User.objects.create_user(_free_username(claims, subject), role=role)
            identity = cls.objects.create(user=user, issuer=issuer, subject=subject)
        user = identity.user
        identity.groups = groups
        identity.last_sign_in = timezone.now()
        if not role:
            if user.is_active:
                user.is_active = False
                identity.deactivated_by_groups = True
                user.save(update_fields=["is_active"])
            identity.save()
            raise SignInRefused(_NO_GROUP)
        if not user.is_active:
            if not identity.deactivated_by_groups:
                identity.save()
                raise SignInRefused("Your evalsite account is deactivated: ask an admin.")
            user.is_active = True
            identity.deactivated_by_groups = False
        user.role = role
        user.email = str(claims.get("email") or user.email)
        user.first_name = str(claims.get("given_name") or user.first_name)[:150]
        user.last_name = str(claims.get("family_name") or user.last_name)[:150]
        user.save()
        identity.save()
        if policy.project_prefix:
            # The provider's groups are the memberships: one taken away there is gone here.
            found = {p.slug: p for p in Project.objects.filter(slug__in=projects)}
            user.memberships.exclude(project__in=found.values()).delete()
            for slug, project in found.items():
                project.add_member(user, projects[slug] or role)
        else:
            # As `create_user` does: a member of the default project, with the role.
            Project.default().add_member(user, role)
        return user


@dataclass(frozen=True)
class GroupPolicy:
    """What a single sign-on user's groups give (settings OIDC_*_GROUPS, docs/accounts.md).

    `roles`: role -> the groups giving it (the highest wins), else `default` ("": refused).
    With a `project_prefix` ("evalsite:"), a group "evalsite:<project>" makes the user a member
    of that project with their role, "evalsite:<project>:<role>" with that role there; such a
    group alone lets one in, as a reviewer at most (an instance admin sees every project).
    """

    claim: str
    roles: dict[str, list[str]]
    default: str = ""
    project_prefix: str = ""

    def projects(self, groups: list[str]) -> dict[str, str]:
        """{project slug: role there ("" for the user's own role)} from the project groups."""
        found: dict[str, str] = {}
        for group in groups:
            if not self.project_prefix or not group.startswith(self.project_prefix):
                continue
            slug, _, role = group.removeprefix(self.project_prefix).partition(":")
            if slug and (role == "" or role in User.Role.values):
                held = found.get(slug)
                if held is None or (held and (not role or User.RANK[role] > User.RANK[held])):
                    found[slug] = role
        return found

    def role(self, groups: list[str], projects: dict[str, str]) -> str:
        for role in (User.Role.ADMIN, User.Role.REVIEWER, User.Role.VIEWER):
            if set(groups) & set(self.roles.get(role, [])):
                return role
        if projects:
            ranked = [User.RANK[r] for r in projects.values() if r] or [User.RANK[User.Role.VIEWER]]
            if self.default:
                ranked.append(User.RANK[self.default])
            top = min(max(ranked), User.RANK[User.Role.REVIEWER])
            return next(role for role, rank in User.RANK.items() if rank == top)
        return self.default


_NO_GROUP = (
    "Your account at the identity provider is in none of the groups that give access to "
    "evalsite: ask an admin to add you to one."
)


def _free_username(claims: dict, subject: str) -> str:
    """A readable username not taken yet: preferred_username, else the email's local part,
    else the subject; with -2, -3, ... when taken (a local user of that name stays theirs)."""
    base = str(claims.get("preferred_username") or str(claims.get("email") or "").split("@")[0])
    base = "".join(ch for ch in base if ch.isalnum() or ch in "@.+-_")[:140] or subject[:140]
    name, n = base, 1
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name
