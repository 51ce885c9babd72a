"""The review policy's random sample: "review a random N % of items", drawn with a recorded seed.

Only reviews on this sample feed the judge-corrected (prediction-powered) board: a sample chosen
by chance is what makes its correction unbiased, while items served for being doubtful, failed
or flaky are chosen for their judge values and would bias it.

Each item's draw is a uniform number from a hash of the seed and the item's key (BLAKE2b, the
same on every machine and in every process), and the sample is the ceil(N % × items) items with
the smallest draws: a simple random sample of the dataset, and the same items in another
version of the dataset wherever the keys are the same (so paired comparisons of models on two
versions line up). The queue serves the sample in the order of the draws, so a sample reviewed
only in part is still a random part of it.

The active design (#31.2) draws item i with its own probability π_i, larger where the judge is
less sure (apps.leaderboards.active weights each review by 1/π_i, so the board stays
unbiased): item i is in the sample when its draw is below π_i. The probabilities and draws are
recorded (SampleInclusion) when the sample is first needed, from the judge's values then. The
queue serves the sample in the order of draw / π_i: the items before any point of that order
are exactly an active sample with probabilities c·π_i (c the ratio there), so a sample
reviewed only in part, front to back, is still an active sample, with known probabilities.
"""

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apps.datasets.models import Dataset, Item
from apps.judges.models import Score, judge_of
from apps.review.models import ReviewPolicy, SampleInclusion
from apps.runs.models import Run

# Share of each item's probability spread evenly over all items in the active design: a floor
# that keeps every π_i well above 0 (a tiny π_i would make one review weigh as much as
# thousands of items, and an uncertainty measure wrong about an item must not leave it out).
UNIFORM_SHARE = 0.2


def draws(keys: Sequence[str], seed: int) -> np.ndarray:
    """Each key's uniform draw in [0, 1) for this seed."""
    out = np.empty(len(keys), dtype=float)
    prefix = f"evalsite-review-sample:{seed}:".encode()
    for i, key in enumerate(keys):
        digest = hashlib.blake2b(prefix + str(key).encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "big") / 2**64
    return out


def sample_size(items: int, percent: float) -> int:
    return min(items, math.ceil(items * percent / 100 - 1e-9))


def sample_mask(keys: Sequence[str], percent: float, seed: int) -> np.ndarray:
    """Which of these items (by key, in any order) are in the sample."""
    drawn = draws(keys, seed)
    chosen = np.zeros(len(keys), dtype=bool)
    # Ties (equal draws) are as good as impossible; a stable sort keeps them deterministic.
    chosen[np.argsort(drawn, kind="stable")[: sample_size(len(keys), percent)]] = True
    return chosen


def sample_order(keys: Sequence[str], percent: float, seed: int) -> list[int]:
    """Positions (into `keys`) of the sampled items in the order the queue serves them."""
    drawn = draws(keys, seed)
    return [int(i) for i in np.argsort(drawn, kind="stable")[: sample_size(len(keys), percent)]]


def inclusion_probabilities(
    uncertainty: np.ndarray, budget: float, uniform_share: float = UNIFORM_SHARE
) -> np.ndarray:
    """Each item's probability of being drawn, proportional to its uncertainty (≥ 0) mixed
    with a uniform share, averaging to `budget` (the expected share of items reviewed, 0–1).
    A probability that would pass 1 is held at 1 and the rest scaled up to keep the budget."""
    u = np.nan_to_num(np.asarray(uncertainty, dtype=float), nan=0.0).clip(min=0.0)
    size = len(u)
    if size == 0:
        return u
    budget = float(np.clip(budget, 0.0, 1.0))
    weight = u / u.mean() if u.sum() > 0 else np.ones(size)
    weight = (1 - uniform_share) * weight + uniform_share
    pi = np.zeros(size)
    fixed = np.zeros(size, dtype=bool)
    target = budget * size
    for _ in range(size):  # each pass fixes at least one item at 1, or ends
        left = target - fixed.sum()
        free = weight[~fixed]
        pi[~fixed] = free * left / free.sum() if free.sum() > 0 else 0.0
        over = ~fixed & (pi >= 1.0)
        if not over.any():
            break
        pi[over] = 1.0
        fixed |= over
    return pi.clip(0.0, 1.0)


