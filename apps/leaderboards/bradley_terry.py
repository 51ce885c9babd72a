"""Bradley–Terry ratings from pairwise battles (#13): who beats whom, how surely.

Each battle is (model a, model b, outcome), the outcome 1 when a won, 0 when b won and 0.5 for
a tie (a tie is half a win each, as Chatbot Arena counts them). The model: P(a beats b) =
σ(β_a − β_b). The ratings maximise the likelihood Σ [y log σ(β_a − β_b) + (1 − y) log σ(β_b −
β_a)] (scipy's L-BFGS with the analytic gradient, on the battles aggregated per pair), with a
vanishing ridge (1e-8 Σβ²) so a model that won every battle still gets a finite rating, and
are shown on the Elo scale of the arenas: 1000 + 400 / ln 10 · β, centred on a mean of 1000.

Confidence intervals: percentile bootstrap over battles (resampled as multinomial counts of
the aggregated battles, seeded, so the same battles give the same intervals). Ranks by CI
overlap: 1 + the number of models whose interval lies wholly above this one's.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import expit, log_expit

SCALE = 400 / np.log(10)
CENTRE = 1000.0
RIDGE = 1e-8
BOOTSTRAP = 500
SEED = 0


@dataclass(frozen=True)
class Battles:
    """Battles aggregated: per (a, b) pair of model indexes, the count and the sum of outcomes."""

    models: list[str]
    pairs: np.ndarray  # (k, 2) model indexes
    outcomes: np.ndarray  # (k,) 1, 0.5 or 0
    counts: np.ndarray  # (k,) battles with that pair and outcome

    @classmethod
    def of(cls, battles: Sequence[tuple[str, str, float]]) -> "Battles":
        models = sorted({name for a, b, _ in battles for name in (a, b)})
        index = {name: i for i, name in enumerate(models)}
        found: dict[tuple[int, int, float], int] = {}
        for a, b, outcome in battles:
            if outcome not in (0, 0.5, 1):
                raise ValueError(
                    f"An outcome is 1 (a won), 0 (b won) or 0.5 (a tie), not {outcome!r}."
                )
            key = (index[a], index[b], float(outcome))
            found[key] = found.get(key, 0) + 1
        keys = sorted(found)
        return cls(
            models,
            np.array([(a, b) for a, b, _ in keys], dtype=np.int64).reshape(len(keys), 2),
            np.array([o for _, _, o in keys], dtype=float),
            np.array([found[k] for k in keys], dtype=float),
        )


def fit(battles: Battles, counts: np.ndarray | None = None) -> np.ndarray:
    """β per model (natural-log scale, mean 0) maximising the likelihood of the battles."""
    n = len(battles.models)
    weights = battles.counts if counts is None else counts
    a, b = battles.pairs[:, 0], battles.pairs[:, 1]
    y = battles.outcomes

    def loss(beta: np.ndarray) -> tuple[float, np.ndarray]:
        d = beta[a] - beta[b]
        value = -np.sum(weights * (y * log_expit(d) + (1 - y) * log_expit(-d)))
        value += RIDGE * np.sum(beta**2)
        residual = weights * (y - expit(d))  # ∂(log-likelihood)/∂d
        grad = -np.bincount(a, residual, n) + np.bincount(b, residual, n) + 2 * RIDGE * beta
        return float(value), grad

    found = optimize.minimize(
        loss, np.zeros(n), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15}
    )
    beta = found.x
    return beta - beta.mean()


def elo(beta: np.ndarray) -> np.ndarray:
    return CENTRE + SCALE * beta


@dataclass(frozen=True)
class Rating:
    model: str
    rating: float  # Elo scale
    low: float
    high: float
    rank: int  # by CI overlap
    battles: int
    win_rate: float  # over all its battles, a tie half a win


@dataclass(frozen=True)
class Ratings:
    ratings: list[Rating]  # best first
    models: list[str]
    win_rates: np.ndarray  # [i][j]: share of i's battles against j that i won (NaN: none)
    battles: int


def ratings(
    rows: Sequence[tuple[str, str, float]], rounds: int = BOOTSTRAP, seed: int = SEED
) -> Ratings:
    """The board: ratings with bootstrap CIs, ranks by CI overlap, the win-rate matrix."""
    found = Battles.of(rows)
    n = len(found.models)
    point = elo(fit(found))
    rng = np.random.default_rng(seed)
    total = int(found.counts.sum())
    samples = np.empty((rounds, n))
    shares = found.counts / total
    for r in range(rounds):
        samples[r] = elo(fit(found, rng.multinomial(total, shares).astype(float)))
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    wins = np.zeros((n, n))
    played = np.zeros((n, n))
    for (a, b), outcome, count in zip(found.pairs, found.outcomes, found.counts, strict=True):
        wins[a, b] += outcome * count
        wins[b, a] += (1 - outcome) * count
        played[a, b] += count
        played[b, a] += count
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.where(played > 0, wins / played, np.nan)
    out = []
    for i, model in enumerate(found.models):
        better = int(np.sum(low > high[i]))
        games = played[i].sum()
        out.append(
            Rating(
                model,
                float(point[i]),
                float(low[i]),
                float(high[i]),
                1 + better,
                int(games),
                float(wins[i].sum() / games) if games else float("nan"),
            )
        )
    out.sort(key=lambda r: -r.rating)
    return Ratings(out, found.models, matrix, total)


# ---- length-controlled win rate ---------------------------------------------------------------
@dataclass(frozen=True)
class LengthControlled:
    """A model's win rate against a baseline, raw and with the length effect taken out."""

    model: str
    battles: int
    raw: float  # share of battles won (a tie half)
    controlled: float | None  # σ(a) of the fit below; None when it cannot be fitted
    length_difference: float  # mean words of the model's answer − the baseline's


def length_controlled(model: str, rows: Sequence[tuple[float, float]]) -> LengthControlled:
    """AlpacaEval 2's idea in its simplest form: the outcome (1 win, 0.5 tie, 0 loss against
    the baseline) is logistic in a + φ·tanh(Δ / s), with Δ the difference in answer length
    (words) and s its standard deviation; the length-controlled win rate is σ(a), the win
    rate when the lengths are equal. Equal lengths everywhere give the raw win rate."""
    y = np.array([outcome for outcome, _ in rows], dtype=float)
    delta = np.array([d for _, d in rows], dtype=float)
    raw = float(y.mean()) if len(y) else float("nan")
    spread = float(delta.std())
    t = np.tanh(delta / spread) if spread > 0 else np.zeros_like(delta)
    if not len(y):
        return LengthControlled(model, 0, raw, None, 0.0)

    def loss(params: np.ndarray) -> tuple[float, np.ndarray]:
        z = params[0] + params[1] * t
        value = -np.sum(y * log_expit(z) + (1 - y) * log_expit(-z)) + RIDGE * params @ params
        residual = y - expit(z)
        grad = -np.array([residual.sum(), (residual * t).sum()]) + 2 * RIDGE * params
        return float(value), grad

    found = optimize.minimize(loss, np.zeros(2), jac=True, method="L-BFGS-B")
    controlled = float(expit(found.x[0])) if found.success else None
    return LengthControlled(model, len(y), raw, controlled, float(delta.mean()))
