"""Each model's value per item, as numpy arrays in its dataset's item order, and the items that
several models have in common: what "every pair" and "common items only" are computed from.

Memoised per process (apps.leaderboards.memo), least recently used first out. A dataset's items never change once a run
used it (Frozen), so they are cached by the dataset; a run's values by the state of its results
(and, for human-corrected values, by the last review event: the judge's values are kept and the
current overrides laid over them, one small query).
"""

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction

from apps.datasets.models import Dataset, Item
from apps.judges.models import RunItemQuerySet, Score, ScoreEvent, TaskJudging, judge_of
from apps.leaderboards import summaries
from apps.leaderboards.compare import natural_key
from apps.leaderboards.epochs import (
    Reduction,
    epoch_matrix,
    majority_rows,
    override_value,
    pass_values,
    passing,
)
from apps.leaderboards.memo import Memo, review_state, run_state
from apps.leaderboards.models import StoredArrays
from apps.leaderboards.subjects import subject_infos
from apps.runs.models import Run


@dataclass(frozen=True)
class DatasetItems:
    ids: np.ndarray  # item ids (int64) in position order
    keys: np.ndarray  # item keys in position order
    tags: np.ndarray  # each item's tags as "|a|b|"
    counted: np.ndarray  # positions in the order people count keys (compare.natural_key)

    @property
    def index(self) -> dict[int, int]:
        """item id → position in the arrays (made on first use: 100k ids take 20 ms)."""
        if (found := self.__dict__.get("_index")) is None:
            found = {pk: at for at, pk in enumerate(self.ids.tolist())}
            object.__setattr__(self, "_index", found)
        return found

    def tagged(self, tag: str | None) -> np.ndarray:
        """`tag_mask` of every item, kept with the items (a board asks for each tag again)."""
        masks = self.__dict__.setdefault("_tagged", {})
        if (found := masks.get(tag)) is None:
            found = masks[tag] = tag_mask(self.tags, tag)
            found.flags.writeable = False  # shared by every caller
        return found


@dataclass(frozen=True)
class JudgeArrays:
    """A run's judge values per subject in its dataset's item order (NaN: failed or no
    score), and which items have a score of that subject at all."""

    values: dict[str, np.ndarray]
    scored: dict[str, np.ndarray]  # bool
    # With several epochs: per subject what reductions other than the mean start from.
    epochs: dict[str, "EpochArrays"] = field(default_factory=dict)


@dataclass(frozen=True)
class EpochArrays:
    """One subject's epochs per item, judge-only: the majority vote (NaN: failed or no
    score), the epochs with a value and the passing ones (apps.leaderboards.epochs)."""

    majority: np.ndarray
    counted: np.ndarray
    passed: np.ndarray


def _dataset_key(dataset: Dataset) -> tuple:
    # created_at keeps a reused primary key (a new database, a rolled-back test) apart.
    return (dataset.pk, dataset.created_at)


_datasets: Memo["DatasetItems"] = Memo("dataset items")
_judged: Memo[JudgeArrays] = Memo("judge values")
_values: Memo[dict[str, np.ndarray]] = Memo("item values")
_common: Memo[list[np.ndarray]] = Memo("common positions")
_flaky: Memo[int] = Memo("flaky counts")
_doubtful: Memo[int] = Memo("doubtful counts")


def _dump(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]  # names, not options
    return buffer.getvalue()


def _load(data: bytes | memoryview) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as found:
        return {name: found[name] for name in found.files}


