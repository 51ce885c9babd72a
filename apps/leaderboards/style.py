"""Bradley–Terry with style control (#31.3), as Chatbot Arena controls for style (Li,
Angelopoulos & Chiang, "Does style matter?", 2024): the answers' length and Markdown enter the
battle model as covariates beside the models, so a rating says how often a model wins at equal
style, and each style feature gets its own coefficient.

P(a beats b) = σ(β_a − β_b + Σ_k γ_k · x_k), x_k the standardised style difference of the
battle in feature k: (s_a − s_b) / (s_a + s_b + 1) for the counts s of the two answers, then
centred and divided by its standard deviation over the battles (a feature that never differs is
left out). Features: length in words (on the whole answer), and on the answer without its
fenced code blocks: Markdown headers, list items and bold spans.

The prior is the plain board's (apps/leaderboards/bradley_terry.py): every coefficient, model or
style, Normal(0, ln 10) on the logit scale, and the fit is the posterior mode (ridge-penalised
maximum likelihood) with its Laplace covariance. That is an L2-penalised logistic regression on
the design [model columns +1/−1 | style columns] without intercept, which the tests check
against scikit-learn's LogisticRegression (C = 1 / precision) and, without the prior, against
statsmodels' Logit to 1e-4. A tie is half a win each: y = 0.5 in the same likelihood.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy.special import expit, log_expit

from apps.leaderboards.bradley_terry import PRIOR_PRECISION, RIDGE, SCALE, Z95, elo

FEATURES = ("length", "headers", "lists", "bold")
FEATURE_LABELS = {
    "length": "length (words)",
    "headers": "Markdown headers",
    "lists": "list items",
    "bold": "bold spans",
}
_CODE = re.compile(r"```.*?```", re.DOTALL)
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def style_counts(text: str) -> tuple[int, int, int, int]:
    """(words, headers, list items, bold spans) of an answer; Markdown counted outside fenced
    code blocks, where a "# comment" or "- x" is code, not style."""
    prose = _CODE.sub("", text)
    return (
        len(text.split()),
        len(_HEADER.findall(prose)),
        len(_LIST.findall(prose)),
        len(_BOLD.findall(prose)),
    )


@dataclass(frozen=True)
class Design:
    """The regression's design: one row per battle."""

    models: list[str]
    x: np.ndarray  # (battles, models + features): +1 for a, −1 for b, then the style columns
    y: np.ndarray  # (battles,) 1 a won, 0 b won, 0.5 a tie
    features: list[str]  # the style columns kept (a feature that never differs is left out)

    @property
    def n_models(self) -> int:
        return len(self.models)


def design(
    battles: Sequence[tuple[str, str, float]],
    style_a: np.ndarray,
    style_b: np.ndarray,
    features: Sequence[str] = FEATURES,
) -> Design:
    """The design of battles (a, b, outcome) with each answer's style counts (rows of
    `style_a` and `style_b`, columns `features`)."""
    models = sorted({a for a, _, _ in battles} | {b for _, b, _ in battles})
    index = {name: i for i, name in enumerate(models)}
    n, m = len(battles), len(models)
    y = np.array([outcome for _, _, outcome in battles], dtype=float)
    if not np.isin(y, (0.0, 0.5, 1.0)).all():
        raise ValueError("An outcome is 1 (a won), 0 (b won) or 0.5 (a tie).")
    sides = np.zeros((n, m))
    rows = np.arange(n)
    sides[rows, [index[a] for a, _, _ in battles]] += 1.0
    sides[rows, [index[b] for _, b, _ in battles]] -= 1.0
    a_counts = np.asarray(style_a, dtype=float).reshape(n, len(features))
    b_counts = np.asarray(style_b, dtype=float).reshape(n, len(features))
    difference = (a_counts - b_counts) / (a_counts + b_counts + 1.0)
    spread = difference.std(axis=0)
    kept = spread > 1e-12
    standardised = (difference[:, kept] - difference[:, kept].mean(axis=0)) / spread[kept]
    names = [name for name, keep in zip(features, kept, strict=True) if keep]
    return Design(models, np.hstack([sides, standardised]), y, names)


