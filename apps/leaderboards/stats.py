"""Statistics for boards, comparisons and agreement: means with CIs, paired tests, Cohen's κ.

Confidence intervals of a mean (#29.1). Where the values have a declared range (every subject
with a min and max, a difference of two such values, the 0–100 overall) the interval is one
that covers at the edges, where a bootstrap collapses (30 of 30 right gave `100 [100, 100]`,
and at a true 95 % on 10–50 items the bootstrap's "95 %" covered 64–66 % of the time):

- values only at the two ends of the range (right/wrong, MCQ 0/100): Clopper–Pearson's exact
  binomial interval (statsmodels' proportion_confint(method="beta"));
- other values in a range: the bound of Gaffke (2005) / Learned-Miller & Thomas (2019), which
  is Clopper–Pearson's generalisation to any bounded variable: the 2.5 % point of the mean
  under Dirichlet weights on the observed values plus one extra observation at the range's
  low end, and the 97.5 % point with the extra observation at its high end (a seeded
  Monte Carlo of BOUNDED_DRAWS draws). On right/wrong values it is exactly Clopper–Pearson;
  with many items it approaches the bootstrap.

Without a range, a percentile bootstrap with a fixed seed, so a page, its CSV and the CLI
always print the same interval. The bootstrap resamples items; when a sample takes few
distinct values (rubric scores 1–5, MCQ 0/100, differences of those) resampling n items is
the same as drawing the counts of each distinct value from a multinomial(n, observed
shares), which costs O(resamples × distinct values) instead of O(resamples × n) and needs
only the histogram, which SQL can aggregate. Continuous values with more than HIST_LIMIT
distinct values (so n > HIST_LIMIT) use the normal approximation, which the bootstrap
approaches at that size anyway; every interval says which method made it.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# scipy.stats is imported where it is used, not here: it costs ~0.5 s of CPU to import, and this
# module is imported at start-up by every process (leaderboards' ready() → jobs → summaries),
# while only a board's intervals and tests call it; summaries, all a work horse builds here,
# need numpy alone. Each `manage.py` command and worker started paid it (#26.7).

SEED = 20240607
RESAMPLES = 1000
LEVEL = 0.95
HIST_LIMIT = 200  # most distinct values a histogram keeps before falling back to moments
Z95 = 1.959963984540054


BOUNDED_DRAWS = 4000

METHODS = {
    "clopper-pearson": "Clopper–Pearson (exact binomial)",
    "bounded": "bounded-mean bound (Gaffke; Learned-Miller & Thomas)",
    "bootstrap": "percentile bootstrap",
    "normal": "normal approximation",
    "clustered": "cluster-robust normal approximation",
    "t": "t interval",
    "exact": "a single value, no interval",
}


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    # "clopper-pearson" | "bounded" | "bootstrap" | "normal" | "clustered" | "exact" (a
    # single value without a range to bound it): a key of METHODS
    method: str

    @property
    def method_label(self) -> str:
        return METHODS.get(self.method, self.method)


class Dist:
    """A sample of numbers kept as count, sum, sum of squares and (while small) a histogram.

    Values can be added and removed again, so a stored summary can take a reviewer's
    override into account without going back to every score.
    """

    __slots__ = ("hist", "n", "sumsq", "total")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0
        self.sumsq = 0.0
        self.hist: dict[float, int] | None = {}

    # ---- building ----------------------------------------------------------------------
    def add(self, value: float, count: int = 1) -> None:
        value = float(value)
        self.n += count
        self.total += value * count
        self.sumsq += value * value * count
        if self.hist is not None:
            self.hist[value] = self.hist.get(value, 0) + count
            if len(self.hist) > HIST_LIMIT:
                self.hist = None

    def remove(self, value: float, count: int = 1) -> None:
        value = float(value)
        self.n -= count
        self.total -= value * count
        self.sumsq -= value * value * count
        if self.hist is not None:
            left = self.hist.get(value, 0) - count
            if left < 0:
                raise ValueError(f"{value} is not in this sample {count} time(s).")
            if left:
                self.hist[value] = left
            else:
                del self.hist[value]

    def merge(self, other: "Dist") -> None:
        self.n += other.n
        self.total += other.total
        self.sumsq += other.sumsq
        if self.hist is None or other.hist is None:
            self.hist = None
            return
        for value, count in other.hist.items():
            self.hist[value] = self.hist.get(value, 0) + count
        if len(self.hist) > HIST_LIMIT:
            self.hist = None

    def copy(self) -> "Dist":
        dist = Dist()
        dist.n, dist.total, dist.sumsq = self.n, self.total, self.sumsq
        dist.hist = dict(self.hist) if self.hist is not None else None
        return dist

    @classmethod
    def of(cls, values: Iterable[float]) -> "Dist":
        dist = cls()
        for value in values:
            dist.add(value)
        return dist

    @classmethod
    def of_array(cls, values: np.ndarray) -> "Dist":
        """The same as `of`, for many values at once (one pass per distinct value)."""
        dist = cls()
        distinct, counts = np.unique(values, return_counts=True)
        if len(distinct) > HIST_LIMIT:
            dist.n = int(values.size)
            dist.total = float(values.sum())
            dist.sumsq = float((values * values).sum())
            dist.hist = None
            return dist
        for value, count in zip(distinct.tolist(), counts.tolist(), strict=True):
            dist.add(value, count)
        return dist

    # ---- storing -----------------------------------------------------------------------
    def to_json(self) -> list[Any]:
        hist = sorted(self.hist.items()) if self.hist is not None else None
        return [self.n, self.total, self.sumsq, hist]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> "Dist":
        dist = cls()
        dist.n, dist.total, dist.sumsq = int(data[0]), float(data[1]), float(data[2])
        dist.hist = {float(v): int(c) for v, c in data[3]} if data[3] is not None else None
        return dist

    # ---- reading -----------------------------------------------------------------------
    @property
    def mean(self) -> float | None:
        if self.n <= 0:
            return None
        if self.hist is not None:  # exact from the histogram, free of add/remove rounding
            return sum(v * c for v, c in self.hist.items()) / self.n
        return self.total / self.n

    @property
    def variance(self) -> float | None:
        """Sample variance (n - 1)."""
        if self.n < 2:
            return None
        mean = self.total / self.n
        return max((self.sumsq - self.n * mean * mean) / (self.n - 1), 0.0)

    def ci(self, low: float | None = None, high: float | None = None) -> Interval | None:
        """95 % CI of the mean; `low` and `high` are the values' declared range, if any."""
        if self.n <= 0:
            return None
        if self.hist is not None:
            values = np.array(sorted(self.hist), dtype=float)
            counts = np.array([self.hist[v] for v in sorted(self.hist)], dtype=np.int64)
            if low is not None and high is not None and high > low:
                return bounded_ci(values, counts, low, high)
            return histogram_bootstrap_ci(values, counts)
        return clipped(normal_ci(self.n, self.total / self.n, self.variance or 0.0), low, high)


