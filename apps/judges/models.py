import math
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from apps.datasets.models import Item, ItemQuerySet, Task, Versioned
from apps.judges.parsing import REPLY_FORMATS
from apps.runs.models import Endpoint, ErrorKind, LLMCall, Response, Run, RunQuerySet


class JudgeQuerySet(models.QuerySet["Judge"]):
    def latest_versions(self) -> "JudgeQuerySet":
        """The newest version of every judge name (one row per task and name)."""
        newer = Judge.objects.filter(
            task=models.OuterRef("task"),
            name=models.OuterRef("name"),
            version__gt=models.OuterRef("version"),
        )
        return self.exclude(models.Exists(newer))


class Judge(Versioned):
    """How responses are scored. Versioned like prompt templates: editing makes a new version."""

    USED_BY = "judge_runs"  # JudgeRun: the judge of a run is judges' row, not Run's column

    class Kind(models.TextChoices):
        RUBRIC = "rubric", "LLM rubric"
        MCQ = "mcq", "Multiple choice (LLM)"
        MCQ_RULE = "mcq_rule", "Multiple choice (rule-based)"
        METRIC = "metric", "Metric (rule-based)"
        PAIRWISE = "pairwise", "Pairwise (LLM)"
        # Scores a choice-scoring run's picks (apps/runs/kinds/choices.py): accuracy of the most
        # likely option and of the most likely per character, against the answer key.
        CHOICE = "choice", "Log-likelihood choices (rule-based)"
        # Values another tool gave (an Inspect scorer, a promptfoo assertion: apps/interop),
        # imported with their explanations; reviewed like any judge's, never judged again.
        IMPORTED = "imported", "Imported scores"

    class LabelType(models.TextChoices):
        UPPER = "upper", "A, B, C…"
        LOWER = "lower", "a, b, c…"
        DIGIT = "digit", "1, 2, 3…"

    class Aggregation(models.TextChoices):
        MEAN = "mean", "Mean"
        SUM = "sum", "Sum"
        MIN = "min", "Min"
        MAX = "max", "Max"
        MODE = "mode", "Mode"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="judges")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    system_prompt = models.TextField(blank=True)
    user_prompt = models.TextField(blank=True)
    # [{"name": "accuracy", "min": 1, "max": 5}, ...]; MCQ judges have one subject 0–100.
    subjects = models.JSONField(default=list)
    label_type = models.CharField(max_length=8, choices=LabelType.choices, default=LabelType.UPPER)
    label_count = models.PositiveIntegerField(default=4)
    metric = models.CharField(max_length=50, blank=True)  # a key of the metric registry
    metric_options = models.JSONField(default=dict, blank=True)
    postprocess = models.CharField(
        max_length=50, blank=True
    )  # a key of the post-processor registry, or a plug-in post-processor's name
    # Post-process the references the same way (UltraEval's processed_output: gsm8k's worked
    # answer "… #### 72" compared as "72").
    postprocess_reference = models.BooleanField(
        default=False,
        help_text=(
            "Apply the same post-processing to the reference answers (a gsm8k reference "
            "“… #### 72” becomes “72” with Last number)."
        ),
    )
    # Python plug-ins (apps/judges/plugins.py): a field converter that gives the item's
    # references from its fields (instead of the reference column), and a dataset metric the
    # board shows beside the mean. `metric` and `postprocess` may name plug-ins too.
    converter = models.CharField(
        max_length=50,
        blank=True,
        verbose_name="Field converter (plug-in)",
        help_text="A plug-in that reads the item's reference answers from its fields.",
    )
    dataset_metric = models.CharField(
        max_length=50,
        blank=True,
        verbose_name="Dataset metric (plug-in)",
        help_text="A plug-in that scores the whole run; the board shows it beside the mean.",
    )
    # The plug-ins this version scores with, recorded when it is saved: kind → {"name", "hash"
    # (of the plug-in's module source), "origin"}. A run refuses to start once the installed
    # code differs (apps.judges.plugins.changed): runs of a version score with one code.
    plugin_code = models.JSONField(default=dict, blank=True)
    n_iter = models.PositiveIntegerField(default=1)
    aggregation = models.CharField(
        max_length=8, choices=Aggregation.choices, default=Aggregation.MEAN
    )
    use_structured_output = models.BooleanField(default=True)
    # Rubric judges: how the reply is read (apps/judges/parsing.py, parse_rubric_reply): a JSON
    # object, MT-Bench's "[[8]]", Prometheus's "[RESULT] 4", "Score: 4/5", the last number, or
    # `reply_pattern`, a regular expression with a named group per subject.
    reply_format = models.CharField(
        max_length=16,
        choices=[(value, label) for value, label, _ in REPLY_FORMATS],
        default="json",
    )
    reply_pattern = models.TextField(blank=True)
    # Rubric judges: one judgement per user turn of a dialogue (MT-Bench's single-answer
    # grading: turn 2 judged with turns 1–2 in view), instead of one for the whole
    # conversation. The item's value is the mean over its turns; Score.turn_values keeps each
    # turn's and boards show turn 1, turn 2… beside the overall mean.
    per_turn = models.BooleanField(
        default=False,
        help_text=(
            "Judge each turn of a conversation on its own (as MT-Bench does): the item's score "
            "is the mean of its turns, and the board shows each turn."
        ),
    )
    # Rubric judges: ask for "confidence" (0–1) beside the scores; a low one can send the item
    # to people (TaskJudging.doubt_confidence).
    ask_confidence = models.BooleanField(default=False)
    # Few-shot examples (apps/judges/learning.py), sent before the item as a user message (the
    # example rendered by this judge's own prompt) and the reply people would have wanted:
    # [{"item": id, "run": judge run id, "user": text, "reply": text, "values": {subject:
    # value}, "reason": text}]. Part of the version: runs keep the examples they used.
    examples = models.JSONField(default=list, blank=True)
    # Where the examples came from: {"from_version": judge id, "seed": int, "held_out_share":
    # float, "held_out": [item ids never used as examples, kept for checking the version]}.
    learned_from = models.JSONField(default=dict, blank=True)
    objects = JudgeQuerySet.as_manager()

    class Meta:
        ordering = ["task", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["task", "name", "version"], name="judge_unique_version")
        ]

    def get_absolute_url(self) -> str:
        return reverse("judges:detail", args=[self.pk])

    # The settings that only some kinds use, in groups: (kinds, fields). The rest (name, kind,
    # subjects) is for every kind. The judge form shows each group for its kinds only.
    KIND_FIELDS = (
        ((Kind.RUBRIC, Kind.MCQ, Kind.PAIRWISE), ("system_prompt", "user_prompt")),
        ((Kind.RUBRIC, Kind.MCQ), ("n_iter", "aggregation")),
        (
            (Kind.RUBRIC,),
            (
                "reply_format",
                "reply_pattern",
                "use_structured_output",
                "ask_confidence",
                "per_turn",
            ),
        ),
        ((Kind.MCQ, Kind.MCQ_RULE), ("label_type", "label_count")),
        (
            (Kind.METRIC,),
            (
                "metric",
                "metric_options",
                "postprocess",
                "postprocess_reference",
                "converter",
                "dataset_metric",
            ),
        ),
    )

    CONTENT_FIELDS = (
        "kind",
        "per_turn",
        "system_prompt",
        "user_prompt",
        "subjects",
        "label_type",
        "label_count",
        "metric",
        "metric_options",
        "postprocess",
        "postprocess_reference",
        "converter",
        "dataset_metric",
        "plugin_code",
        "n_iter",
        "aggregation",
        "use_structured_output",
        "ask_confidence",
        "examples",
        "reply_format",
        "reply_pattern",
    )

    @property
    def rounds(self) -> int:
        """Rounds per item: rule-based judges give the same value every time, so one."""
        return max(1, self.n_iter) if self.uses_llm else 1

    def after_new_version(self, previous_pk: int | None) -> None:
        """When the task's default judge was the previous latest version, the default moves to
        this one, so "evaluate every model" keeps using the judge as it is now."""
        if previous_pk is not None:
            TaskJudging.objects.filter(task_id=self.task_id, default_judge_id=previous_pk).update(
                default_judge=self
            )

    @property
    def uses_llm(self) -> bool:
        return self.kind in (self.Kind.RUBRIC, self.Kind.MCQ, self.Kind.PAIRWISE)

    def subject(self, name: str) -> dict[str, Any] | None:
        for subject in self.subjects:
            if subject["name"].lower() == name.lower():
                return subject
        return None

    @property
    def subject_names(self) -> list[str]:
        return [s["name"] for s in self.subjects]

    @property
    def reply_example(self) -> str:
        """What a reply in this judge's format looks like ("Rating: [[8]]")."""
        return next(example for value, _, example in REPLY_FORMATS if value == self.reply_format)

    @property
    def asks_json(self) -> bool:
        """Whether replies are JSON objects (structured output and confidence need them)."""
        return self.reply_format == "json"