def _stored(
    owner: Dataset | Run, state: str, keep: bool, compute: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """The arrays stored for `owner` (a dataset or a run) in `state`, else computed and, if
    `keep`, stored (replacing an older state's)."""
    whose: dict[str, Any] = {"dataset": owner} if isinstance(owner, Dataset) else {"run": owner}
    row = StoredArrays.objects.filter(**whose).values_list("state", "data").first()
    if row is not None and row[0] == state:
        return _load(row[1])
    arrays = compute()
    if keep:
        try:
            with transaction.atomic():  # another process storing the same at once: theirs stays
                StoredArrays.objects.update_or_create(
                    **whose, defaults={"state": state, "data": _dump(arrays)}
                )
        except IntegrityError:
            pass
    return arrays


def _dataset_arrays(dataset: Dataset) -> dict[str, np.ndarray]:
    rows = list(
        Item.objects.filter(dataset_id=dataset.pk)
        .order_by("position")
        .values_list("pk", "key", "tags_text")
    )
    keys = [k for _, k, _ in rows]
    counted = sorted(range(len(keys)), key=lambda at: natural_key(keys[at]))
    return {
        "ids": np.fromiter((pk for pk, _, _ in rows), dtype=np.int64, count=len(rows)),
        "keys": _texts(keys),
        "tags": _texts([t or "" for _, _, t in rows]),
        "counted": np.array(counted, dtype=np.int64),
    }


def _texts(texts: list[str]) -> np.ndarray:
    """Strings as the bytes of their JSON list: numpy's own strings are as wide as the longest
    (100k keys beside one of 255 characters: 100 MB) and drop a trailing NUL."""
    return np.frombuffer(json.dumps(texts).encode(), dtype=np.uint8)


def _strings(data: np.ndarray) -> np.ndarray:
    return np.array(json.loads(data.tobytes()), dtype=object)


def dataset_items(dataset: Dataset) -> DatasetItems:
    """The dataset's items as arrays, stored once a run has used the dataset: its items never
    change while a run uses it (Frozen), so its oldest run names the state. Should every run
    be deleted and the items edited, the next run is another oldest run."""
    key = _dataset_key(dataset)
    if (cached := _datasets.get(key)) is not None:
        return cached
    oldest = dataset.runs.order_by("pk").values_list("pk", flat=True).first()
    state = f"run {oldest}"
    arrays = _stored(dataset, state, oldest is not None, lambda: _dataset_arrays(dataset))
    found = DatasetItems(
        ids=arrays["ids"],
        keys=_strings(arrays["keys"]),
        tags=_strings(arrays["tags"]),
        counted=arrays["counted"],
    )
    return _datasets.put(key, found)


def _judge_values(run: Run) -> dict[str, np.ndarray]:
    """Arrays "subjects", then per subject i "v{i}" (values) and "s{i}" (scored); for a run
    with several epochs also "m{i}" (the majority vote of each item's epochs), "n{i}" (its
    epochs with a value) and "c{i}" (the passing ones): what majority vote and pass@k need,
    so that a board never reads every score's epoch values (#33.2)."""
    items = dataset_items(run.dataset)
    values: dict[str, np.ndarray] = {}
    scored: dict[str, np.ndarray] = {}
    index = items.index
    several = run.judged_epochs > 1
    rows = Score.objects.filter(run_id=run.pk).values_list(
        "subject", "item_id", "status", "judge_value", *(["epoch_values"] if several else [])
    )
    epochs: dict[str, tuple[list[int], list[list]]] = {}  # subject → positions, epoch values
    for subject, item_id, status, value, *more in rows.iterator(chunk_size=10000):
        column = values.get(subject)
        if column is None:
            column = values[subject] = np.full(len(items.keys), np.nan)
            scored[subject] = np.zeros(len(items.keys), dtype=bool)
            epochs[subject] = ([], [])
        if (at := index.get(item_id)) is None:
            continue
        scored[subject][at] = True
        if status == Score.Status.OK and value is not None:
            column[at] = value
            if several:
                epochs[subject][0].append(at)
                epochs[subject][1].append(more[0] or [value])
    subjects = list(values)
    arrays = {"subjects": _texts(subjects)}
    scales = _scales(run) if several else {}
    for i, subject in enumerate(subjects):
        arrays[f"v{i}"], arrays[f"s{i}"] = values[subject], scored[subject]
        if several:
            worst, best = scales.get(subject, (None, None))
            positions, rows_of = np.array(epochs[subject][0], dtype=np.int64), epochs[subject][1]
            matrix = epoch_matrix(rows_of)
            arrays[f"m{i}"] = np.full(len(items.keys), np.nan)
            arrays[f"m{i}"][positions] = majority_rows(matrix, worst, best)
            arrays[f"n{i}"] = np.zeros(len(items.keys), dtype=np.int16)
            arrays[f"n{i}"][positions] = (~np.isnan(matrix)).sum(axis=1) if rows_of else 0
            arrays[f"c{i}"] = np.zeros(len(items.keys), dtype=np.int16)
            arrays[f"c{i}"][positions] = passing(matrix, best) if rows_of else 0
    return arrays


def _scales(run: Run) -> dict[str, tuple[float | None, float | None]]:
    """subject → (worst, best) of the run's judge: what majority vote and pass@k need."""
    return {info.name: (info.worst, info.best) for info in subject_infos(judge_of(run))}


# The stored layout of a run's arrays (bump to have every stored one computed again): 2 added
# the epochs' majority vote and pass counts.
LAYOUT = "arrays 2"


def judge_arrays(run: Run) -> JudgeArrays:
    """The run's judge values per item, per state of its results; stored once it has ended."""
    state = f"{run_state(run)}|{LAYOUT}"
    key = (run.pk, state)
    if (cached := _judged.get(key)) is not None:
        return cached
    arrays = _stored(run, state, run.is_terminal, lambda: _judge_values(run))
    subjects = json.loads(arrays["subjects"].tobytes())
    found = JudgeArrays(
        values={s: arrays[f"v{i}"] for i, s in enumerate(subjects)},
        scored={s: arrays[f"s{i}"] for i, s in enumerate(subjects)},
        epochs={
            s: EpochArrays(arrays[f"m{i}"], arrays[f"n{i}"], arrays[f"c{i}"])
            for i, s in enumerate(subjects)
            if f"m{i}" in arrays
        },
    )
    return _judged.put(key, found)


def tag_mask(tags: np.ndarray, tag: str | None) -> np.ndarray:
    """Which of these items (their "|a|b|" tags) carry `tag`; all of them for no tag."""
    if tag is None:
        return np.ones(len(tags), dtype=bool)
    return np.array([f"|{tag}|" in text for text in tags], dtype=bool)


MEAN = Reduction()


def item_values(
    run: Run,
    mode: str,
    last_event: int | None = None,
    reduction: Reduction = MEAN,
    state: str | None = None,
) -> dict[str, np.ndarray]:
    """subject → each item's value in `mode`, in the dataset's item order; NaN where the item
    failed or has no score. Subjects with no score at all are absent. `last_event` (the last
    review event, read once per board by the caller) keys the human values; or `state`, the
    run's summary state (summaries.RunScores.state), which moves only with this run's human
    values, and whose held values are read instead of the scores. `reduction` says how an
    item's epochs make its value (the mean unless asked: apps.leaderboards.epochs)."""
    if not reduction.is_mean:
        return _reduced_values(run, mode, last_event, reduction, state)
    judged = judge_arrays(run).values
    if mode != "human":
        return judged
    if state is not None:
        found = _values.get((run.pk, run_state(run), "held", state))
        if found is not None:
            return found
        held = summaries.held_of(run.pk, state)
        if held is not None:
            index = dataset_items(run.dataset).index
            human = {subject: column.copy() for subject, column in judged.items()}
            for _, item_id, subject, _, value in held:
                if subject in human and item_id in index:
                    human[subject][index[item_id]] = value
            return _values.put((run.pk, run_state(run), "held", state), human)
    if last_event is None:
        last_event = review_state()
    human_key = (run.pk, run_state(run), "human", last_event)
    if (cached := _values.get(human_key)) is not None:
        return cached
    index = dataset_items(run.dataset).index
    human = {subject: column.copy() for subject, column in judged.items()}
    # Only scores with a value-setting event can differ from the judge now.
    overridden = Score.objects.filter(
        run_id=run.pk,
        pk__in=ScoreEvent.objects.filter(kind__in=ScoreEvent.SETS_VALUE).values("score_id"),
        override_value__isnull=False,
    ).values_list("subject", "item_id", "override_value")
    for subject, item_id, value in overridden:
        if subject in human and item_id in index:
            human[subject][index[item_id]] = value
    return _values.put(human_key, human)


def _reduced_values(
    run: Run, mode: str, last_event: int | None, reduction: Reduction, state: str | None = None
) -> dict[str, np.ndarray]:
    """item_values under majority vote or pass@k, from the run's stored epoch arrays (a run of
    one epoch has its judge value as the only one) and, for human values, the values people
    set: those its summary in `state` holds, else the scores' (keyed by `last_event`)."""
    held = None
    if mode == "human" and state is not None:
        key: tuple = (run.pk, run_state(run), mode, reduction, "held", state)
        if (cached := _values.get(key)) is not None:
            return cached
        held = summaries.held_of(run.pk, state)
    if held is None:
        if mode == "human" and last_event is None:
            last_event = review_state()
        key = (run.pk, run_state(run), mode, reduction, last_event if mode == "human" else None)
        if (cached := _values.get(key)) is not None:
            return cached
    judged = judge_arrays(run)
    scales = _scales(run)
    out = {
        subject: reduced_column(judged, subject, reduction, *scales.get(subject, (None, None)))
        for subject in judged.values
    }
    if mode == "human":
        index = dataset_items(run.dataset).index
        people = (
            [(subject, item_id, value) for _, item_id, subject, _, value in held]
            if held is not None
            else _overrides(run)
        )
        for subject, item_id, value in people:
            if subject in out and (at := index.get(item_id)) is not None:
                worst, best = scales.get(subject, (None, None))
                out[subject][at] = override_value(value, reduction, worst, best)
    return _values.put(key, out)


def reduced_column(
    judged: JudgeArrays,
    subject: str,
    reduction: Reduction,
    worst: float | None,
    best: float | None,
) -> np.ndarray:
    """One subject's judge-only values per item under `reduction` (a new array)."""
    values = judged.values[subject]
    found = judged.epochs.get(subject)
    if reduction.how == "majority":
        return found.majority.copy() if found is not None else values.copy()
    if found is not None:
        counted, passed = found.counted, found.passed
    else:  # one epoch: the judge value is the only one
        counted = (~np.isnan(values)).astype(np.int64)
        passed = (
            (np.abs(values - best) <= 1e-9).astype(np.int64)
            if best is not None
            else np.zeros(len(values), dtype=np.int64)
        )
    out = pass_values(counted.astype(np.int64), passed.astype(np.int64), reduction.k, worst, best)
    out[np.isnan(values)] = np.nan  # failed or not scored: no value, whatever the epochs
    return out


def _overrides(run: Run) -> list[tuple[str, int, float]]:
    """The run's scores holding a person's value: (subject, item id, value)."""
    # As summaries.human_overlay: only scores with a value-setting event can differ now.
    rows = Score.objects.filter(
        run_id=run.pk,
        pk__in=ScoreEvent.objects.filter(kind__in=ScoreEvent.SETS_VALUE).values("score_id"),
        override_value__isnull=False,
    ).values_list("subject", "item_id", "override_value")
    return [(subject, item_id, value) for subject, item_id, value in rows if value is not None]


def flaky_count(run: Run) -> int:
    """Items whose epochs disagree on some subject (by the judge), per state of the results."""
    flaky = Score.objects.filter(run_id=run.pk, epoch_spread__gt=0)
    return _flaky.get_or_compute(
        (run.pk, run_state(run)), lambda: flaky.values("item_id").distinct().count()
    )


def doubtful_count(run: Run, last_event: int) -> int:
    """Items the task's rule sends to people that nobody has reviewed yet (#14.4), per state
    of the results, the reviews (`review_state`) and the rule."""
    judging = TaskJudging.of(run.task_id)
    rule = (judging.doubt_spread, judging.doubt_repaired, judging.doubt_confidence)
    return _doubtful.get_or_compute(
        (run.pk, run_state(run), last_event, *rule),
        lambda: RunItemQuerySet.of(run).doubtful().unreviewed().count(),
    )


def common_positions(datasets: Sequence[Dataset]) -> list[np.ndarray]:
    """For each dataset, the positions of the item keys that every one of them has, in the
    first dataset's order: arrays taken at these positions line up item by item."""
    key = tuple(_dataset_key(d) for d in datasets)
    if (cached := _common.get(key)) is not None:
        return cached
    items = [dataset_items(d) for d in datasets]
    if all(k == key[0] for k in key):
        everything = np.arange(len(items[0].keys))
        positions = [everything for _ in items]
    else:
        shared = set(items[0].keys.tolist())
        for other in items[1:]:
            shared &= set(other.keys.tolist())
        order = [k for k in items[0].keys.tolist() if k in shared]
        positions = []
        for found in items:
            where = {k: i for i, k in enumerate(found.keys.tolist())}
            positions.append(np.array([where[k] for k in order], dtype=np.int64))
    return _common.put(key, positions)
