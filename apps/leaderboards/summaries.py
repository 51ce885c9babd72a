"""Per-run score summaries for boards: judge-side and human-corrected aggregates, stored.

A board over 20 runs × 100k items × 5 subjects must not read 10M scores, nor the 100k
overridden ones, per request. Per run we store, per (subject, tag set), the distribution of
the judge's values (`stats.Dist`) and the failed count, the same human-corrected (each
overridden score at its person's value) with the overridden count, and the scores holding a
person's value as the summary counted them. SQL aggregates it once (GROUP BY subject,
tags_text, status, judge_value, plus one pass over the run's scores in item order). Only the
judging job changes the judge side, and it always moves the run row (counters, heartbeat,
status, launch), so the run row's fingerprint says when to recompute everything.

People change scores one at a time and each change leaves a ScoreEvent (override, confirm,
revert, consensus, adjudication, re-judge). The summary keeps a watermark, `event_id`: on each
request, the (few) scores of the board's runs with an event after it are compared with what
the summary counted for them and the difference is moved from bucket to bucket and stored
(`catch_up`), under a row lock. So a request reads O(runs × subjects × tag sets) stored rows
plus what changed since, never every override. The watermark trails the newest event by
MARGIN seconds and a catch-up compares against the stored state, so an event is safely seen
again: a change committed while a summary was being computed, with an older id than one
already read, is still caught.

The overall (weighted) score combines subjects measured on the same items, so its CI has to
resample items, not subjects one by one. For that the summary also keeps, per tag set, how
many items share each vector of values across the subjects (a rubric with three subjects on
1–5 has at most a few hundred), judge-only and human-corrected.
"""

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from apps.datasets.models import Item
from apps.judges.models import Score, ScoreEvent
from apps.leaderboards.memo import Memo, run_state
from apps.leaderboards.models import RunSummary
from apps.leaderboards.stats import Dist
from apps.runs.models import Run

VECTOR_LIMIT = 300  # most distinct per-item vectors a tag set keeps (bounds the bootstrap)
MARGIN = timedelta(seconds=30)  # how far the event watermark trails the newest event
LAG = 1000  # events a summary's watermark may fall behind before a read moves it on
GroupKey = tuple[str, str]  # (subject, tags_text)
Vector = tuple[float | None, ...]  # one item's values, in `RunScores.vector_subjects` order
# A score holding a person's value: [score id, item id, subject, tags_text, value]
Held = list


@dataclass
class Group:
    """One subject's scores on the items that share one tag set, in one run."""

    judge: Dist = field(default_factory=Dist)
    judge_failed: int = 0
    human: Dist = field(default_factory=Dist)
    human_failed: int = 0
    overridden: int = 0

    @classmethod
    def from_judge(cls, judge: Dist, failed: int) -> "Group":
        """Before overrides are laid over it, the human side equals the judge's."""
        return cls(judge=judge, judge_failed=failed, human=judge.copy(), human_failed=failed)


@dataclass
class Vectors:
    """Per-item value vectors of one tag set: how many items share each, judge-only and
    human-corrected."""

    judge: Counter[Vector]
    human: Counter[Vector]


@dataclass
class RunScores:
    """Everything a board needs about one judge run."""

    run_id: int
    groups: dict[GroupKey, Group]
    item_counts: dict[str, int]  # items of the dataset per tags_text
    vector_subjects: list[str] = field(default_factory=list)
    vectors: dict[str, Vectors | None] = field(default_factory=dict)  # None: over the limit
    # Names the human-corrected state: changes whenever a person's change is counted (or the
    # summary is computed again), the same in every process. Keys memos of human values.
    state: str = ""
    flaky: int | None = None  # items whose epochs disagree (None: not counted, run going)

    def subjects(self) -> set[str]:
        return {subject for subject, _ in self.groups}


def fingerprint(run: Run) -> str:
    """The run's results fingerprint, and the summary format's version (memo.SUMMARY_VERSION)."""
    return run_state(run)


def valued(status: str, judge_value: float | None) -> float | None:
    """The judge's value of a score that counts (an OK score); None for a failed one."""
    return float(judge_value) if status == Score.Status.OK and judge_value is not None else None


