"""Generation throughput through the real path: one RQ worker process, the real engine, the
real openai SDK, SQLite, against the loopback test LLM server in its own process (no shared GIL).

For each in-flight limit (the endpoint's concurrency limit) a run of 2,000 items is started
while one worker waits; items/s is measured from the run's start to its end (and, stricter,
from the launch, which includes the worker picking the job up). The ceiling is
in-flight ÷ latency. Goals: ratio >= 0.95 at 8, >= 0.85 at 32, as high as possible at 128.

    .venv-test/bin/python bench/bench_generation.py [--items 2000] [--latency 0.1] [--inflight 8 32 128]
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOALS = {8: 0.95, 32: 0.85}

from bench.common import bench_dataset, fresh_endpoint, live_stack, wait_for_run  # noqa: E402


def bare_sdk(base_url: str, inflight: int, items: int) -> float:
    """items/s of a bare loop: the same SDK calls with nothing else (no engine, no database).
    The machine is shared, so this says what the machine allows right now."""
    import asyncio
    import json

    import httpx2
    import openai

    async def main() -> float:
        limits = httpx2.Limits(max_connections=inflight, max_keepalive_connections=inflight)
        http = openai.DefaultAioHttpClient(limits=limits, timeout=30)
        client = openai.AsyncOpenAI(
            api_key="sk-bench", base_url=base_url, max_retries=0, http_client=http
        )
        todo = list(range(items))

        async def lane() -> None:
            while todo:
                i = todo.pop()
                messages = [
                    {"role": "system", "content": "Answer briefly."},
                    {"role": "user", "content": f"Question {i}: what is {i} times {i}?"},
                ]
                response = await client.post(
                    "/chat/completions",
                    body={"model": "test-model", "messages": messages},
                    cast_to=httpx2.Response,
                )
                json.loads(await response.aread())

        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(inflight)))
        seconds = time.perf_counter() - started
        await client.close()
        return items / seconds

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--inflight", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--no-baseline", action="store_true", help="skip the bare-SDK loop")
    args = parser.parse_args()

    with live_stack("generation", latency=args.latency) as server:
        failed_goal = measure(args, server)
    sys.exit(1 if failed_goal else 0)


def measure(args: argparse.Namespace, server: Any) -> bool:
    """Print one line per in-flight limit; True if a goal was missed."""
    from apps.runs.kinds.generation import create_generation_run
    from apps.runs.models import PromptTemplate

    task, dataset = bench_dataset(args.items)
    template = PromptTemplate.objects.create(
        task=task, name="qa", system_message="Answer briefly.", user_message="{{ question }}"
    )
    failed_goal = False
    print(f"{args.items} items, {args.latency * 1000:.0f} ms latency, one worker, SQLite")
    print(
        f"{'in flight':>9} {'items/s':>9} {'ceiling':>8} {'ratio':>6} {'from launch':>12} "
        f"{'peak':>5} {'bare SDK':>9}  goal"
    )
    for inflight in args.inflight:
        endpoint = fresh_endpoint(server, f"bench-{inflight}", inflight)
        launched = time.monotonic()
        run = create_generation_run(
            dataset, endpoint, template, chunk_size=args.chunk_size, logging_mode="none"
        )
        landed = wait_for_run(run)
        seconds = (run.finished_at - run.started_at).total_seconds()
        rate = run.done / seconds
        ceiling = inflight / args.latency
        from_launch = run.done / (landed - launched) / ceiling
        peak = server.stats(log=False)["peak_concurrency"]
        goal = GOALS.get(inflight)
        verdict = "" if goal is None else ("ok" if rate / ceiling >= goal else "MISSED")
        failed_goal |= verdict == "MISSED"
        bare = ""
        if not args.no_baseline:
            bare_rate = bare_sdk(server.base_url, inflight, min(args.items, 50 * inflight))
            bare = f"{bare_rate / ceiling:.2f}"
        print(
            f"{inflight:>9} {rate:>9.1f} {ceiling:>8.0f} {rate / ceiling:>6.2f} "
            f"{from_launch:>12.2f} {peak:>5} {bare:>9}  "
            f"{'>= ' + str(goal) if goal else 'max'} {verdict}"
        )
    print(
        "ratio: the run's own items/s (its start to its end) / ceiling. from launch: the same, "
        "timed from the click\n(includes RQ handing the job to the worker). bare SDK: the "
        "same requests in a bare asyncio loop with\nno engine, Redis or database: what this "
        "(shared) machine allows right now."
    )
    return failed_goal


if __name__ == "__main__":
    main()