# A log-likelihood choice judge's two values, always these (its form cannot change them).
CHOICE_SUBJECTS = (
    {"name": "accuracy", "label": "Accuracy", "unit": "%", "min": 0, "max": 100},
    {
        "name": "accuracy_norm",
        "label": "Accuracy (length-normalised)",
        "unit": "%",
        "min": 0,
        "max": 100,
    },
)
# The judge a task's choice-scoring runs get by themselves (apps/judges/auto.py).
CHOICE_JUDGE = "choice-ll"


class JudgeRun(models.Model):
    """The judge of a judge, check or pairwise run. A row of judges, not a column of Run, so
    that runs names no later app (#26.2); made with the run (`create_with`), in its
    transaction, never changed."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="judged_with"
    )
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="judge_runs")

    def __str__(self) -> str:
        return f"run #{self.run_id} judged with {self.judge}"

    @classmethod
    def create_with(cls, judge: Judge, **run_fields: Any) -> Run:
        """A new run of `judge` (kind and the rest in `run_fields`) with its row."""
        with transaction.atomic():
            run = Run.objects.create(**run_fields)
            cls.objects.create(run=run, judge=judge)
        return run


def runs_of(judge: Judge) -> RunQuerySet:
    """The runs `judge` judges (judge, check and pairwise runs)."""
    return Run.objects.filter(judged_with__judge=judge)


def judge_id_of(run: Run) -> int | None:
    """The judge's id of a judge, check or pairwise run; None for other kinds."""
    judged_with = getattr(run, "judged_with", None)
    return judged_with.judge_id if judged_with is not None else None


