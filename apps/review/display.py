"""What the review pages show, gathered in a fixed number of queries.

Everything here hands plain values to templates; templates escape them. Blind mode is
decided here, on the server: a hidden judge value never reaches the template at all.
"""

import time
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from apps.datasets.models import Item
from apps.datasets.values import as_text
from apps.judges.models import JudgeRound, Score, ScoreEvent, StaleScore, judge_of
from apps.review.dialogues import dialogue_of
from apps.review.models import (
    Adjudication,
    BlindEntry,
    Review,
    ReviewAssignment,
    ReviewLock,
    ReviewPolicy,
)
from apps.review.scales import DigitKeys, digit_keys
from apps.runs.models import AttemptLog, Response, Run


@dataclass
class SubjectView:
    """One subject of one item, as its card shows it."""

    score: Score
    spec: dict[str, Any]
    events: list[ScoreEvent]
    blind_entry: BlindEntry | None
    hidden: bool  # blind mode and the reviewer has not given their own value yet
    may_edit: bool
    may_revert: bool
    keys: DigitKeys  # what the digit keys set on this subject (they follow its scale)
    errors: dict[str, list[str]] = field(default_factory=dict)
    conflict: Score | None = None
    conflict_event: ScoreEvent | None = None
    saved: str = ""  # what was just saved, for the message and for keyboard focus
    value: str = ""  # what the override form shows
    reason: str = ""
    # Several reviewers per item (ReviewPolicy): this reviewer's review, everyone's (shown
    # only once this reviewer has submitted, or to those who do not review), the target,
    # and an adjudication when the reviews disagreed.
    several: bool = False
    target: int = 1
    my_review: Review | None = None
    reviews: list[Review] = field(default_factory=list)
    show_reviews: bool = False
    adjudication: Adjudication | None = None
    may_adjudicate: bool = False
    shown_at: float = 0.0  # when the page was made: the review's time spent counts from it

    @property
    def name(self) -> str:
        return self.score.subject

    @property
    def history_count(self) -> int:
        """Entries in the card's history: the reviews and the score's events."""
        return len(self.reviews) + len(self.events)

    @property
    def low(self) -> Any:
        return self.spec.get("min")

    @property
    def high(self) -> Any:
        return self.spec.get("max")

    @property
    def conflict_verb(self) -> str:
        kind = self.conflict_event.kind if self.conflict_event else ""
        return {"override": "overrode", "confirm": "confirmed", "revert": "reverted"}.get(
            kind, "changed"
        )

    @property
    def all_errors(self) -> list[str]:
        return [message for messages in self.errors.values() for message in messages]


def subject_views(run: Run, item: Item, user: Any, blind: bool) -> list[SubjectView]:
    """Every score of the item, in the judge's subject order, with history and blind state."""
    scores = list(
        Score.objects.filter(run=run, item=item).select_related("override_by", "confirmed_by")
    )
    events: dict[int, list[ScoreEvent]] = {}
    for event in ScoreEvent.objects.filter(score__in=scores).select_related("user"):
        events.setdefault(event.score_id, []).append(event)
    entries = {
        entry.score_id: entry
        for entry in BlindEntry.objects.filter(score__in=scores, user_id=user.pk)
    }
    order = {name: index for index, name in enumerate(judge_of(run).subject_names)}
    scores.sort(key=lambda s: (order.get(s.subject, len(order)), s.subject))
    policy = ReviewPolicy.of(run.task_id)
    reviews: dict[int, list[Review]] = {}
    adjudications: dict[int, Adjudication] = {}
    if policy.several:
        for review in Review.objects.filter(score__in=scores).select_related("user"):
            reviews.setdefault(review.score_id, []).append(review)
        adjudications = {a.score_id: a for a in Adjudication.objects.filter(score__in=scores)}
    return [
        subject_view(
            score,
            run,
            user,
            blind,
            events.get(score.pk, []),
            entries.get(score.pk),
            policy=policy,
            reviews=reviews.get(score.pk, []),
            adjudication=adjudications.get(score.pk),
        )
        for score in scores
    ]


