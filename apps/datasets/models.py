import hashlib
import json
from collections.abc import Iterable
from typing import Any, Self

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models, transaction
from django.urls import reverse

from apps.accounts.models import Project
from apps.datasets.conversations import conversation_text

slug_validator = RegexValidator(
    r"^[a-z0-9]+(?:-[a-z0-9]+)*$",
    "Use lowercase letters, digits and single dashes (for example support-qa).",
)


class TaskQuerySet(models.QuerySet["Task"]):
    def for_user(self, user: Any, role: str = "viewer") -> "TaskQuerySet":
        """The tasks of the projects `user` may see (or act in with at least `role`)."""
        if getattr(user, "is_admin", False) and user.is_active:
            return self
        return self.filter(project__in=Project.objects.for_user(user, role))


class Task(models.Model):
    """An evaluation project: owns datasets, runs, judges and a leaderboard."""

    slug = models.CharField(max_length=64, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The column mapping of the last upload, and under "column_roles" what each column name
    # was in every upload so far ({name: [roles]}, [] for a column kept but not used): the
    # next upload's suggestion reads it per name (`apps.datasets.importing.suggest_mapping`).
    last_mapping = models.JSONField(default=dict, blank=True)
    # "Evaluate every model on new data" (Dynabench): each dataset (or version) that becomes
    # ready here gets a generation run per (endpoint, template) pair with a finished run.
    evaluate_new_data = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Who may see the task and everything under it: the project's members (accounts.Project).
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="tasks")

    objects = TaskQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A task made with no project named (a script, a task file of a one-project install)
        # goes to the default project.
        if self.project_id is None:
            self.project = Project.default()
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("datasets:task-detail", args=[self.slug])

    def remember_mapping(self, mapping: dict[str, Any], columns: list[str]) -> None:
        """Remember what each of `columns` was in this upload, for the task's next ones."""
        roles = self.remembered_roles()
        roles.update(mapping_roles(mapping, columns))
        self.last_mapping = {**mapping, "column_roles": roles}
        self.save(update_fields=["last_mapping"])

    def remembered_roles(self) -> dict[str, list[str]]:
        """{column name: its roles in the task's uploads so far} (the latest upload wins)."""
        stored = self.last_mapping.get("column_roles")
        if isinstance(stored, dict):
            return {str(name): list(roles) for name, roles in stored.items()}
        # Remembered before per-name memory: only the last mapping's named columns are known.
        return {
            name: roles for name, roles in mapping_roles(self.last_mapping, []).items() if roles
        }


class Frozen(Exception):
    """Raised when something would change what a run has used: a dataset's items, or a prompt
    template or judge version in place. Those change only by a new version."""


class Versioned(models.Model):
    """A named thing of a task that is never edited in place: an edit is saved as the next
    version, and whatever used an earlier version (a run) keeps pointing at it exactly.
    Prompt templates and judges are versioned so; the concrete model has `task`."""

    # The reverse name of what points at a version from a run: Run's foreign key (templates),
    # or a later app's row of the run (judges' JudgeRun).
    USED_BY = "runs"

    name = models.CharField(max_length=100, validators=[slug_validator])
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    task_id: int

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding and self.is_used:
            raise Frozen(
                f"{self} is used by a run, so it is kept as it is. Save your changes as a new "
                "version instead."
            )
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        if self.is_used:
            raise Frozen(f"{self} is used by a run, so it is kept.")
        return super().delete(*args, **kwargs)

    def versions(self) -> models.QuerySet[Any]:
        # `task` is each subclass's own foreign key (its related_name differs).
        return type(self)._default_manager.filter(**{"task_id": self.task_id, "name": self.name})

    def is_latest(self) -> bool:
        return not self.versions().filter(version__gt=self.version).exists()

    @property
    def is_used(self) -> bool:
        """A run points at this version: it is kept exactly as that run used it."""
        if self.pk is None:
            return False
        used = {f"{self.USED_BY}__isnull": False}
        return type(self)._default_manager.filter(pk=self.pk, **used).exists()

    def save_as_new_version(self, user: Any) -> Self:
        """Store this (edited, unsaved) copy as the next version; earlier versions never change."""
        with transaction.atomic():
            # Lock the name's rows so two editors cannot both take the same version number.
            previous = list(
                type(self)
                ._default_manager.select_for_update()
                .filter(task_id=self.task_id, name=self.name)
                .order_by("-version")
                .values_list("pk", "version")[:1]
            )
            self.pk = None
            self._state.adding = True
            self.version = previous[0][1] + 1 if previous else 1
            self.created_by = user if getattr(user, "pk", None) else None
            self.save()
            self.after_new_version(previous[0][0] if previous else None)
        return self

    def after_new_version(self, previous_pk: int | None) -> None:
        """Called inside the saving transaction, with the replaced latest version's pk."""