def judge_of(run: Run) -> Judge:
    """The judge of a judge run. Asking a generation run is a programming error."""
    judged_with = getattr(run, "judged_with", None)
    if judged_with is None:
        raise ValueError(f"Run #{run.pk} is a {run.kind} run; it has no judge.")
    return judged_with.judge


class TaskJudging(models.Model):
    """How a task judges by itself: its default judge scores each new response set (every
    generation run that finishes, every response column uploaded) on the default endpoint
    when it asks a model. Owned by judges, as the task (datasets) knows no judge; a task
    without a row has no default judge (`of`)."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="judging")
    default_judge = models.ForeignKey(
        Judge, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    default_judge_endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Judged items that go to people as "needs a person" (#14.4): rounds that disagree by more
    # than this spread (None: never), or a reply read only by tolerant parsing.
    doubt_spread = models.FloatField(null=True, blank=True)
    doubt_repaired = models.BooleanField(default=False)
    # …or a judge that states its confidence (Judge.ask_confidence) gave less than this.
    doubt_confidence = models.FloatField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.task}: default judge {self.default_judge or 'none'}"

    @property
    def doubts(self) -> bool:
        """Whether the task sends any judged item to people as "needs a person"."""
        return (
            self.doubt_spread is not None
            or self.doubt_repaired
            or self.doubt_confidence is not None
        )

    @classmethod
    def of(cls, task_id: int) -> "TaskJudging":
        """The task's row with its judge and endpoint loaded (unsaved, empty when it has none):
        for reading, so a page that only shows the default writes nothing."""
        found = cls.objects.select_related("default_judge", "default_judge_endpoint")
        return found.filter(task_id=task_id).first() or cls(task_id=task_id)

    @classmethod
    def for_task(cls, task: Task) -> "TaskJudging":
        """The task's row, made on first use: for changing the default."""
        return cls.objects.get_or_create(task=task)[0]

    def choose(self, judge: Judge | None, endpoint: Endpoint | None) -> None:
        self.default_judge, self.default_judge_endpoint = judge, endpoint
        self.save(update_fields=["default_judge", "default_judge_endpoint"])


class JudgeRound(LLMCall):
    """One round of judging one item: all subjects from one reply, kept whatever happens."""

    class Status(models.TextChoices):
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="judge_rounds")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="judge_rounds")
    round = models.PositiveIntegerField()  # 0-based
    epoch = models.PositiveIntegerField(default=0)  # which response of the item (Response.epoch)
    # The turn judged (1-based) by a judge that scores per turn (Judge.per_turn); 0: the
    # whole response.
    turn = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=Status.choices)
    values = models.JSONField(default=dict)  # {"accuracy": 4, ...}
    reason = models.TextField(blank=True)
    # The reply was not one clean JSON object: its values were read by tolerant parsing
    # (fences, prose around it, a Python dict…). Such items may go to people (TaskJudging.doubt_*).
    repaired = models.BooleanField(default=False)
    # The judge's stated confidence, 0–1, when its version asks for one (Judge.ask_confidence).
    confidence = models.FloatField(null=True, blank=True)
    # How the verdict was picked from a reply that was not one clean verdict: the reasoning
    # set aside, which of several candidates was taken (RubricResult.reading).
    reading = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # What judging writes into a round: rewritten when a launch redoes it, archived before that.
    RESULT_FIELDS = (
        "status",
        "values",
        "reason",
        *LLMCall.CALL_FIELDS,
        "repaired",
        "confidence",
        "reading",
    )

    class Meta:
        ordering = ["run", "item", "epoch", "turn", "round"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "epoch", "turn", "round"], name="judge_round_once_per_turn"
            )
        ]

    @property
    def is_failed(self) -> bool:
        return self.status == self.Status.FAILED