def subject_view(
    score: Score,
    run: Run,
    user: Any,
    blind: bool,
    events: list[ScoreEvent] | None = None,
    blind_entry: BlindEntry | None = None,
    *,
    policy: ReviewPolicy | None = None,
    reviews: list[Review] | None = None,
    adjudication: Adjudication | None = None,
) -> SubjectView:
    if events is None:
        events = list(score.events.select_related("user"))
        blind_entry = BlindEntry.objects.filter(score=score, user_id=user.pk).first()
    if policy is None:
        policy = ReviewPolicy.of(run.task_id)
        if policy.several:
            reviews = list(score.reviews.select_related("user"))
            adjudication = Adjudication.objects.filter(score=score).first()
    if policy.several:
        return _several_view(score, run, user, blind, events, policy, reviews or [], adjudication)
    own_change = user.pk in (score.override_by_id, score.confirmed_by_id)
    hidden = blind and blind_entry is None and not own_change
    spec = judge_of(run).subject(score.subject) or {}
    view = SubjectView(
        score=score,
        spec=spec,
        events=events,
        blind_entry=blind_entry,
        hidden=hidden,
        may_edit=user.can_edit,
        may_revert=score.may_revert(user),
        keys=digit_keys(judge_of(run), spec),
    )
    if not hidden:
        # Prefill the override with the reviewer's blind value, else the current one.
        shown = blind_entry.value if blind_entry else score.final_value
        view.value = "" if shown is None else f"{shown:g}"
    return view


def _several_view(
    score: Score,
    run: Run,
    user: Any,
    blind: bool,
    events: list[ScoreEvent],
    policy: ReviewPolicy,
    reviews: list[Review],
    adjudication: Adjudication | None,
) -> SubjectView:
    """A subject's card when several people review each item: until this reviewer has
    submitted, nobody else's value (and in blind mode not the judge's) reaches the page."""
    mine = next((r for r in reviews if r.user_id == user.pk), None)
    spec = judge_of(run).subject(score.subject) or {}
    # Whoever has not reviewed a score that has all its reviews is no longer one of its
    # reviewers: nothing left to keep from them.
    reviewer = bool(user.can_edit) and (mine is not None or len(reviews) < policy.reviews_per_item)
    return SubjectView(
        score=score,
        spec=spec,
        events=events,
        blind_entry=None,
        hidden=blind and reviewer and mine is None,
        may_edit=reviewer and mine is None,
        may_revert=False,
        keys=digit_keys(judge_of(run), spec),
        several=True,
        target=policy.reviews_per_item,
        my_review=mine,
        reviews=reviews,
        # An adjudicator sees them all once the item waits for adjudication.
        show_reviews=mine is not None
        or not reviewer
        or (adjudication is not None and policy.may_adjudicate(user)),
        adjudication=adjudication,
        may_adjudicate=policy.may_adjudicate(user),
        shown_at=time.time(),
    )


def with_outcome(
    view: SubjectView,
    *,
    saved: str = "",
    error: ValidationError | None = None,
    stale: StaleScore | None = None,
    value: str = "",
    reason: str = "",
) -> SubjectView:
    """The card after a POST: what was saved, or why not (keeping what the reviewer typed)."""
    view.saved = saved
    if error is not None:
        view.errors = (
            error.message_dict if hasattr(error, "error_dict") else {"__all__": error.messages}
        )
    if stale is not None:
        view.conflict = stale.current
        view.conflict_event = stale.current.last_event()
    if error is not None or stale is not None:
        view.value = value if value != "" else view.value
        view.reason = reason
    return view