def clipped(ci: Interval, low: float | None, high: float | None) -> Interval:
    """An interval kept inside the values' range (a normal approximation can leave it)."""
    if low is None or high is None:
        return ci
    return Interval(max(ci.low, low), min(ci.high, high), ci.method)


def clopper_pearson(successes: int, n: int) -> tuple[float, float]:
    """The exact binomial 95 % interval of a proportion (Clopper & Pearson, 1934)."""
    from scipy import stats as scipy_stats

    tail = (1 - LEVEL) / 2
    low = 0.0 if successes == 0 else scipy_stats.beta.ppf(tail, successes, n - successes + 1)
    high = 1.0 if successes == n else scipy_stats.beta.ppf(1 - tail, successes + 1, n - successes)
    return float(low), float(high)


def bounded_ci(
    values: np.ndarray,
    counts: np.ndarray,
    low: float,
    high: float,
    draws: int = BOUNDED_DRAWS,
    seed: int = SEED,
) -> Interval:
    """95 % CI of the mean of values that lie in [low, high], given as distinct values and
    counts (see the module's docstring). A value outside the range widens the range to it."""
    low, high = min(low, float(values.min())), max(high, float(values.max()))
    n = int(counts.sum())
    at_ends = np.isin(values, (low, high))
    if at_ends.all():
        successes = int(counts[values == high].sum())
        share_low, share_high = clopper_pearson(successes, n)
        span = high - low
        return Interval(low + share_low * span, low + share_high * span, "clopper-pearson")
    # Dirichlet weights as normalised gamma draws: the observed values with their counts, and
    # the one extra observation (weight shape 1) placed at the low end for the lower bound and
    # at the high end for the upper one, on the same draws.
    rng = np.random.default_rng(seed)
    shapes = np.append(counts.astype(float), 1.0)
    weights = rng.gamma(shapes, size=(draws, shapes.size))
    weights /= weights.sum(axis=1, keepdims=True)
    observed = weights[:, :-1] @ values
    tail = (1 - LEVEL) / 2
    lower = float(np.quantile(observed + weights[:, -1] * low, tail))
    upper = float(np.quantile(observed + weights[:, -1] * high, 1 - tail))
    return Interval(lower, upper, "bounded")