class DatasetQuerySet(models.QuerySet["Dataset"]):
    def ready(self) -> "DatasetQuerySet":
        """Datasets a run may use: imported (or generated and published), never a draft."""
        return self.filter(status=Dataset.Status.READY)

    def drafts(self) -> "DatasetQuerySet":
        return self.filter(status=Dataset.Status.DRAFT)

    def latest_version(self, task: Task, name: str) -> "Dataset | None":
        return self.filter(task=task, name=name).order_by("-version").first()

    def new_version(self, task: Task, name: str, **fields: Any) -> "Dataset":
        """Create `name` in `task`: version 1, or the next version linked to the latest one.

        The caller holds a transaction; the unique (task, name, version) constraint turns a
        race between two uploads of the same name into an IntegrityError, not two v2s.
        """
        latest = self.latest_version(task, name)
        # A failed import or an unpublished (or discarded) draft has no items to correct: link
        # to the latest one that has.
        previous = (
            self.filter(task=task, name=name)
            .exclude(
                status__in=[Dataset.Status.FAILED, Dataset.Status.DRAFT, Dataset.Status.DISCARDED]
            )
            .order_by("-version")
            .first()
        )
        return self.create(
            task=task,
            name=name,
            version=latest.version + 1 if latest else 1,
            previous=previous,
            **fields,
        )