def response_of(
    run: Run, item: Item, verdicts: dict[tuple[int, int], list[dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The text the judge scored: a generation run's response or a column of the dataset.
    With epochs, every epoch's response in order (`epochs`), the first one's fields besides.
    A response to a conversation item has its `dialogue` too, turn by turn, each answer with
    the judge's `verdicts` on it ((epoch, turn) → rounds) beside it."""
    if run.source_run_id:
        source = f"{run.source_run}"
        rows = Response.objects.filter(
            run_id=run.source_run_id, item=item, epoch__lt=run.judged_epochs
        ).select_related("run", "item")
        responses = [
            {
                "epoch": response.epoch,
                "text": response.text,
                "failed": response.status == Response.Status.FAILED,
                "error_kind": response.get_error_kind_display() if response.error_kind else "",
                "error": response.error,
                "dialogue": dialogue_of(response, _turns_of(verdicts, response.epoch)),
            }
            for response in rows.order_by("epoch")
        ]
        if not responses:
            return {"source": source, "missing": True}
        several = run.judged_epochs > 1
        return {"source": source, **responses[0], "epochs": responses if several else []}
    if run.source_column:
        return {
            "source": f"column “{run.source_column}”",
            "text": item.fields.get(run.source_column),  # as stored: a transcript stays one
        }
    return {"source": "", "missing": True}


def inputs_of(run: Run, item: Item) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """(inputs, other fields): the mapped input columns first, then everything else, as
    stored (the page shows a chat transcript as messages, other JSON as JSON)."""
    dataset = run.dataset
    inputs = dataset.input_columns
    mapping = dataset.mapping or {}
    # Shown elsewhere already (the id as the title, tags as badges), or other models'
    # responses, which would be mistaken for the one under review.
    skip = {*inputs, *dataset.response_columns, dataset.reference_column, run.source_column}
    skip |= {mapping.get("id_column"), mapping.get("tags_column")}
    shown = [(name, item.fields.get(name)) for name in inputs]
    others = [(name, value) for name, value in item.fields.items() if name not in skip]
    return shown, others


def _turns_of(
    verdicts: dict[tuple[int, int], list[dict[str, Any]]] | None, epoch: int
) -> dict[int, list[dict[str, Any]]]:
    return {turn: rounds for (e, turn), rounds in (verdicts or {}).items() if e == epoch}


def turn_verdicts(rounds: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """The rounds of a judge that scored turn by turn, by (epoch, turn), as the dialogue shows
    them beside each answer. Rounds about the whole response (turn 0) are not among them."""
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in rounds:
        judge_round = r["round"]
        turn = judge_round.turn
        if turn:
            out.setdefault((judge_round.epoch, turn), []).append(
                {
                    "round": judge_round.round,
                    "values": r["values"],
                    "reason": judge_round.reason,
                    "failed": judge_round.status == JudgeRound.Status.FAILED,
                    "error": judge_round.error,
                }
            )
    return out


def rounds_of(run: Run, item: Item) -> list[dict[str, Any]]:
    names = judge_of(run).subject_names
    rounds = []
    for judge_round in JudgeRound.objects.filter(run=run, item=item).order_by("epoch", "round"):
        values = judge_round.values or {}
        rounds.append(
            {
                "round": judge_round,
                "values": [(name, values.get(name)) for name in names if name in values]
                + [(name, value) for name, value in values.items() if name not in names],
            }
        )
    return rounds


def attempts_of(run: Run, item: Item) -> list[dict[str, Any]]:
    attempts = []
    for log in AttemptLog.objects.filter(run=run, item=item):
        messages = log.request_messages if isinstance(log.request_messages, list) else []
        attempts.append(
            {
                "log": log,
                "messages": [
                    (str(m.get("role", "")), as_text(m.get("content")))
                    if isinstance(m, dict)
                    else ("", as_text(m))
                    for m in messages
                ],
            }
        )
    return attempts


def item_context(run: Run, item: Item, user: Any, blind: bool) -> dict[str, Any]:
    policy = ReviewPolicy.of(run.task_id)
    subjects = subject_views(run, item, user, blind)
    revealed = not any(view.hidden for view in subjects)
    evidence = evidence_context(run, item, revealed)
    # Blind: the judge's verdicts on each turn stay hidden with the rest of its evidence.
    verdicts = turn_verdicts(evidence["rounds"]) if revealed else {}
    inputs, other_fields = inputs_of(run, item)
    response = response_of(run, item, verdicts)
    if response.get("dialogue") or any(e.get("dialogue") for e in response.get("epochs", [])):
        # The dialogue shows the conversation column, turn by turn: not again as JSON.
        column = run.dataset.conversation_column
        other_fields = [(name, value) for name, value in other_fields if name != column]
    assignment = ReviewAssignment.objects.filter(run=run, item=item).select_related("user").first()
    return {
        "run": run,
        "item": item,
        "subjects": subjects,
        "inputs": inputs,
        "other_fields": other_fields,
        "response": response,
        "evidence": evidence,
        # Locks are between people who change scores; a viewer is not told of them.
        "lock": ReviewLock.holder(run, item) if user.can_edit and not policy.several else None,
        "policy": policy,
        "assignment": assignment,
    }


def evidence_context(run: Run, item: Item, revealed: bool) -> dict[str, Any]:
    """The judge's rounds and the attempt logs: hidden while any subject is still blind."""
    if not revealed:
        return {"revealed": False}
    rounds = rounds_of(run, item)
    return {
        "revealed": True,
        "rounds": rounds,
        # For the score panel: what the judge said, beside the values it gave.
        "reasons": [
            {
                "epoch": r["round"].epoch,
                "turn": r["round"].turn,
                "round": r["round"].round,
                "reason": r["round"].reason,
                "values": r["values"],
            }
            for r in rounds
            if r["round"].reason
        ],
        "attempts": attempts_of(run, item),
    }