def histogram_bootstrap_ci(
    values: np.ndarray, counts: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """Percentile bootstrap CI of the mean of a sample given as distinct values and counts."""
    n = int(counts.sum())
    if len(values) == 1:
        return Interval(float(values[0]), float(values[0]), "exact")
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(n, counts / n, size=resamples)  # (resamples, distinct)
    means = drawn @ values / n
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(low), float(high), "bootstrap")


def resampled_column_means(
    vectors: np.ndarray, counts: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED
) -> np.ndarray:
    """Bootstrap of items given as distinct vectors (rows; NaN where an item has no value) and
    how many items share each: per resample, each column's mean over the items that have a
    value there, shape (resamples, columns); NaN where a resample drew no such item. The same
    multinomial trick as `histogram_bootstrap_ci`, so columns stay paired by item."""
    n = int(counts.sum())
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(n, counts / n, size=resamples).astype(float)  # (resamples, rows)
    present = ~np.isnan(vectors)
    sums = drawn @ np.where(present, vectors, 0.0)
    sizes = drawn @ present.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / sizes


def percentile_ci(samples: np.ndarray) -> Interval | None:
    """The percentile interval of bootstrap statistics (NaN ones left out)."""
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    method = "exact" if low == high else "bootstrap"
    return Interval(float(low), float(high), method)


def clustered_se(values: np.ndarray, clusters: np.ndarray) -> float | None:
    """Standard error of the mean of `values` when items come in clusters (the items of one
    passage, the epochs of one item): the cluster-robust (CR1) sandwich estimate
    √(G/(G−1) · Σ_g (S_g − n_g·m)²) / N, with S_g and n_g the sum and size of cluster g.
    None with fewer than two clusters."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return None
    _, codes = np.unique(clusters, return_inverse=True)
    groups = int(codes.max()) + 1
    if groups < 2:
        return None
    mean = float(values.mean())
    sums = np.bincount(codes, weights=values, minlength=groups)
    sizes = np.bincount(codes, minlength=groups)
    residual = sums - sizes * mean
    return math.sqrt(groups / (groups - 1) * float((residual**2).sum())) / values.size


def clustered_ci(values: np.ndarray, clusters: np.ndarray) -> Interval | None:
    """95% CI of the mean with the cluster-robust standard error (normal approximation)."""
    se = clustered_se(values, clusters)
    if se is None:
        return None
    mean = float(np.asarray(values, dtype=float).mean())
    return Interval(mean - Z95 * se, mean + Z95 * se, "clustered")


def normal_ci(n: int, mean: float, variance: float) -> Interval:
    half = Z95 * math.sqrt(variance / n) if n > 0 else 0.0
    return Interval(mean - half, mean + half, "normal")


def mean_ci(
    values: Sequence[float] | np.ndarray, low: float | None = None, high: float | None = None
) -> Interval | None:
    """The CI of the mean of raw values, by the same rule as `Dist.ci` (so both agree);
    `low` and `high` are the values' declared range, if any."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return None
    distinct, counts = np.unique(array, return_counts=True)
    if len(distinct) <= HIST_LIMIT:
        if low is not None and high is not None and high > low:
            return bounded_ci(distinct, counts, low, high)
        return histogram_bootstrap_ci(distinct, counts)
    variance = float(array.var(ddof=1))
    return clipped(normal_ci(array.size, float(array.mean()), variance), low, high)


