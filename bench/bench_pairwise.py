"""Pairwise run throughput through the real path: one RQ worker process, the real engine, the
real openai SDK, SQLite, against the loopback test LLM server in its own process.

Two response sets of N items are compared (one pair): each comparison asks two requests (both
orders), so the ceiling is in-flight ÷ latency ÷ 2 comparisons per second. No goal yet: the
first measurement (0.91 / 0.79 / 0.34 at 8 / 32 / 128) is the baseline to improve on.

    .venv-test/bin/python bench/bench_pairwise.py [--items 1000] [--latency 0.1] [--inflight 8 32 128]
"""

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOALS: dict[int, float] = {}

from bench.common import bench_dataset, fresh_endpoint, live_stack, wait_for_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--inflight", type=int, nargs="+", default=[8, 32, 128])
    args = parser.parse_args()
    with live_stack("pairwise", latency=args.latency, default_reply='{"verdict": "A"}') as server:
        failed = measure(args, server)
    sys.exit(1 if failed else 0)


def measure(args: argparse.Namespace, server: Any) -> bool:
    from apps.judges.models import Judge
    from apps.judges.pairwise import create_pairwise_run
    from apps.runs.models import Response, Run

    task, dataset = bench_dataset(args.items)
    sets = []
    for label in ("left", "right"):
        run = Run.objects.create(
            task=task, kind=Run.Kind.GENERATION, dataset=dataset, label=label, status="completed"
        )
        Response.objects.bulk_create(
            Response(run=run, item_id=pk, status="ok", text=f"{label} answer {pk}", launch=1)
            for pk in dataset.items.values_list("pk", flat=True)
        )
        sets.append(run)
    judge = Judge.objects.create(task=task, name="duel", kind=Judge.Kind.PAIRWISE, subjects=[])
    print(
        f"{args.items} comparisons (2 requests each), {args.latency * 1000:.0f} ms latency, one worker, SQLite"
    )
    print(f"{'in flight':>9} {'comparisons/s':>14} {'ceiling':>8} {'ratio':>6} {'peak':>5}  goal")
    failed = False
    for inflight in args.inflight:
        endpoint = fresh_endpoint(server, f"bench-{inflight}", inflight)
        run = create_pairwise_run(judge, sets, endpoint=endpoint, logging_mode="none")
        wait_for_run(run)
        seconds = (run.finished_at - run.started_at).total_seconds()
        rate = run.done / seconds
        ceiling = inflight / args.latency / 2
        peak = server.stats(log=False)["peak_concurrency"]
        goal = GOALS.get(inflight)
        verdict = "" if goal is None else ("ok" if rate / ceiling >= goal else "MISSED")
        failed |= verdict == "MISSED"
        print(
            f"{inflight:>9} {rate:>14.1f} {ceiling:>8.0f} {rate / ceiling:>6.2f} {peak:>5}  "
            f"{'>= ' + str(goal) if goal else 'max'} {verdict}"
        )
    return failed


if __name__ == "__main__":
    main()
