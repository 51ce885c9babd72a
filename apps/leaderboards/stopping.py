"""A judge run that stops itself once its comparison with a baseline has decided (#31.4).

A `StopRule` names the run, a baseline judge run on the same items and a subject. As the run's
results are committed (`apps.runs.signals.results_written`, sent by the engine after each
commit, in the worker), the rule computes the compare page's anytime-valid confidence sequence
of run − baseline over the paired items in the order their pairs were complete
(`compare.sequential_of`: the same numbers as the page's "Stop early?" table). Once it decides
— run better, baseline better, or (with δ > 0) no difference larger than δ — the run ends like
a cancel with the decision as its reason (`apps.runs.engine.lifecycle.stop_itself`): cancelled,
not failed; every result is kept; resume does the rest, and the rule, spent, lets it finish.
A baseline still running counts too: its commits trigger the check as well.

The sequence is valid at every look, so checking often costs no validity, only reads: a check
reads both runs' scores of the subject, so it runs after every CHECK_EVERY new items or 10 % of
those already seen, whichever is more (a 10,000-item run is read ~50 times, not 500).
The runs app knows nothing of this: the flow is one-way (runs → … → leaderboards).
"""

import logging
from typing import Any

import numpy as np
from django.db.models import Q
from django.utils import timezone

from apps.judges.models import judge_of
from apps.leaderboards import sequential
from apps.leaderboards.boards import model_label
from apps.leaderboards.compare import arrival, item_values, sequential_of
from apps.leaderboards.models import StopRule
from apps.leaderboards.subjects import subject_infos
from apps.runs.engine.lifecycle import stop_itself
from apps.runs.models import Run

logger = logging.getLogger(__name__)

CHECK_EVERY = 10  # new items (of the slower run) between two checks, at least


class RuleError(ValueError):
    """The rule cannot be set; the message says why in plain words."""


def set_rule(
    run: Run, baseline: Run, subject: str, delta: float = 0.0, user: Any = None
) -> StopRule:
    """Set (or reset) `run` to stop itself when its comparison with `baseline` on `subject`
    decides. Checked at once: a run already decided stops now."""
    if run.kind != Run.Kind.JUDGE or baseline.kind != Run.Kind.JUDGE:
        raise RuleError("Both runs must be judge runs: the rule compares their scores.")
    if run.pk == baseline.pk:
        raise RuleError("Pick another run as the baseline: a run does not differ from itself.")
    if run.task_id != baseline.task_id:
        raise RuleError("The baseline must be a judge run of the same task.")
    judge = judge_of(run)
    subjects = judge.subject_names
    if subject not in subjects:
        raise RuleError(
            f"The run's judge has no subject {subject!r}"
            + (f" (it has {', '.join(subjects)})." if subjects else ".")
        )
    if not (delta >= 0 and np.isfinite(delta)):
        raise RuleError("δ must be 0 or more (0: only “better” decides).")
    if not (run.is_active or run.can_resume):
        raise RuleError("This run has finished every item: there is nothing left to stop.")
    rule, _ = StopRule.objects.update_or_create(
        run=run,
        defaults={
            "baseline": baseline,
            "subject": subject,
            "delta": float(delta),
            "state": sequential.GOING,
            "checked_n": 0,
            "checked_mark": 0,
            "mean": None,
            "low": None,
            "high": None,
            "decided_at": None,
            "checked_at": None,
            "stopped_at": None,
            "created_by": user if getattr(user, "pk", None) else None,
        },
    )
    check(rule)
    return rule


def diffs_of(rule: StopRule) -> np.ndarray:
    """run − baseline over the paired items, in the order their pairs were complete (values
    people corrected count as corrected, as on the compare page)."""
    a = item_values(rule.run, "human", rule.subject).get(rule.subject, {})
    b = item_values(rule.baseline, "human", rule.subject).get(rule.subject, {})
    both = [k for k in a if k in b and a[k][1] is not None and b[k][1] is not None]
    arrived_a, arrived_b = arrival(rule.run), arrival(rule.baseline)
    both.sort(key=lambda k: max(arrived_a[rule.subject, k], arrived_b[rule.subject, k]))
    return np.array([a[k][1] - b[k][1] for k in both], dtype=float)  # type: ignore[operator]


def check(rule: StopRule) -> str:
    """Compute the sequence now, keep it on the rule, and stop the run if it has decided (once:
    a rule that stopped its run is spent). Returns the state."""
    run, baseline = rule.run, rule.baseline
    judge = judge_of(run)
    infos = {i.name: i for i in subject_infos(judge)}
    info = infos.get(rule.subject)
    horizon = max(run.dataset.row_count, baseline.dataset.row_count)
    result = sequential_of(
        diffs_of(rule), rule.delta, horizon, info.higher_is_better if info else True
    )
    fields: dict[str, Any] = {
        "checked_at": timezone.now(),
        "checked_mark": min(run.done, baseline.done),
        "checked_n": result.n if result else 0,
        "state": result.state if result else sequential.GOING,
        "mean": result.mean if result else None,
        "low": result.low if result else None,
        "high": result.high if result else None,
        "decided_at": result.decided_at if result else None,
    }
    StopRule.objects.filter(pk=rule.pk).update(**fields)
    for name, value in fields.items():
        setattr(rule, name, value)
    if result is None or result.state == sequential.GOING or rule.stopped_at is not None:
        return rule.state
    if not run.is_active:
        return rule.state  # decided before it was resumed: the first check after resume stops it
    # Of two chunks checking at once, only one stops the run (Run.stop_by_itself).
    if stop_itself(run, reason(rule)):
        rule.stopped_at = timezone.now()
        StopRule.objects.filter(pk=rule.pk).update(stopped_at=rule.stopped_at)
        logger.info("run #%s stopped: %s", run.pk, reason(rule))
    return rule.state


def reason(rule: StopRule) -> str:
    """The decision in one line, for the run page's "Stopped:" note."""
    a, b = model_label(rule.run), model_label(rule.baseline)
    decision = {
        sequential.BETTER: f"{a} better than {b}",
        sequential.WORSE: f"{b} (run #{rule.baseline_id}) better than {a}",
        sequential.EQUIVALENT: f"no difference larger than {rule.delta:g} from {b}",
    }.get(rule.state, "keep going")
    return (
        f"decided: {decision} on {rule.subject} after {rule.decided_at} paired items "
        f"(95% confidence sequence of the difference [{rule.low:.3g}, {rule.high:.3g}] "
        f"over {rule.checked_n}; baseline run #{rule.baseline_id})"
    )


def on_results_written(sender: Any, run: Run, **kwargs: Any) -> None:
    """`results_written`: check the rules that watch this run (or use it as their baseline),
    when enough new items have arrived since their last check."""
    if run.kind != Run.Kind.JUDGE:
        return
    rules = StopRule.objects.filter(
        Q(run_id=run.pk) | Q(baseline_id=run.pk), stopped_at__isnull=True
    ).select_related("run__dataset", "baseline__dataset", "run__source_run__endpoint")
    for rule in rules:
        if not rule.run.is_active or rule.run.cancel_requested:
            continue
        step = max(CHECK_EVERY, rule.checked_mark // 10)
        if min(rule.run.done, rule.baseline.done) < max(
            sequential.MIN_ITEMS, rule.checked_mark + step
        ):
            continue
        check(rule)