class Dataset(models.Model):
    """One uploaded file turned into items. Frozen once a run uses it."""

    # What later apps started when this dataset became ready, one line each ("Generation run
    # #12 …"), as `dataset_imported`'s receivers answered in this process: not stored, so
    # the upload that made it can say so (#28.6).
    announced: tuple[str, ...] = ()

    class Status(models.TextChoices):
        IMPORTING = "importing", "Importing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"
        # Generated by a model (apps.drafting.drafts): its items wait for a person's review and
        # no run may use it until it is published (then READY, with the kept items only).
        DRAFT = "draft", "Draft"
        # A draft nobody wants (apps.drafting.drafts.discard): never used by a run, kept for its
        # generation run's cost and its people's decisions (the generator's rates count them).
        DISCARDED = "discarded", "Discarded"

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        JSON = "json", "JSON"
        JSONL = "jsonl", "JSONL"
        XLSX = "xlsx", "Excel"
        PARQUET = "parquet", "Parquet"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    previous = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="next_versions"
    )
    file_name = models.CharField(max_length=255, blank=True)
    format = models.CharField(max_length=8, choices=Format.choices)
    # The worksheet read from an Excel workbook (empty for other formats); a corrected
    # workbook uploaded as the next version is read from the same sheet by default.
    sheet = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IMPORTING)
    error = models.TextField(blank=True)
    progress = models.PositiveIntegerField(default=0)  # rows written (live progress is in Redis)
    columns = models.JSONField(default=list)  # every column of the file, in order
    # {"id_column": str|None, "input_columns": [...], "reference_column": str|None,
    #  "tags_column": str|None, "response_columns": [...]}
    mapping = models.JSONField(default=dict)
    row_count = models.PositiveIntegerField(default=0)
    tag_counts = models.JSONField(default=dict)
    # The staged upload a background import reads; emptied once the import has finished.
    upload_path = models.CharField(max_length=500, blank=True)
    # sha256 of the mapping and every item (key, fields, reference, tags): a version with the
    # fingerprint of an earlier one is the same data uploaded again (`unchanged_from`).
    fingerprint = models.CharField(max_length=64, blank=True)
    # A perturbed copy (apps/datasets/perturb.py): its original, how it was perturbed, the seed.
    perturbed_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="perturbed_copies"
    )
    perturbation = models.CharField(max_length=32, blank=True)
    perturbation_seed = models.IntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = DatasetQuerySet.as_manager()

    class Meta:
        ordering = ["task", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "name", "version"], name="dataset_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def get_absolute_url(self) -> str:
        return reverse("datasets:dataset-detail", args=[self.pk])

    @property
    def is_frozen(self) -> bool:
        """Items of a dataset never change once a run has used it."""
        return self.runs.exists()

    @property
    def is_importing(self) -> bool:
        return self.status == self.Status.IMPORTING

    @property
    def is_draft(self) -> bool:
        return self.status == self.Status.DRAFT

    @property
    def draft_state(self) -> str:
        """What became of a generated draft, in words: "published" once it is ready."""
        if self.status == self.Status.READY:
            return "published"
        return self.get_status_display().lower()

    @property
    def id_column(self) -> str | None:
        return self.mapping.get("id_column") or None

    @property
    def tags_column(self) -> str | None:
        return self.mapping.get("tags_column") or None

    @property
    def conversation_column(self) -> str | None:
        """The column whose cells are conversations (`Item.conversation` holds them read)."""
        return self.mapping.get("conversation_column") or None

    def column_roles(self) -> list[tuple[str, list[str]]]:
        """Each column with what the mapping made of it (id, input, reference, tags, response)."""
        roles = mapping_roles(self.mapping, self.columns)
        return [(column, roles[column]) for column in self.columns]

    def compute_fingerprint(self) -> str:
        """The fingerprint of the stored items (see `fingerprint_of`)."""
        rows = (
            self.items.order_by("position")
            .values_list("key", "fields", "reference", "tags")
            .iterator(chunk_size=5000)
        )
        return fingerprint_of(self.mapping, rows)

    def ensure_fingerprint(self) -> str:
        """The stored fingerprint, computed once for a ready dataset that has none (made before
        fingerprints, or by a loader that did not set it)."""
        if not self.fingerprint and self.status == self.Status.READY:
            self.fingerprint = self.compute_fingerprint()
            Dataset.objects.filter(pk=self.pk).update(fingerprint=self.fingerprint)
        return self.fingerprint

    def unchanged_from(self) -> "Dataset | None":
        """An earlier ready version of this name with the same mapping and items: this one is
        that data uploaded again, and nothing new should start for it."""
        if self.status != self.Status.READY:
            return None
        mine = self.ensure_fingerprint()
        earlier = Dataset.objects.ready().filter(
            task_id=self.task_id, name=self.name, version__lt=self.version
        )
        for other in earlier.order_by("-version"):
            if other.ensure_fingerprint() == mine:
                return other
        return None

    def sorted_tag_counts(self) -> list[tuple[str, int]]:
        return sorted(self.tag_counts.items(), key=lambda pair: (-pair[1], pair[0]))

    def mark_failed(self, message: str) -> None:
        """A failed import keeps its row (so the page can say why) but never any items."""
        self.status = self.Status.FAILED
        self.error = message
        self.progress = 0
        self.upload_path = ""
        self.save(update_fields=["status", "error", "progress", "upload_path"])

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        if self.is_frozen:
            raise Frozen(
                f"{self} is used by a run, so it is kept as it is. Upload a corrected file "
                "to make a new version instead."
            )
        return super().delete(*args, **kwargs)

    @property
    def response_columns(self) -> list[str]:
        return list(self.mapping.get("response_columns") or [])

    @property
    def response_sources(self) -> list[tuple[str, str]]:
        """(column, its reference "column:<dataset>:<column>"): how a judge run is pointed at
        answers that came with the file (the judges' start form reads the same reference)."""
        return [(column, f"column:{self.pk}:{column}") for column in self.response_columns]

    @property
    def hidden_columns(self) -> set[str]:
        """Columns that are not an item's inputs: its answers, reference and tags."""
        hidden = {*self.response_columns, self.reference_column, self.tags_column}
        return {column for column in hidden if column}

    @property
    def reference_column(self) -> str | None:
        return self.mapping.get("reference_column") or None

    @property
    def input_columns(self) -> list[str]:
        return list(self.mapping.get("input_columns") or [])