class ArchivedRound(LLMCall):
    """A round that a later launch replaced (retry failed, overwrite): history is kept."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    round = models.PositiveIntegerField()
    epoch = models.PositiveIntegerField(default=0)
    turn = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=JudgeRound.Status.choices)
    values = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    repaired = models.BooleanField(default=False)
    confidence = models.FloatField(null=True, blank=True)
    reading = models.TextField(blank=True)
    judged_at = models.DateTimeField()  # when the replaced round was written
    archived_at = models.DateTimeField(auto_now_add=True)

    COPIED = ("run_id", "item_id", "round", "epoch", "turn", *JudgeRound.RESULT_FIELDS)

    class Meta:
        ordering = ["run", "item", "round", "archived_at"]
        indexes = [models.Index(fields=["run", "item"])]

    @classmethod
    def of(cls, judge_round: JudgeRound) -> "ArchivedRound":
        return cls(
            judged_at=judge_round.created_at,
            **{name: getattr(judge_round, name) for name in cls.COPIED},
        )


class RetryScope(models.Model):
    """The items one "retry failed" launch is limited to (retry one item, retry ticked items).

    A retry_failed launch without a scope row works on every failed item of the run.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    launch = models.PositiveIntegerField()
    item_ids = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "launch"], name="retry_scope_once_per_launch")
        ]


class StaleScore(Exception):
    """Another reviewer changed the score since this one loaded it."""

    def __init__(self, score: "Score") -> None:
        super().__init__(f"Changed meanwhile by someone else: now {score.final_value}.")
        self.current = score


def awaiting_response(run: Run) -> models.Q:
    """Scores that failed for want of a response which the judged generation run still has
    not got: judging them again can only fail again, until that run answers them."""
    waiting = models.Q(status=Score.Status.FAILED, error_kind=ErrorKind.NO_RESPONSE)
    if run.source_run_id:
        source = Response.objects.filter(run_id=run.source_run_id)
        waiting &= ~models.Q(item_id__in=source.answered_items(run.judged_epochs))
    return waiting


class ScoreQuerySet(models.QuerySet["Score"]):
    def ok(self) -> "ScoreQuerySet":
        return self.filter(status=Score.Status.OK)

    def failed(self) -> "ScoreQuerySet":
        return self.filter(status=Score.Status.FAILED)

    def retryable(self, run: Run) -> "ScoreQuerySet":
        """Failed scores that judging again may fix (see `awaiting_response`)."""
        return self.failed().exclude(awaiting_response(run))

    def overridden(self) -> "ScoreQuerySet":
        return self.filter(override_value__isnull=False)

    def reviewed(self) -> "ScoreQuerySet":
        return self.filter(
            models.Q(override_value__isnull=False) | models.Q(confirmed_at__isnull=False)
        )

    def unreviewed(self) -> "ScoreQuerySet":
        return self.filter(override_value__isnull=True, confirmed_at__isnull=True)

    def bulk_confirm(self, user: Any, reason: str = "") -> int:
        """Confirm every unreviewed score here that has a judge value; returns how many.

        Reviewed scores are left alone (a bulk action must not undo someone's override) and
        failed scores need an override. Each confirmed score gets its history event.
        """
        now = timezone.now()
        with transaction.atomic():
            rows = list(
                self.unreviewed()
                .filter(judge_value__isnull=False)
                .select_for_update()
                .values_list("pk", "final_value", "judge_value")
            )
            ids = [pk for pk, _, _ in rows]
            Score.objects.filter(pk__in=ids).update(
                confirmed_by=user,
                confirmed_at=now,
                final_value=F("judge_value"),
                revision=F("revision") + 1,
                updated_at=now,
            )
            ScoreEvent.objects.bulk_create(
                ScoreEvent(
                    score_id=pk,
                    kind=ScoreEvent.Kind.CONFIRM,
                    old_value=old,
                    new_value=judge,
                    reason=reason,
                    user=user,
                )
                for pk, old, judge in rows
            )
        return len(ids)


