"""Provider rate limits held by the real path: TWO RQ worker processes share one endpoint's RPM and
TPM budgets (Redis) against the loopback server, which enforces the same limits over a sliding
minute and answers 429 past them (tests/llm_server.py, RateWindow).

The server allows 600 requests and 60,000 tokens a minute and answers in 0.3–1 s. Every
request reserves max_tokens 50 plus its prompt (the server counts words): prompts of 20–110
words, so a request costs 72–162 tokens, 117 on average. The TPM limit binds on average
(60,000 / 117 ≈ 513 requests a minute, under the 600 RPM); the RPM limit binds for the third
of the requests under 100 tokens. Measured at the server, from its first admitted request to
its last: requests/min and tokens/min, the ratio to the binding limit (the larger of the two
ratios; goal >= 0.95), and the share of requests answered 429 (goal < 1%).

    .venv-test/bin/python bench/bench_rate_limits.py [--items 2000] [--rpm 600] [--tpm 60000]
        [--unstated]      the endpoint states no limits: only the server's headers tell them
        [--no-headers]    the server sends no x-ratelimit-* headers (a 429 says retry-after)
"""

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RATIO_GOAL = 0.95
REFUSED_GOAL = 0.01
MAX_TOKENS = 50

from bench.common import live_stack, wait_for_run  # noqa: E402

WORDS = [
    "the",
    "model",
    "reads",
    "each",
    "question",
    "about",
    "the",
    "report",
    "and",
    "answers",
    "in",
    "one",
    "short",
    "clear",
    "sentence",
    "with",
    "the",
    "figure",
    "asked",
    "for",
    "and",
    "where",
    "it",
    "was",
    "found",
    "in",
    "the",
    "text",
]


def make_dataset(items: int) -> tuple[Any, Any]:
    """Task "bench" with `items` questions of 20–110 words (seeded)."""
    from apps.datasets.models import Dataset, Item, Task

    draw = random.Random(16)
    task = Task.objects.create(slug="bench", name="Bench")
    dataset = Dataset.objects.create(
        task=task,
        name="rate",
        format="csv",
        status="ready",
        row_count=items,
        columns=["question"],
        mapping={"input_columns": ["question"]},
    )
    Item.objects.bulk_create(
        Item(
            dataset=dataset,
            position=i,
            key=str(i),
            fields={"question": " ".join(draw.choice(WORDS) for _ in range(draw.randint(20, 110)))},
        )
        for i in range(items)
    )
    return task, dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--tpm", type=int, default=60000)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--chunk-size", type=int, default=100)
    parser.add_argument(
        "--unstated",
        action="store_true",
        help="the endpoint states no limits: the engine has only the provider's headers",
    )
    parser.add_argument(
        "--no-headers",
        action="store_true",
        help="the server states no limits in its headers (a 429 still says retry-after)",
    )
    args = parser.parse_args()
    config = dict(
        rate_headers=not args.no_headers,
        rpm=args.rpm,
        tpm=args.tpm,
        latency=0.3,
        latency_jitter=0.7,
        default_reply="It is {n}.",
    )
    with live_stack("rate-limits", workers=2, **config) as server:
        missed = measure(args, server)
    sys.exit(1 if missed else 0)


def measure(args: argparse.Namespace, server: Any) -> bool:
    from apps.runs.kinds.generation import create_generation_run
    from apps.runs.models import Endpoint, PromptTemplate

    task, dataset = make_dataset(args.items)
    template = PromptTemplate.objects.create(
        task=task, name="qa", system_message="Answer briefly.", user_message="{{ question }}"
    )
    endpoint = Endpoint.objects.create(
        name="bench-rate",
        base_url=server.base_url,
        model="test-model",
        concurrency_limit=args.inflight,
        rpm_limit=None if args.unstated else args.rpm,
        tpm_limit=None if args.unstated else args.tpm,
        max_tokens=MAX_TOKENS,
        timeout_seconds=30,
        api_key_secret="sk-bench",
    )
    server.reset(stats_only=True)
    server.configure(log_size=4 * args.items)  # every request, for the 429s' times
    print(
        f"{args.items} items, two workers, {args.inflight} in flight at most, latency 0.3–1 s; "
        f"server and endpoint: {args.rpm} RPM, {args.tpm} TPM"
    )
    launched = time.monotonic()
    run = create_generation_run(
        dataset, endpoint, template, chunk_size=args.chunk_size, logging_mode="none"
    )
    landed = wait_for_run(run)
    stats = server.stats()
    rate = stats["rate"]
    span = rate["last"] - rate["first"]
    # n admissions span n - 1 gaps; the tokens of the last one are spent at its start.
    rpm = (rate["admitted"] - 1) / span * 60
    tokens = rate["admitted_tokens"] * (rate["admitted"] - 1) / rate["admitted"]
    tpm = tokens / span * 60
    mean_cost = rate["admitted_tokens"] / rate["admitted"]
    binding = "TPM" if args.tpm / mean_cost < args.rpm else "RPM"
    ratio = max(rpm / args.rpm, tpm / args.tpm)
    refused = stats["rate_limited"] / stats["requests"]
    whole = (run.finished_at - run.started_at).total_seconds()
    print(
        f"mean request {mean_cost:.1f} tokens: {binding} binds on average "
        f"({args.tpm / mean_cost:.0f} requests/min allowed by TPM)"
    )
    print(f"{'':>22} {'achieved':>10} {'limit':>8} {'ratio':>6}")
    print(f"{'requests/min':>22} {rpm:>10.1f} {args.rpm:>8} {rpm / args.rpm:>6.3f}")
    print(f"{'tokens/min':>22} {tpm:>10.0f} {args.tpm:>8} {tpm / args.tpm:>6.3f}")
    ratio_ok = ratio >= RATIO_GOAL
    refused_ok = refused < REFUSED_GOAL
    print(
        f"ratio to the binding limit: {ratio:.3f} (goal >= {RATIO_GOAL}) "
        f"{'ok' if ratio_ok else 'MISSED'}"
    )
    print(
        f"429s: {stats['rate_limited']} of {stats['requests']} requests = {refused:.2%} "
        f"(goal < {REFUSED_GOAL:.0%}) {'ok' if refused_ok else 'MISSED'}"
    )
    log = sorted(stats["log"], key=lambda e: e["time"])
    refused_at = [e["time"] - log[0]["time"] for e in log if e["status"] == 429]
    bins = [0] * (int(span // 30) + 1)
    for at in refused_at:
        bins[min(int(at // 30), len(bins) - 1)] += 1
    print(f"429s in each 30 s of the run: {' '.join(map(str, bins))}")
    # The first minute's 429s are those of the first burst, sent before any worker knew of a
    # limit (about one per request in flight): what any run pays once, whatever its length.
    later = [e for e in log if e["time"] - log[0]["time"] >= 60]
    later_refused = sum(1 for e in later if e["status"] == 429)
    if later:
        print(
            f"after the first minute: {later_refused} of {len(later)} requests answered 429 "
            f"= {later_refused / len(later):.2%}"
        )
    print(
        f"run: {run.done} done, {run.failed} failed in {whole:.1f} s "
        f"({landed - launched:.1f} s from launch); server span {span:.1f} s"
    )
    return not (ratio_ok and refused_ok)


if __name__ == "__main__":
    main()