@dataclass(frozen=True)
class ActiveSample:
    """A dataset's recorded active sample, by item id."""

    probability: dict[int, float]
    draw: dict[int, float]

    def ratio(self, item_id: int) -> float:
        """The item's place in the serving order: in the sample when below 1."""
        p = self.probability.get(item_id, 0.0)
        return self.draw[item_id] / p if p > 0 else math.inf

    def order(self) -> list[int]:
        """The sampled items' ids in the order the queue serves them."""
        inside = [pk for pk in self.probability if self.ratio(pk) < 1]
        return sorted(inside, key=lambda pk: (self.ratio(pk), pk))


def item_uncertainty(task_id: int, dataset_id: int) -> dict[int, float]:
    """item id → how unsure the task's judges are of it, 0–1: over its scores on this
    dataset, the disagreement between rounds and how near the value is to the middle of the
    subject's range (both as shares of the range), the larger of the two, averaged."""
    total: dict[int, float] = {}
    count: dict[int, int] = {}
    runs = Run.objects.judging().filter(task_id=task_id, dataset_id=dataset_id)
    for run in runs.select_related("judged_with__judge"):
        ranges = {s["name"]: (float(s["min"]), float(s["max"])) for s in judge_of(run).subjects}
        rows = Score.objects.filter(run_id=run.pk, status=Score.Status.OK).values_list(
            "item_id", "subject", "judge_value", "spread"
        )
        for item_id, subject, value, spread in rows.iterator(chunk_size=5000):
            low, high = ranges.get(subject, (0.0, 1.0))
            width = (high - low) or 1.0
            near = 1 - min(1.0, abs((value or 0.0) - (low + high) / 2) / (width / 2))
            u = max(min(1.0, (spread or 0.0) / width), near)
            total[item_id] = total.get(item_id, 0.0) + u
            count[item_id] = count.get(item_id, 0) + 1
    return {pk: total[pk] / count[pk] for pk in total}


def active_sample(policy: ReviewPolicy, dataset: Dataset) -> ActiveSample:
    """The dataset's active sample under the policy's percent and seed: read from its record,
    or drawn now (from the judges' values so far) and recorded. Items the judges have not
    scored get the average uncertainty. Safe to run twice: the record is unique per draw."""
    percent, seed = policy.sample_percent or 0, policy.sample_seed
    recorded = SampleInclusion.objects.filter(dataset=dataset, percent=percent, seed=seed)
    rows = list(recorded.values_list("item_id", "probability", "draw"))
    if not rows:
        items = list(
            Item.objects.filter(dataset=dataset).order_by("position").values_list("pk", "key")
        )
        known = item_uncertainty(policy.task_id, dataset.pk)
        fill = float(np.mean(list(known.values()))) if known else 0.0
        uncertainty = np.array([known.get(pk, fill) for pk, _ in items])
        probability = inclusion_probabilities(uncertainty, percent / 100)
        drawn = draws([key for _, key in items], seed)
        SampleInclusion.objects.bulk_create(
            [
                SampleInclusion(
                    dataset=dataset,
                    item_id=pk,
                    percent=percent,
                    seed=seed,
                    probability=float(probability[i]),
                    draw=float(drawn[i]),
                    uncertainty=float(uncertainty[i]),
                )
                for i, (pk, _) in enumerate(items)
            ],
            ignore_conflicts=True,
            batch_size=2000,
        )
        rows = list(recorded.values_list("item_id", "probability", "draw"))
    return ActiveSample(probability={pk: p for pk, p, _ in rows}, draw={pk: d for pk, _, d in rows})
