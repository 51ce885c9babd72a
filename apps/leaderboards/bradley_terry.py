"""Bradley–Terry ratings from pairwise battles (#13, #29.3): who beats whom, how surely.

Each battle is (model a, model b, outcome), the outcome 1 when a won, 0 when b won and 0.5 for
a tie (a tie is half a win each, as Chatbot Arena counts them). The model: P(a beats b) =
σ(β_a − β_b), shown on the Elo scale of the arenas: 1000 + 400 / ln 10 · β.

A weak, declared prior keeps the ratings finite: each β ~ Normal(0, PRIOR_SD Elo points, i.e.
ln 10 on β), independent. The ratings are the posterior mode (ridge-penalised maximum
likelihood: the likelihood Σ [y log σ(β_a − β_b) + (1 − y) log σ(β_b − β_a)] minus
Σ β² / (2 σ²), Newton's method with the analytic Hessian on the battles aggregated per pair).
Without the prior, a model that never lost (or never won), or a group of models that never
lost to the rest, has no maximum-likelihood rating at all: the fit runs off to infinity (one
battle gave 2,361 vs −361). `Ratings.mle_exists` says whether it would exist.

Confidence intervals: the Laplace approximation of the posterior, rating ± 1.96 posterior
standard deviations from the inverse Hessian at the mode (of the ratings centred on 1000).
With few battles the prior dominates and the intervals stay wide; with many they are the
maximum-likelihood fit's usual Wald intervals. One fit, no bootstrap refits: 20 models and
20,000 battles take milliseconds. Ranks by CI overlap: 1 + the number of models whose interval
lies wholly above this one's.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy.sparse import csr_array
from scipy.sparse.csgraph import connected_components
from scipy.special import expit, log_expit

SCALE = 400 / np.log(10)
CENTRE = 1000.0
PRIOR_SD = 400.0  # Elo points: a rating's prior standard deviation
PRIOR_PRECISION = (SCALE / PRIOR_SD) ** 2  # 1 / σ² on the β scale (σ = ln 10)
RIDGE = 1e-8  # the length-controlled fit's vanishing ridge
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Battles:
    """Battles aggregated: per (a, b) pair of model indexes, the count and the sum of outcomes."""

    models: list[str]
    pairs: np.ndarray  # (k, 2) model indexes
    outcomes: np.ndarray  # (k,) 1, 0.5 or 0
    counts: np.ndarray  # (k,) battles with that pair and outcome

    @classmethod
    def of(cls, battles: Sequence[tuple[str, str, float]]) -> "Battles":
        """Aggregate (a, b, outcome) rows with numpy: 20,000 battles in a few milliseconds."""
        firsts = [a for a, _, _ in battles]
        seconds = [b for _, b, _ in battles]
        models = sorted(set(firsts) | set(seconds))
        index = {name: i for i, name in enumerate(models)}
        outcomes = np.array([outcome for _, _, outcome in battles], dtype=float)
        bad = ~np.isin(outcomes, (0.0, 0.5, 1.0))
        if bad.any():
            outcome = battles[int(np.argmax(bad))][2]
            raise ValueError(f"An outcome is 1 (a won), 0 (b won) or 0.5 (a tie), not {outcome!r}.")
        n = len(models)
        a = np.array([index[name] for name in firsts], dtype=np.int64)
        b = np.array([index[name] for name in seconds], dtype=np.int64)
        keys, counts = np.unique(
            (a * n + b) * 3 + (outcomes * 2).astype(np.int64), return_counts=True
        )
        pairs = np.stack([keys // 3 // n, keys // 3 % n], axis=1).reshape(len(keys), 2)
        return cls(models, pairs, (keys % 3) / 2, counts.astype(float))


Loss = Callable[[np.ndarray], tuple[float, np.ndarray]]
Hessian = Callable[[np.ndarray], np.ndarray]


def _objective(battles: Battles, precision: float) -> tuple[Loss, Hessian]:
    """The penalised negative log-likelihood with its gradient, and its Hessian."""
    n = len(battles.models)
    weights = battles.counts
    a, b = battles.pairs[:, 0], battles.pairs[:, 1]
    y = battles.outcomes

    def loss(beta: np.ndarray) -> tuple[float, np.ndarray]:
        d = beta[a] - beta[b]
        value = -np.sum(weights * (y * log_expit(d) + (1 - y) * log_expit(-d)))
        value += precision / 2 * np.sum(beta**2)
        residual = weights * (y - expit(d))  # ∂(log-likelihood)/∂d
        grad = -np.bincount(a, residual, n) + np.bincount(b, residual, n) + precision * beta
        return float(value), grad

    def hessian(beta: np.ndarray) -> np.ndarray:
        p = expit(beta[a] - beta[b])
        w = weights * p * (1 - p)
        matrix = np.zeros((n, n))
        np.add.at(matrix, (a, b), -w)
        np.add.at(matrix, (b, a), -w)
        matrix[np.diag_indices(n)] = -matrix.sum(axis=1)
        return matrix + precision * np.eye(n)

    return loss, hessian


def fit(battles: Battles, prior_precision: float = PRIOR_PRECISION) -> np.ndarray:
    """β per model (natural-log scale) at the posterior mode: the prior's precision 1/σ² on
    each β (0: plain maximum likelihood, centred on mean 0, which exists only when
    `mle_exists`)."""
    precision = max(prior_precision, RIDGE)
    loss, hessian = _objective(battles, precision)
    found = optimize.minimize(
        loss,
        np.zeros(len(battles.models)),
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-9},
    )
    beta = found.x
    return beta - beta.mean()


def covariance(
    battles: Battles, beta: np.ndarray, prior_precision: float = PRIOR_PRECISION
) -> np.ndarray:
    """The Laplace approximation's posterior covariance of the centred β (β − mean β): the
    inverse Hessian of the penalised negative log-likelihood at the mode, centred. The shift of
    every rating together is the prior's alone (battles only see differences), so it is taken
    out: the page shows ratings centred on 1000."""
    _, hessian = _objective(battles, max(prior_precision, RIDGE))
    inverse = np.linalg.inv(hessian(beta))
    n = len(beta)
    centre = np.eye(n) - np.full((n, n), 1 / n)
    return centre @ inverse @ centre


def mle_exists(battles: Battles) -> bool:
    """Whether the maximum-likelihood ratings exist (Zermelo 1929; Ford 1957): every way of
    splitting the models in two has a win (or a tie) of each side against the other, i.e. the
    graph "a took something from b" is strongly connected."""
    n = len(battles.models)
    if n < 2:
        return True
    a, b = battles.pairs[:, 0], battles.pairs[:, 1]
    won = battles.outcomes > 0  # a took at least half a win from b
    lost = battles.outcomes < 1
    rows = np.concatenate([a[won], b[lost]])
    cols = np.concatenate([b[won], a[lost]])
    graph = csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    components, _ = connected_components(graph, directed=True, connection="strong")
    return bool(components == 1)


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
    wins: float = 0.0  # a tie half a win
    losses: float = 0.0  # a tie half a loss


@dataclass(frozen=True)
class Ratings:
    ratings: list[Rating]  # best first
    models: list[str]
    win_rates: np.ndarray  # [i][j]: share of i's battles against j that i won (NaN: none)
    battles: int
    mle_exists: bool = True  # whether the ratings would be finite without the prior
    undefeated: list[str] = field(default_factory=list)  # models that never lost
    winless: list[str] = field(default_factory=list)  # models that never won

    @property
    def prior_sd(self) -> float:
        return PRIOR_SD


def ratings(rows: Sequence[tuple[str, str, float]]) -> Ratings:
    """The board: ratings with Laplace CIs, ranks by CI overlap, the win-rate matrix."""
    found = Battles.of(rows)
    n = len(found.models)
    beta = fit(found)
    point = elo(beta)
    sd = SCALE * np.sqrt(np.clip(np.diag(covariance(found, beta)), 0, None))
    low, high = point - Z95 * sd, point + Z95 * sd
    wins = np.zeros((n, n))
    played = np.zeros((n, n))
    a, b = found.pairs[:, 0], found.pairs[:, 1]
    np.add.at(wins, (a, b), found.outcomes * found.counts)
    np.add.at(wins, (b, a), (1 - found.outcomes) * found.counts)
    np.add.at(played, (a, b), found.counts)
    np.add.at(played, (b, a), found.counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.where(played > 0, wins / played, np.nan)
    out = []
    for i, model in enumerate(found.models):
        better = int(np.sum(low > high[i]))
        games = played[i].sum()
        won = float(wins[i].sum())
        out.append(
            Rating(
                model,
                float(point[i]),
                float(low[i]),
                float(high[i]),
                1 + better,
                int(games),
                won / games if games else float("nan"),
                won,
                float(games - won),
            )
        )
    out.sort(key=lambda r: -r.rating)
    return Ratings(
        out,
        found.models,
        matrix,
        int(found.counts.sum()),
        mle_exists(found),
        [r.model for r in out if r.battles and r.losses == 0],
        [r.model for r in out if r.battles and r.wins == 0],
    )


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
