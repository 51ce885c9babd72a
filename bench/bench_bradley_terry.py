"""Benchmark the pairwise board's Bradley–Terry ratings (#29.3): the fit under the prior, its
Laplace intervals, MLE existence and the win-rate matrix, from the battles as the board passes
them (one (a, b, outcome) tuple per battle).

    .venv-test/bin/python bench/bench_bradley_terry.py [--models 20] [--battles 20000] [--repeats 20]

Measures `ratings()` p50/p95 over `repeats` calls at
  1. `models` models × `battles` battles (random strengths, 10 % ties) — goal ≤ 300 ms p95;
  2. 2 models × 5 battles, one of them undefeated (took 4–14 s with 500 bootstrap refits) —
     goal ≤ 300 ms p95.
Prints each p95 as a ratio to its goal (≤ 1.00 passes); exits non-zero when one is missed.
"""

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_MS = 300.0

from apps.leaderboards.bradley_terry import ratings  # noqa: E402


def battles(models: int, count: int, seed: int = 1) -> list[tuple[str, str, float]]:
    rng = random.Random(seed)
    names = [f"model-{i:02d}" for i in range(models)]
    strength = {name: rng.gauss(0, 1) for name in names}
    rows = []
    for _ in range(count):
        a, b = rng.sample(names, 2)
        p = 1 / (1 + math.exp(strength[b] - strength[a]))
        draw = rng.random()
        rows.append((a, b, 0.5 if abs(draw - p) < 0.05 else float(draw < p)))
    return rows


def timed(rows: list[tuple[str, str, float]], repeats: int) -> tuple[float, float]:
    ratings(rows)  # warm: imports, first-call costs
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        ratings(rows)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
    return statistics.median(times), p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--battles", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    cases = [
        (f"{args.models} models × {args.battles:,} battles", battles(args.models, args.battles)),
        ("2 models × 5 battles (one undefeated)", [("a", "b", 1.0)] * 4 + [("a", "b", 0.5)]),
    ]
    print(f"Bradley–Terry ratings, {args.repeats} calls each")
    print(f"{'case':<40} {'p50 ms':>8} {'p95 ms':>8} {'goal':>7} {'ratio':>6}")
    failed = False
    for label, rows in cases:
        p50, p95 = timed(rows, args.repeats)
        ratio = p95 / GOAL_MS
        failed |= ratio > 1
        verdict = "ok" if ratio <= 1 else "MISSED"
        print(f"{label:<40} {p50:>8.1f} {p95:>8.1f} {GOAL_MS:>7.0f} {ratio:>6.2f} {verdict}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