def human_value(status: str, judge_value: float | None, override: float | None) -> float | None:
    """The human-corrected value: a person's where there is one, else the judge's."""
    return float(override) if override is not None else valued(status, judge_value)


def watermark() -> int:
    """The newest event older than MARGIN: every change with a later event is looked at again
    (read before the scores it vouches for)."""
    cut = timezone.now() - MARGIN
    found = ScoreEvent.objects.filter(created_at__lt=cut).order_by("-pk").values_list("pk").first()
    return found[0] if found else 0


def _move(group: Group, old: float | None, new: float | None) -> None:
    """One score's human value goes from `old` to `new` (None: failed, no value)."""
    if old is not None:
        group.human.remove(old)
    else:
        group.human_failed -= 1
    if new is not None:
        group.human.add(new)
    else:
        group.human_failed += 1


def compute(run: Run) -> RunSummary:
    """Aggregate one run's scores in SQL and store the summary (upsert)."""
    mark = fingerprint(run)
    event_id = watermark()  # before the scores: a change after it is looked at again
    summary, _ = RunSummary.objects.update_or_create(
        run_id=run.pk,
        defaults={
            "fingerprint": mark,
            **aggregate(run),
            "event_id": event_id,
            "state": uuid.uuid4().hex,
        },
    )
    return summary


def aggregate(run: Run) -> dict[str, Any]:
    """The summary's numbers from the run's scores: groups, item counts, vectors, held values
    and flaky items (RunSummary's fields)."""
    groups: dict[GroupKey, Group] = {}
    rows = (
        Score.objects.filter(run_id=run.pk)
        .values_list("subject", "item__tags_text", "status", "judge_value")
        .annotate(count=Count("pk"))
        .order_by()
    )
    for subject, tags_text, status, judge_value, count in rows.iterator(chunk_size=5000):
        group = groups.setdefault((subject, tags_text), Group())
        if (value := valued(status, judge_value)) is not None:
            group.judge.add(value, count)
        else:
            group.judge_failed += count
    for group in groups.values():
        group.human, group.human_failed = group.judge.copy(), group.judge_failed
    item_counts = dict(
        Item.objects.filter(dataset_id=run.dataset_id)
        .values_list("tags_text")
        .annotate(count=Count("pk"))
        .order_by()
    )
    subjects = sorted({subject for subject, _ in groups})
    # A running run's summary is rebuilt on every board request (its fingerprint keeps moving):
    # the per-item scan waits until the run has ended.
    scan = item_scan(run, subjects) if run.is_terminal else None
    held = scan.held if scan is not None else held_values(run)
    for _, _, subject, tags_text, value, status, judge_value in held:
        if (found := groups.get((subject, tags_text))) is not None:
            found.overridden += 1
            _move(found, valued(status, judge_value), value)
    return {
        "groups": [
            [
                s,
                t,
                g.judge.to_json(),
                g.judge_failed,
                g.human.to_json(),
                g.human_failed,
                g.overridden,
            ]
            for (s, t), g in groups.items()
        ],
        "item_counts": item_counts,
        "vectors": {"subjects": subjects, "groups": scan.vectors} if scan else {},
        "held": [entry[:5] for entry in held],
        "flaky": scan.flaky if scan is not None else None,
    }


def held_values(run: Run) -> list[list]:
    """The run's scores holding a person's value, with what the judge said."""
    return [
        list(row)
        for row in Score.objects.filter(run_id=run.pk, override_value__isnull=False)
        .values_list(
            "pk", "item_id", "subject", "item__tags_text", "override_value", "status", "judge_value"
        )
        .order_by()
    ]


@dataclass
class Scan:
    vectors: list[list]  # per tag set: [tags_text, [[judge vector, human vector, n], ...] | None]
    held: list[list]  # as `held_values`
    flaky: int  # items with an epoch spread on some subject