def mapping_roles(mapping: dict[str, Any], columns: list[str]) -> dict[str, list[str]]:
    """{column: what `mapping` made of it} for every column of the file and every column the
    mapping names; [] for a column that is kept but has no role."""
    by_role: dict[str, list[Any]] = {
        "id": [mapping.get("id_column")],
        "input": list(mapping.get("input_columns") or []),
        "reference": [mapping.get("reference_column")],
        "tags": [mapping.get("tags_column")],
        "response": list(mapping.get("response_columns") or []),
        "conversation": [mapping.get("conversation_column")],
    }
    named = [name for names in by_role.values() for name in names if name]
    return {
        column: [role for role, names in by_role.items() if column in names]
        for column in dict.fromkeys([*columns, *named])
    }


def fingerprint_of(mapping: dict[str, Any], rows: Iterable[tuple[str, Any, str, Any]]) -> str:
    """sha256 over the mapping and each item's (key, fields, reference, tags) in position
    order. Fields are written with sorted keys: PostgreSQL's jsonb does not keep a file's key
    order, and the same data must give the same fingerprint on both databases."""
    fingerprint = Fingerprint(mapping)
    fingerprint.update(rows)
    return fingerprint.hexdigest()


# A text longer than this (characters) is fed to the fingerprint in slices of this size.
FINGERPRINT_PIECE = 1024 * 1024


def _longest(fields: dict[str, Any]) -> int:
    return max((len(v) for v in fields.values() if isinstance(v, str)), default=0)


class Fingerprint:
    """`fingerprint_of`, fed a batch of items at a time (a streamed import)."""

    def __init__(self, mapping: dict[str, Any]) -> None:
        self.digest = hashlib.sha256()
        self.digest.update(json.dumps(mapping, sort_keys=True, ensure_ascii=False).encode())
        self.dump = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode

    def update(self, rows: Iterable[tuple[str, Any, str, Any]]) -> None:
        for key, fields, reference, tags in rows:
            self.digest.update(b"\x1e")
            if isinstance(fields, dict) and _longest(fields) > FINGERPRINT_PIECE:
                self._update_long(key, fields, reference, tags)
            else:
                self.digest.update(self.dump([key, fields, reference, tags]).encode())

    def _update_long(self, key: str, fields: dict[str, Any], reference: str, tags: Any) -> None:
        """The bytes `dump([key, fields, reference, tags]).encode()` would give, fed to the digest
        a piece at a time: a long text is escaped a slice at a time (JSON escapes each character
        alone), so a 50 MB cell is not copied twice more here."""
        dump, update = self.dump, self.digest.update
        update(f"[{dump(key)}, {{".encode())
        for n, name in enumerate(sorted(fields)):
            update(f"{', ' if n else ''}{dump(name)}: ".encode())
            value = fields[name]
            if isinstance(value, str) and len(value) > FINGERPRINT_PIECE:
                update(b'"')
                for at in range(0, len(value), FINGERPRINT_PIECE):
                    update(dump(value[at : at + FINGERPRINT_PIECE])[1:-1].encode())
                update(b'"')
            else:
                update(dump(value).encode())
        update(f"}}, {dump(reference)}, {dump(tags)}]".encode())

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