# ---- paired comparison ------------------------------------------------------------------
@dataclass(frozen=True)
class Paired:
    n: int
    wins: int  # a > b
    losses: int  # a < b
    ties: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None  # mean of a - b
    ci: Interval | None
    wilcoxon_p: float | None
    sign_p: float | None
    sd_diff: float | None = None  # sample standard deviation of a − b (n − 1)

    @property
    def detectable(self) -> float | None:
        """The smallest |mean difference| this many paired items detect with POWER (see
        `minimum_detectable_difference`)."""
        if self.sd_diff is None:
            return None
        return minimum_detectable_difference(self.sd_diff, self.n)


# ---- how many items -----------------------------------------------------------------------
ALPHA = 0.05  # two-sided
POWER = 0.80


def _z_sum(alpha: float, power: float) -> float:
    from scipy import stats as scipy_stats

    return float(scipy_stats.norm.ppf(1 - alpha / 2) + scipy_stats.norm.ppf(power))


def minimum_detectable_difference(
    sd_diff: float, n: int, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The mean paired difference a two-sided test at `alpha` finds with probability `power`
    on n paired items whose differences have standard deviation sd_diff (normal approximation
    of the paired t-test): (z₁₋α/₂ + z_power) · sd / √n. None below two items."""
    if n < 2:
        return None
    return _z_sum(alpha, power) * sd_diff / math.sqrt(n)


def items_needed(
    sd_diff: float, difference: float, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Paired items needed to detect a mean difference of `difference` (the inverse of
    `minimum_detectable_difference`, rounded up); None for a difference of 0."""
    if difference == 0:
        return None
    if sd_diff == 0:
        return 2  # no spread: any difference shows at once (and two items give an sd)
    return max(2, math.ceil((_z_sum(alpha, power) * sd_diff / abs(difference)) ** 2))


def paired(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    span: float | None = None,
) -> Paired:
    """Compare two runs item by item: a and b hold the two values of the same items. With
    `span` (the width of the values' range) the differences lie in [−span, span] and get the
    bounded interval, which stays honest when every difference is the same."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("Paired samples must have the same length.")
    n = int(a.size)
    if n == 0:
        return Paired(0, 0, 0, 0, None, None, None, None, None, None)
    diff = a - b
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    return Paired(
        n=n,
        wins=wins,
        losses=losses,
        ties=n - wins - losses,
        mean_a=float(a.mean()),
        mean_b=float(b.mean()),
        mean_diff=float(diff.mean()),
        ci=mean_ci(diff, -span, span) if span else mean_ci(diff),
        wilcoxon_p=wilcoxon_p(diff),
        sign_p=sign_test_p(wins, losses),
        sd_diff=float(diff.std(ddof=1)) if n > 1 else None,
    )


def wilcoxon_p(diff: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value; ties (zero differences) are dropped (Wilcoxon's
    own rule). No non-zero difference at all means no evidence of a difference: p = 1."""
    from scipy import stats as scipy_stats

    nonzero = diff[diff != 0]
    if nonzero.size == 0:
        return 1.0
    return float(scipy_stats.wilcoxon(nonzero, zero_method="wilcox").pvalue)


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test over the items that are not ties."""
    from scipy import stats as scipy_stats

    if wins + losses == 0:
        return 1.0
    return float(scipy_stats.binomtest(wins, wins + losses, 0.5).pvalue)


# ---- the test behind a pair's p -------------------------------------------------------------
SMALL_N = 30  # below this many paired items, an exact or permutation test instead of the t-test
PERMUTATIONS = 9999  # sign flips drawn when there are more than this many patterns
TESTS = {
    "sign": "exact sign test",
    "permutation": "sign-flip permutation test",
    "t": "paired t-test",
}


def paired_p(diff: np.ndarray) -> tuple[float | None, str | None]:
    """Two-sided p of "no difference" for paired differences, and the test that gave it (a
    key of TESTS). The t-test's normal theory does not hold for a handful of items, and with no
    spread at all it has nothing to divide by (two equal differences are not evidence of
    anything: p = 0.5 exactly), so:

    - every non-zero difference of one size (every difference the same, or ±1 between binary
      scores): the sign-flip permutation test is then the exact sign test, `sign_test_p`;
    - fewer than SMALL_N items: the sign-flip permutation test of the mean difference (all
      2ⁿ patterns when there are at most PERMUTATIONS of them, else that many seeded draws);
    - otherwise the paired t-test. None below two items."""
    from scipy import stats as scipy_stats

    diff = np.asarray(diff, dtype=float)
    n = int(diff.size)
    if n < 2:
        return None, None
    nonzero = diff[diff != 0]
    if nonzero.size == 0 or np.all(np.abs(nonzero) == abs(nonzero[0])):
        return sign_test_p(int((nonzero > 0).sum()), int((nonzero < 0).sum())), "sign"
    if n < SMALL_N:
        found = scipy_stats.permutation_test(
            (diff,),
            np.mean,
            permutation_type="samples",
            vectorized=True,
            n_resamples=PERMUTATIONS,
            alternative="two-sided",
            rng=np.random.default_rng(SEED),
        )
        return min(1.0, float(found.pvalue)), "permutation"
    return float(scipy_stats.ttest_1samp(diff, 0.0).pvalue), "t"


# ---- agreement --------------------------------------------------------------------------
def scale_steps(low: float, high: float, *sides: np.ndarray) -> tuple[list[float], list]:
    """The integer steps of a subject's scale [low, high], and each side's values rounded
    (half up) to them: how the judge–human agreement pages compare a judge's value with
    people's, one definition for both (#28.6)."""
    categories = [float(v) for v in range(int(np.floor(low)), int(np.ceil(high)) + 1)]
    rounded = [np.clip(np.floor(side + 0.5), categories[0], categories[-1]) for side in sides]
    return categories, rounded


def same_step(judged: float, human: float, low: float, high: float) -> bool:
    """Whether two values fall on the same step of the scale, as `scale_steps` rounds them:
    the one definition of a judge agreeing with people."""
    first, last = math.floor(low), math.ceil(high)
    a = min(max(math.floor(judged + 0.5), first), last)
    b = min(max(math.floor(human + 0.5), first), last)
    return a == b


def scale_bounds(spec: dict) -> tuple[float, float]:
    """A subject's declared range; 0–1 where it declares none (right/wrong)."""
    return float(spec.get("min", 0)), float(spec.get("max", 1))


def categories_for(
    observed: Iterable[float], low: float | None, high: float | None, limit: int = 21
) -> list[float] | None:
    """The categories of an ordinal scale: the integer range if the subject declares one,
    else the distinct observed values; None when there are too many for a confusion matrix."""
    seen = sorted({float(v) for v in observed})
    if (
        low is not None
        and high is not None
        and float(low).is_integer()
        and float(high).is_integer()
        and 0 < high - low < limit
        and all(v.is_integer() and low <= v <= high for v in seen)
    ):
        return [float(v) for v in range(int(low), int(high) + 1)]
    return seen if 0 < len(seen) <= limit else None


def confusion(
    rater_a: Sequence[float], rater_b: Sequence[float], categories: Sequence[float]
) -> np.ndarray:
    """counts[i][j]: how often a said categories[i] while b said categories[j]."""
    index = {float(c): i for i, c in enumerate(categories)}
    matrix = np.zeros((len(categories), len(categories)), dtype=np.int64)
    for x, y in zip(rater_a, rater_b, strict=True):
        matrix[index[float(x)], index[float(y)]] += 1
    return matrix


def weighted_kappa(matrix: np.ndarray, categories: Sequence[float]) -> float | None:
    """Cohen's κ with quadratic weights on the categories' values (linear distance squared,
    scaled to the scale's span). With two categories it equals unweighted κ. None when
    chance agreement is total (everyone used one category), where κ is undefined."""
    total = matrix.sum()
    if total == 0 or len(categories) < 2:
        return None
    values = np.asarray(categories, dtype=float)
    span = values[-1] - values[0]
    weights = ((values[:, None] - values[None, :]) / span) ** 2
    expected = np.outer(matrix.sum(axis=1), matrix.sum(axis=0)) / total
    denominator = float((weights * expected).sum())
    if denominator == 0:
        return None
    return 1.0 - float((weights * matrix).sum()) / denominator