def item_scan(run: Run, subjects: list[str]) -> Scan:
    """One pass over the run's scores in item order: per tag set, how many items share each
    (judge vector, human vector) pair (None where failed or not scored; a tag set with more
    than VECTOR_LIMIT distinct pairs keeps none), the held values and the flaky items."""
    index = {subject: i for i, subject in enumerate(subjects)}
    counts: dict[str, Counter[tuple[Vector, Vector]]] = defaultdict(Counter)
    held: list[list] = []
    flaky = 0
    rows = (
        Score.objects.filter(run_id=run.pk)
        .values_list(
            "pk",
            "item_id",
            "item__tags_text",
            "subject",
            "status",
            "judge_value",
            "override_value",
            "epoch_spread",
        )
        .order_by("item_id")
    )
    width = len(subjects)
    judge: list[float | None] = [None] * width
    human: list[float | None] = [None] * width
    current, tags, spread = None, "", False
    for pk, item_id, tags_text, subject, status, value, override, epochs in rows.iterator(
        chunk_size=5000
    ):
        if item_id != current:
            if current is not None:
                counts[tags][tuple(judge), tuple(human)] += 1
                flaky += spread
            current, tags, spread = item_id, tags_text, False
            judge, human = [None] * width, [None] * width
        at = index[subject]
        judge[at] = valued(status, value)
        human[at] = human_value(status, value, override)
        spread = spread or bool(epochs and epochs > 0)
        if override is not None:
            held.append([pk, item_id, subject, tags_text, float(override), status, value])
    if current is not None:
        counts[tags][tuple(judge), tuple(human)] += 1
        flaky += spread
    vectors = [
        [tags_text, [[list(j), list(h), n] for (j, h), n in counter.items()]]
        if len(counter) <= VECTOR_LIMIT
        else [tags_text, None]
        for tags_text, counter in counts.items()
    ]
    return Scan(vectors, held, flaky)


def _changed(summaries: list[RunSummary]) -> dict[int, tuple[set[int], frozenset[int]]]:
    """run id → its scores with an event after its summary's watermark, and those events."""
    if not summaries:
        return {}
    since = {s.run_id: s.event_id for s in summaries}
    scores: dict[int, set[int]] = defaultdict(set)
    events: dict[int, set[int]] = defaultdict(set)
    rows = ScoreEvent.objects.filter(
        pk__gt=min(since.values()), score__run_id__in=list(since)
    ).values_list("pk", "score__run_id", "score_id")
    for pk, run_id, score_id in rows.order_by():
        if pk > since[run_id]:
            scores[run_id].add(score_id)
            events[run_id].add(pk)
    return {run_id: (scores[run_id], frozenset(events[run_id])) for run_id in scores}


# (run id, summary state, events) already compared with the stored summary by this process and
# found counted: within MARGIN of a change, every read would otherwise lock and compare again.
_counted: Memo[bool] = Memo("counted changes", size=1024)


def catch_up(run_id: int, score_ids: set[int]) -> RunSummary | None:
    """Count people's changes of these scores into the run's stored summary (under its row
    lock: two processes catching up at once count each change once). Returns the summary as
    stored now, None if it is gone."""
    with transaction.atomic():
        summary = RunSummary.objects.select_for_update().filter(run_id=run_id).first()
        if summary is None:
            return None
        event_id = watermark()
        held = {entry[0]: entry for entry in summary.held}
        rows = list(
            Score.objects.filter(pk__in=score_ids, run_id=run_id).values_list(
                "pk",
                "item_id",
                "subject",
                "item__tags_text",
                "status",
                "judge_value",
                "override_value",
            )
        )
        groups = {(g[0], g[1]): g for g in summary.groups}
        moved: dict[int, str] = {}  # item id → tags_text of items whose human value moved
        for pk, item_id, subject, tags_text, status, value, override in rows:
            before = held[pk][4] if pk in held else valued(status, value)
            after = human_value(status, value, override)
            if before == after and (pk in held) == (override is not None):
                continue
            entry = groups.get((subject, tags_text))
            if entry is None:  # scored after the summary: the fingerprint catches up
                continue
            human = Dist.from_json(entry[4])
            group = Group(human=human, human_failed=entry[5], overridden=entry[6])
            _move(group, before, after)
            group.overridden += (override is not None) - (pk in held)
            entry[4], entry[5], entry[6] = human.to_json(), group.human_failed, group.overridden
            if override is not None:
                held[pk] = [pk, item_id, subject, tags_text, float(override)]
            else:
                held.pop(pk, None)
            moved[item_id] = tags_text
        before_held = {entry[0]: entry for entry in summary.held}
        if moved and summary.vectors.get("subjects"):
            _move_vectors(summary, run_id, moved, before_held, held)
        if not moved:
            if event_id > summary.event_id:
                RunSummary.objects.filter(run_id=run_id).update(event_id=event_id)
                summary.event_id = event_id
            return summary
        summary.held = list(held.values())
        summary.event_id = event_id
        summary.state = uuid.uuid4().hex
        summary.save(update_fields=["groups", "vectors", "held", "event_id", "state"])
        return summary