class Score(models.Model):
    """The final score of one item on one subject in one judge run.

    `judge_value` is what the judge said (aggregated over rounds) and is never lost;
    `final_value` is the override where there is one, else the judge's value.
    """

    class Status(models.TextChoices):
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scores")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="scores")
    subject = models.CharField(max_length=100)
    status = models.CharField(max_length=8, choices=Status.choices)
    judge_value = models.FloatField(null=True, blank=True)
    round_values = models.JSONField(default=list)  # per round, None for a failed round
    spread = models.FloatField(default=0.0)  # max - min over rounds: disagreement
    # With several epochs (Run.epochs > 1 on the judged run): each epoch's value (its rounds
    # aggregated; None where it failed), and max − min of them, > 0 for a flaky item. The
    # judge value is then the mean over epochs. Empty and 0 with one epoch.
    epoch_values = models.JSONField(default=list, blank=True)
    epoch_spread = models.FloatField(default=0.0)
    # A judge that scores per turn (Judge.per_turn): each turn's value (its rounds aggregated,
    # the mean over epochs; None where it failed), turn 1 first. The judge value is their
    # mean. Empty otherwise.
    turn_values = models.JSONField(default=list, blank=True)
    error_kind = models.CharField(max_length=32, choices=ErrorKind.choices, blank=True)
    error = models.TextField(blank=True)
    override_value = models.FloatField(null=True, blank=True)
    override_reason = models.TextField(blank=True)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    override_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    final_value = models.FloatField(null=True, blank=True)
    revision = models.PositiveIntegerField(default=0)  # bumped by every human change
    launch = models.PositiveIntegerField(default=0)  # the run launch that judged it
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScoreQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "subject"], name="score_once_per_subject"
            )
        ]
        indexes = [
            models.Index(fields=["run", "subject", "final_value"]),
            models.Index(fields=["run", "status"]),
        ]

    def __str__(self) -> str:
        return f"{self.subject}={self.final_value}"

    @property
    def is_overridden(self) -> bool:
        return self.override_value is not None

    @property
    def is_reviewed(self) -> bool:
        return self.is_overridden or self.confirmed_at is not None

    @property
    def is_failed(self) -> bool:
        return self.status == self.Status.FAILED

    @property
    def changed_by_id(self) -> int | None:
        """Whose human change the score holds now: the overrider, else the confirmer."""
        return self.override_by_id if self.is_overridden else self.confirmed_by_id

    def may_revert(self, user: Any) -> bool:
        """Admins revert anyone's change; reviewers only their own."""
        if not self.is_reviewed or not user.is_authenticated or not user.can_edit:
            return False
        return user.is_admin or self.changed_by_id == user.pk

    def last_event(self) -> "ScoreEvent | None":
        return self.events.select_related("user").order_by("-created_at", "-pk").first()

    def value_range(self) -> tuple[float, float] | None:
        judged_with = getattr(self.run, "judged_with", None)
        subject = judged_with.judge.subject(self.subject) if judged_with is not None else None
        return (float(subject["min"]), float(subject["max"])) if subject else None

    # ---- human changes: each is atomic, checks the revision, and leaves history ----
    def _apply(
        self,
        kind: str,
        user: Any,
        reason: str,
        expected_revision: int | None,
        guard: Callable[["Score"], None] | None = None,
        **changes: Any,
    ) -> None:
        with transaction.atomic():
            current = Score.objects.select_for_update().get(pk=self.pk)
            if expected_revision is not None and current.revision != expected_revision:
                raise StaleScore(current)
            if guard is not None:
                guard(current)  # on the locked row, not this possibly stale instance
            old = current.final_value
            override_value = changes.get("override_value", current.override_value)
            changes["final_value"] = (
                override_value if override_value is not None else current.judge_value
            )
            Score.objects.filter(pk=self.pk).update(
                revision=F("revision") + 1, updated_at=timezone.now(), **changes
            )
            ScoreEvent.objects.create(
                score_id=self.pk,
                kind=kind,
                old_value=old,
                new_value=changes["final_value"],
                reason=reason,
                user=user,
            )
        self.refresh_from_db()

    def override(
        self, value: float, user: Any, reason: str, expected_revision: int | None = None
    ) -> None:
        reason = (reason or "").strip()
        if not reason:
            raise ValidationError({"reason": "Say why you override the judge."})
        self._check_value(value)
        self._apply(
            ScoreEvent.Kind.OVERRIDE,
            user,
            reason,
            expected_revision,
            override_value=float(value),
            override_reason=reason,
            override_by=user,
            override_at=timezone.now(),
            # An override disagrees with the judge: an earlier confirmation no longer holds.
            confirmed_by=None,
            confirmed_at=None,
        )

    def confirm(self, user: Any, expected_revision: int | None = None, reason: str = "") -> None:
        """The reviewer agrees with the judge: the judge's value becomes final again."""
        if self.judge_value is None:
            raise ValidationError("There is no judge value to confirm; override it instead.")
        self._apply(
            ScoreEvent.Kind.CONFIRM,
            user,
            reason,
            expected_revision,
            override_value=None,
            override_reason="",
            override_by=None,
            override_at=None,
            confirmed_by=user,
            confirmed_at=timezone.now(),
        )

    def revert(self, user: Any, reason: str = "", expected_revision: int | None = None) -> None:
        """Back to the judge's value: the override and any confirmation are withdrawn.

        Reviewers revert only their own change, admins anyone's (see `may_revert`).
        """

        def guard(current: Score) -> None:
            if not current.is_reviewed:
                raise ValidationError(
                    "Nothing to revert: the score already holds the judge's value."
                )
            if not current.may_revert(user):
                raise PermissionDenied("Only an admin may revert someone else's change.")

        self._apply(
            ScoreEvent.Kind.REVERT,
            user,
            reason,
            expected_revision,
            guard=guard,
            override_value=None,
            override_reason="",
            override_by=None,
            override_at=None,
            confirmed_by=None,
            confirmed_at=None,
        )

    def settle_by_people(self, value: float, kind: str, user: Any, reason: str) -> None:
        """The value several reviewers settled on (`ScoreEvent.Kind.CONSENSUS`, no user) or an
        adjudicator set (`ADJUDICATE`). Equal to the judge's value it reads as a confirmation,
        else as an override; either way the final value, with the reason in the history."""
        self._check_value(value)
        now = timezone.now()
        if self.judge_value is not None and value == self.judge_value:
            changes: dict[str, Any] = {
                "override_value": None,
                "override_reason": "",
                "override_by": None,
                "override_at": None,
                "confirmed_by": user,
                "confirmed_at": now,
            }
        else:
            changes = {
                "override_value": float(value),
                "override_reason": reason,
                "override_by": user,
                "override_at": now,
                "confirmed_by": None,
                "confirmed_at": None,
            }
        self._apply(kind, user, reason, None, **changes)

    def _check_value(self, value: float) -> None:
        if not math.isfinite(value):
            raise ValidationError({"value": "Enter a number."})
        bounds = self.value_range()
        if bounds and not bounds[0] <= value <= bounds[1]:
            raise ValidationError(
                {
                    "value": f"{value:g} is outside {self.subject}'s range {bounds[0]:g}–{bounds[1]:g}."
                }
            )

    # ---- re-judging: the judge's side of the history, for many scores at once ----------------
    @staticmethod
    def confirmed_judge_values(run_id: int, item_ids: list[int]) -> dict[tuple[int, str], Any]:
        """(item, subject) → judge value of each confirmed score, read before a re-judge."""
        return {
            (item_id, subject): value
            for item_id, subject, value in Score.objects.filter(
                run_id=run_id, item_id__in=item_ids, confirmed_at__isnull=False
            ).values_list("item_id", "subject", "judge_value")
        }

    @staticmethod
    def rejudged(
        run_id: int, item_ids: list[int], confirmed_before: dict[tuple[int, str], Any]
    ) -> None:
        """After the judge wrote new values for these items: a reviewer's override stays final,
        pages opened before cannot save on the old values, and a confirmation of a judge value
        that changed lapses (with a "Re-judged" event in the score's history)."""
        scores = Score.objects.filter(run_id=run_id, item_id__in=item_ids)
        scores.filter(override_value__isnull=False).update(final_value=F("override_value"))
        scores.update(revision=F("revision") + 1)
        if not confirmed_before:
            return
        stale = [
            s
            for s in scores.filter(confirmed_at__isnull=False)
            if confirmed_before.get((s.item_id, s.subject), s.judge_value) != s.judge_value
        ]
        if not stale:
            return
        Score.objects.filter(pk__in=[s.pk for s in stale]).update(
            confirmed_by=None, confirmed_at=None
        )
        ScoreEvent.objects.bulk_create(
            ScoreEvent(
                score_id=s.pk,
                kind=ScoreEvent.Kind.REJUDGE,
                old_value=confirmed_before[(s.item_id, s.subject)],
                new_value=s.final_value,
                reason=(
                    f"Re-judged from {confirmed_before[(s.item_id, s.subject)]} to "
                    f"{s.judge_value}: the confirmation was withdrawn."
                ),
            )
            for s in stale
        )