def tags_text(tags: list[str]) -> str:
    """Tags as "|a|b|", so a tag filter is one LIKE '%|a|%' that never matches part of a tag."""
    return "|" + "|".join(tag.replace("|", "/") for tag in tags) + "|" if tags else ""


class ItemQuerySet(models.QuerySet["Item"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Items of a dataset a run used are its results' ground: never deleted (the admin's
        bulk delete comes here too)."""
        used = Dataset.objects.filter(pk__in=self.values("dataset_id"), runs__isnull=False)
        if frozen := used.first():
            raise Frozen(f"Items of {frozen} are used by a run, so they are kept.")
        return super().delete()

    def search(self, text: str) -> Self:
        text = text.strip().lower()
        return self.filter(search_text__contains=text) if text else self

    def tagged(self, tag: str) -> Self:
        return self.filter(tags_text__contains=tags_text([tag])) if tag else self

    def page_after(self, position: int | None, size: int) -> list["Item"]:
        """Keyset paging on the (dataset, position) index: as fast on page 2000 as on page 1.

        Returns up to size + 1 items; the extra one only says that a next page exists.
        """
        items = self.order_by("position")
        if position is not None:
            items = items.filter(position__gt=position)
        return list(items[: size + 1])

    def page_before(self, position: int, size: int) -> list["Item"]:
        """The page that ends just before `position`, in position order (size + 1 as above)."""
        items = self.filter(position__lt=position).order_by("-position")[: size + 1]
        return list(reversed(list(items)))


class Item(models.Model):
    """One row of a dataset: every field as JSON, plus what the mapping picked out."""

    # No index of its own: the unique (dataset, position) and (dataset, key) indexes start
    # with it and serve every lookup by dataset; one index fewer to fill on a 100k import.
    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    position = models.PositiveIntegerField()  # 0-based row position in the file
    key = models.CharField(max_length=255)  # the id column, else the position
    fields = models.JSONField(default=dict)
    reference = models.TextField(blank=True)
    tags = models.JSONField(default=list)
    # Denormalised for fast filtering at 100k+ items on SQLite and PostgreSQL alike.
    tags_text = models.TextField(blank=True)  # "|tag1|tag2|"
    search_text = models.TextField(blank=True)  # lowercased values of all fields
    # The mapped conversation column's cell, checked and in the canonical shape (a list of
    # OpenAI chat messages; apps/datasets/conversations.py); [] when none is mapped.
    conversation = models.JSONField(default=list, blank=True)
    # One reference answer per user turn of the conversation (MT-Bench's `reference`), when
    # the reference column holds such a list; "" for a turn without one.
    turn_references = models.JSONField(default=list, blank=True)

    objects = ItemQuerySet.as_manager()

    class Meta:
        ordering = ["dataset", "position"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="item_unique_key"),
            models.UniqueConstraint(fields=["dataset", "position"], name="item_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}:{self.key}"

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        if self.dataset.is_frozen:
            raise Frozen(f"Items of {self.dataset} are used by a run, so they are kept.")
        return super().delete(*args, **kwargs)

    @property
    def row(self) -> int:
        """The item's row as people count it (from 1, as upload errors name rows)."""
        return self.position + 1

    def field(self, name: str, default: Any = "") -> Any:
        return self.fields.get(name, default)

    @property
    def is_conversation(self) -> bool:
        return bool(self.conversation)

    def messages(self) -> list[dict[str, Any]]:
        """The item's conversation: canonical chat messages (role, content, tool_calls,
        tool_call_id, name), a copy the caller may extend (turn-by-turn generation does)."""
        return [dict(message) for message in self.conversation]

    def user_turns(self) -> list[str]:
        """The text of each user message, in order: what a multi-turn run asks."""
        return [m["content"] for m in self.conversation if m.get("role") == "user"]

    def conversation_text(self) -> str:
        """The conversation as pages and prompts write it (`conversations.conversation_text`)."""
        return conversation_text(self.conversation)