def _move_vectors(
    summary: RunSummary,
    run_id: int,
    moved: dict[int, str],
    before: dict[int, list],
    after: dict[int, list],
) -> None:
    """Each moved item's (judge, human) vector pair: from the one counted to the one now."""
    subjects: list[str] = summary.vectors["subjects"]
    width = len(subjects)
    pairs: dict[int, tuple[list, list, list]] = {}  # item → judge, human then, human now
    rows = Score.objects.filter(run_id=run_id, item_id__in=list(moved)).values_list(
        "pk", "item_id", "subject", "status", "judge_value"
    )
    for pk, item_id, subject, status, value in rows.order_by():
        if subject not in subjects:
            continue
        judge, then, now = pairs.setdefault(
            item_id, ([None] * width, [None] * width, [None] * width)
        )
        at = subjects.index(subject)
        judge[at] = valued(status, value)
        then[at] = before[pk][4] if pk in before else judge[at]
        now[at] = after[pk][4] if pk in after else judge[at]
    by_tags = {tags_text: entries for tags_text, entries in summary.vectors["groups"]}
    for item_id, (judge, then, now) in pairs.items():
        entries = by_tags.get(moved[item_id])
        if entries is None:
            continue  # over the limit
        counts = Counter({(tuple(j), tuple(h)): n for j, h, n in entries})
        if counts[tuple(judge), tuple(then)] <= 0:
            continue  # scored after the summary: the fingerprint catches up
        counts[tuple(judge), tuple(then)] -= 1
        counts[tuple(judge), tuple(now)] += 1
        entries[:] = [[list(j), list(h), n] for (j, h), n in counts.items() if n > 0]
    summary.vectors["groups"] = [[t, e] for t, e in by_tags.items()]


def stored(runs: Iterable[Run]) -> dict[int, RunSummary]:
    """Each run's summary, fresh: computed where missing or stale, people's changes since
    counted in."""
    runs = list(runs)
    found = {
        s.run_id: s
        for s in RunSummary.objects.filter(run_id__in=[r.pk for r in runs]).only(
            "run_id", "fingerprint", "event_id", "state"
        )
    }
    for run in runs:
        summary = found.get(run.pk)
        if summary is None or summary.fingerprint != fingerprint(run):
            found[run.pk] = compute(run)
    changed = _changed([found[r.pk] for r in runs])
    for run_id, (score_ids, events) in changed.items():
        if _counted.get((run_id, found[run_id].state, events)):
            continue
        try:
            summary = catch_up(run_id, score_ids)
        except ValueError:  # it counted a value it does not hold: never keep such numbers
            summary = compute(next(run for run in runs if run.pk == run_id))
        if summary is not None:
            found[run_id] = summary
            _counted.put((run_id, summary.state, events), True)
    _advance([s for s in found.values() if s.run_id not in changed])
    return found


def _advance(unchanged: list[RunSummary]) -> None:
    """Move the watermark of summaries that nothing changed in past other tasks' events, so
    the next read does not walk them again (only when far behind: it is a write)."""
    if not unchanged or last_event() - min(s.event_id for s in unchanged) < LAG:
        return
    mark = watermark()
    lagging = [s.run_id for s in unchanged if mark - s.event_id >= LAG]
    if lagging:
        RunSummary.objects.filter(run_id__in=lagging, event_id__lt=mark).update(event_id=mark)