def fit(found: Design, prior_precision: float = PRIOR_PRECISION) -> tuple[np.ndarray, np.ndarray]:
    """The posterior mode w = [β (models), γ (features)] and its Laplace covariance (the
    inverse Hessian of the penalised negative log-likelihood). With the prior, β sums to 0 by
    itself (battles see only differences; the penalty picks the centred solution)."""
    precision = max(prior_precision, RIDGE)
    x, y = found.x, found.y

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ w
        value = -np.sum(y * log_expit(z) + (1 - y) * log_expit(-z)) + precision / 2 * w @ w
        return float(value), -x.T @ (y - expit(z)) + precision * w

    def hessian(w: np.ndarray) -> np.ndarray:
        p = expit(x @ w)
        return (x * (p * (1 - p))[:, None]).T @ x + precision * np.eye(x.shape[1])

    result = optimize.minimize(
        loss,
        np.zeros(x.shape[1]),
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-10},
    )
    w = result.x
    m = found.n_models
    w[:m] -= w[:m].mean()  # without the prior (precision ~ 0) only differences are fitted
    return w, np.linalg.inv(hessian(w))


@dataclass(frozen=True)
class StyleRating:
    model: str
    rating: float  # Elo scale, at equal style
    low: float
    high: float
    rank: int  # by CI overlap, as on the plain board
    plain: float | None = None  # the plain fit's rating, for the page's "moved by"

    @property
    def moved(self) -> float | None:
        return None if self.plain is None else self.rating - self.plain


@dataclass(frozen=True)
class StyleCoefficient:
    feature: str
    coefficient: float  # log-odds of winning per standard deviation of the style difference
    low: float
    high: float

    @property
    def label(self) -> str:
        return FEATURE_LABELS.get(self.feature, self.feature)

    @property
    def elo(self) -> float:
        """The coefficient in Elo points: what one standard deviation more of it is worth."""
        return SCALE * self.coefficient

    @property
    def shown(self) -> bool:
        """Whether the interval leaves out 0: the judge (or people) reward (or punish) it."""
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class StyleControlled:
    ratings: list[StyleRating]  # best first
    coefficients: list[StyleCoefficient]
    battles: int
    constant: list[str] = field(default_factory=list)  # features that never differed


def controlled(
    battles: Sequence[tuple[str, str, float]],
    style_a: np.ndarray,
    style_b: np.ndarray,
    plain: dict[str, float] | None = None,
) -> StyleControlled:
    """The style-controlled board: ratings at equal style with Laplace CIs (centred on 1000,
    as the plain board's), the style coefficients with theirs; `plain` gives each model's
    plain rating, to show how far style control moved it."""
    found = design(battles, style_a, style_b)
    w, cov = fit(found)
    m = found.n_models
    centre = np.eye(m) - np.full((m, m), 1 / m)
    model_cov = centre @ cov[:m, :m] @ centre
    sd = SCALE * np.sqrt(np.clip(np.diag(model_cov), 0, None))
    point = elo(w[:m])
    low, high = point - Z95 * sd, point + Z95 * sd
    ratings = [
        StyleRating(
            name,
            float(point[i]),
            float(low[i]),
            float(high[i]),
            1 + int(np.sum(low > high[i])),
            (plain or {}).get(name),
        )
        for i, name in enumerate(found.models)
    ]
    ratings.sort(key=lambda r: -r.rating)
    gamma_sd = np.sqrt(np.clip(np.diag(cov)[m:], 0, None))
    coefficients = [
        StyleCoefficient(
            name,
            float(w[m + k]),
            float(w[m + k] - Z95 * gamma_sd[k]),
            float(w[m + k] + Z95 * gamma_sd[k]),
        )
        for k, name in enumerate(found.features)
    ]
    constant = [name for name in FEATURES if name not in found.features]
    return StyleControlled(ratings, coefficients, len(battles), constant)