class ScoreEvent(models.Model):
    """The audit history of one score: who changed what, when, from what, to what, and why."""

    class Kind(models.TextChoices):
        OVERRIDE = "override", "Override"
        CONFIRM = "confirm", "Confirm"
        REVERT = "revert", "Revert"
        # The judge gave a reviewed score a new value on a re-run: the confirmation of the
        # old value no longer holds, so it is withdrawn (the override, if any, stays).
        REJUDGE = "rejudge", "Re-judged"
        # Several reviewers per item (apps.review): their reviews agreed and their consensus
        # became the value, or they disagreed and an adjudicator set it.
        CONSENSUS = "consensus", "Consensus"
        ADJUDICATE = "adjudicate", "Adjudicated"

    # The kinds that can give a score a value other than the judge's (an override value): only
    # scores with such an event can differ from the judge (boards look only at those).
    SETS_VALUE = (Kind.OVERRIDE, Kind.CONSENSUS, Kind.ADJUDICATE)

    score = models.ForeignKey(Score, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    old_value = models.FloatField(null=True, blank=True)
    new_value = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["score", "created_at", "pk"]


class RunItemQuerySet(ItemQuerySet):
    """The items of a judge run's dataset, filtered by what its judge and reviewers did.

    One meaning of each state for the results page, the review list and the review queue:
    - judged: the judge left a score or at least a (failed) round for the item;
    - pending: not judged yet;
    - failed: a subject has no value, or a round failed (retrying may change the score);
    - ok: judged, and nothing failed;
    - unreviewed / reviewed: some score / no score still waits for a person's confirm or
      override; overridden: a person replaced a judge value.

    Failure filters are uncorrelated IN lists on purpose: a correlated EXISTS lets SQLite pick
    the (run, status) index and rescan every failed score for every item (two minutes at 100k).
    """

    run_id: int = 0  # set by of(): no run, no items

    @classmethod
    def of(cls, run: Run) -> "RunItemQuerySet":
        items = cls(model=Item).filter(dataset_id=run.dataset_id)
        items.run_id = run.pk
        return items

    def _clone(self) -> "RunItemQuerySet":
        clone = super()._clone()  # type: ignore[misc]
        clone.run_id = self.run_id
        return clone

    def _scores(self) -> ScoreQuerySet:
        return Score.objects.filter(run_id=self.run_id)

    def _item_scores(self) -> ScoreQuerySet:
        return self._scores().filter(item=OuterRef("pk"))

    def _failed_q(self) -> Q:
        rounds = JudgeRound.objects.filter(run_id=self.run_id, status=JudgeRound.Status.FAILED)
        return Q(pk__in=self._scores().failed().values("item_id")) | Q(
            pk__in=rounds.values("item_id")
        )

    def judged(self) -> "RunItemQuerySet":
        rounds = JudgeRound.objects.filter(run_id=self.run_id, item=OuterRef("pk"))
        return self.filter(Exists(self._item_scores()) | Exists(rounds))

    def pending(self) -> "RunItemQuerySet":
        rounds = JudgeRound.objects.filter(run_id=self.run_id, item=OuterRef("pk"))
        return self.exclude(Exists(self._item_scores()) | Exists(rounds))

    def failed(self) -> "RunItemQuerySet":
        return self.filter(self._failed_q())

    def not_failed(self) -> "RunItemQuerySet":
        return self.exclude(self._failed_q())

    def ok(self) -> "RunItemQuerySet":
        return self.filter(Exists(self._item_scores())).not_failed()

    def unreviewed(self) -> "RunItemQuerySet":
        return self.filter(Exists(self._item_scores().unreviewed()))

    def reviewed(self) -> "RunItemQuerySet":
        return self.filter(Exists(self._item_scores())).exclude(
            Exists(self._item_scores().unreviewed())
        )

    def overridden(self) -> "RunItemQuerySet":
        return self.filter(Exists(self._item_scores().overridden()))

    def scored_between(
        self, subject: str, low: float | None, high: float | None
    ) -> "RunItemQuerySet":
        """Items whose final value on `subject` lies in [low, high] (either end open)."""
        if low is None and high is None:
            return self
        values = self._scores().filter(subject=subject, final_value__isnull=False)
        if low is not None:
            values = values.filter(final_value__gte=low)
        if high is not None:
            values = values.filter(final_value__lte=high)
        return self.filter(pk__in=values.values("item_id"))

    def disagreeing(self) -> "RunItemQuerySet":
        """Items whose rounds gave different values on some subject."""
        return self.filter(pk__in=self._scores().filter(spread__gt=0).values("item_id"))

    def _flaky_q(self) -> Q:
        return Q(pk__in=self._scores().filter(epoch_spread__gt=0).values("item_id"))

    def flaky(self) -> "RunItemQuerySet":
        """Items whose epochs (repeated generations) got different values on some subject."""
        return self.filter(self._flaky_q())

    def not_flaky(self) -> "RunItemQuerySet":
        return self.exclude(self._flaky_q())

    def _doubtful_q(self) -> Q:
        rule = TaskJudging.objects.filter(task__runs__pk=self.run_id).first()
        doubt = Q(pk__in=[])
        if rule is not None and rule.doubt_spread is not None:
            spread = self._scores().filter(spread__gt=rule.doubt_spread)
            doubt |= Q(pk__in=spread.values("item_id"))
        if rule is not None and rule.doubt_confidence is not None:
            unsure = JudgeRound.objects.filter(
                run_id=self.run_id, confidence__lt=rule.doubt_confidence
            )
            doubt |= Q(pk__in=unsure.values("item_id"))
        if rule is not None and rule.doubt_repaired:
            repaired = JudgeRound.objects.filter(run_id=self.run_id, repaired=True)
            doubt |= Q(pk__in=repaired.values("item_id"))
        return doubt

    def doubtful(self) -> "RunItemQuerySet":
        """Items the task's rule sends to people ("needs a person", #14.4): rounds that
        disagree beyond `TaskJudging.doubt_spread`, or a reply read by tolerant parsing."""
        return self.filter(self._doubtful_q())

    def not_doubtful(self) -> "RunItemQuerySet":
        return self.exclude(self._doubtful_q())

    def in_state(self, state: str) -> "RunItemQuerySet":
        """The judge's state filter of the lists: "", ok, failed or pending."""
        match state:
            case "ok":
                return self.ok()
            case "failed":
                return self.failed()
            case "pending":
                return self.pending()
        return self


# ---- pairwise comparisons -----------------------------------------------------------------------
class PairwiseSetup(models.Model):
    """What a pairwise run compares: two or more response sets (generation runs) over one
    dataset, every pair, or each against a baseline."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="pairwise")
    responses = models.ManyToManyField(Run, related_name="+")
    baseline = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    def pairs(self) -> list[tuple[int, int]]:
        """(a, b) run ids, a < b unless the baseline is a: the baseline comes first."""
        ids = sorted(self.responses.values_list("pk", flat=True))
        if self.baseline_id is not None:
            return [(self.baseline_id, other) for other in ids if other != self.baseline_id]
        return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1 :]]


class Comparison(LLMCall):
    """One judgement of a pair of responses to an item in one order: `order` 0 shows the
    pair's a as "A", 1 shows b as "A". The verdict is stored as said (`shown`) and for the
    pair (`verdict`: a, b or tie)."""

    class Status(models.TextChoices):
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    class Verdict(models.TextChoices):
        A = "a", "a better"
        B = "b", "b better"
        TIE = "tie", "Tie"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="comparisons")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    a_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    b_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    order = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=8, choices=Status.choices)
    shown = models.CharField(max_length=4, blank=True)  # "A", "B" or "tie" as the judge said
    verdict = models.CharField(max_length=4, choices=Verdict.choices, blank=True)
    repaired = models.BooleanField(default=False)  # read from free text, not JSON
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    RESULT_FIELDS = (
        "status",
        "shown",
        "verdict",
        "repaired",
        "reason",
        *LLMCall.CALL_FIELDS,
    )

    class Meta:
        ordering = ["run", "item", "a_run", "b_run", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item", "a_run", "b_run", "order"], name="comparison_once"
            )
        ]


class JudgeCheck(models.Model):
    """A judge version checked against people (#14.2): its check run judges the items of a
    reviewed judge run that the held-out split kept from every example (`items`, recorded),
    and the report compares its values and the reviewed run's with people's on them."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="judge_check")
    reviewed_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    items = models.JSONField(default=list)  # held-out item ids people settled in reviewed_run
    seed = models.IntegerField(default=0)
    held_out_share = models.FloatField(default=0.5)
    created_at = models.DateTimeField(auto_now_add=True)