def last_event() -> int:
    found = ScoreEvent.objects.order_by("-pk").values_list("pk").first()
    return found[0] if found else 0
    return found


def load(runs: Iterable[Run]) -> dict[int, RunScores]:
    """The scores of each run, from fresh stored summaries (read and parsed once per process
    and state: a warm board reads 20 small rows' heads, not their vectors)."""
    runs = list(runs)
    found = stored(runs)
    keys = {run.pk: (run.pk, found[run.pk].fingerprint, found[run.pk].state) for run in runs}
    result = {run_id: got for run_id, key in keys.items() if (got := _parsed.get(key))}
    missing = [run_id for run_id in keys if run_id not in result]
    rows = RunSummary.objects.filter(run_id__in=missing).only(
        "run_id", "fingerprint", "state", "groups", "item_counts", "vectors", "flaky"
    )
    for summary in rows if missing else []:
        if (summary.run_id, summary.fingerprint, summary.state) != keys[summary.run_id]:
            summary = found[summary.run_id]  # moved on meanwhile: the one read above stays
        result[summary.run_id] = _parsed.put(keys[summary.run_id], parsed(summary))
    return result


_parsed: Memo[RunScores] = Memo("run summaries")


def parsed(summary: RunSummary) -> RunScores:
    groups = {}
    for subject, tags_text, judge, failed, human, human_failed, overridden in summary.groups:
        groups[subject, tags_text] = Group(
            Dist.from_json(judge), failed, Dist.from_json(human), human_failed, overridden
        )
    vectors: dict[str, Vectors | None] = {}
    for tags_text, entries in summary.vectors.get("groups", []):
        if entries is None:
            vectors[tags_text] = None
            continue
        judge_counts: Counter[Vector] = Counter()
        human_counts: Counter[Vector] = Counter()
        for j, h, n in entries:
            judge_counts[tuple(j)] += n
            human_counts[tuple(h)] += n
        vectors[tags_text] = Vectors(judge=judge_counts, human=human_counts)
    return RunScores(
        summary.run_id,
        groups,
        dict(summary.item_counts),
        vector_subjects=list(summary.vectors.get("subjects", [])),
        vectors=vectors,
        state=summary.state,
        flaky=summary.flaky,
    )


def held_of(run_id: int, state: str) -> list[Any] | None:
    """The run's scores holding a person's value as its summary in `state` counts them,
    [[score id, item id, subject, tags_text, value], ...]; None if the summary moved on."""
    row = RunSummary.objects.filter(run_id=run_id, state=state).values_list("held").first()
    return row[0] if row is not None else None


def vectors_of(run_scores: RunScores, mode: str, tag: str | None = None) -> Counter[Vector] | None:
    """The items' value vectors (of the items carrying `tag`), or None if a tag set kept none."""
    out: Counter[Vector] = Counter()
    for tags_text, counts in run_scores.vectors.items():
        if tag is not None and f"|{tag}|" not in tags_text:
            continue
        if counts is None:
            return None
        out.update(counts.human if mode == "human" else counts.judge)
    return +out  # without vectors counted down to zero


def merged(run_scores: RunScores, subject: str, tag: str | None = None) -> tuple[Group, int]:
    """One subject's scores over all items (or the items carrying `tag`), and the item count."""
    out = Group()
    items = 0
    for tags_text, count in run_scores.item_counts.items():
        if tag is None or f"|{tag}|" in tags_text:
            items += count
    for (name, tags_text), group in run_scores.groups.items():
        if name != subject or (tag is not None and f"|{tag}|" not in tags_text):
            continue
        out.judge.merge(group.judge)
        out.judge_failed += group.judge_failed
        out.human.merge(group.human)
        out.human_failed += group.human_failed
        out.overridden += group.overridden
    return out, items


def tags_of(scores: Iterable[RunScores]) -> list[str]:
    counts: dict[str, int] = defaultdict(int)
    for run_scores in scores:
        for tags_text, count in run_scores.item_counts.items():
            for tag in tags_text.strip("|").split("|"):
                if tag:
                    counts[tag] += count
    return sorted(counts)
