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
"""

import hashlib
import math
from collections.abc import Sequence

import numpy as np


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
