"""Multi-turn generation throughput through the real path: one RQ worker process, the real
engine, the real openai SDK, SQLite, against the loopback test LLM server in its own process.

Each item is a conversation of `--turns` user turns; a multi-turn run asks them in order, each
with the answers before it in context, and commits each turn as it finishes (a runs.Turn row).
Turns of one item cannot overlap, so the ceiling is in-flight ÷ latency requests per second,
i.e. in-flight ÷ latency ÷ turns items per second. Goal (#27): ratio >= 0.85 at 32 in flight.

The machine is shared, so each line also times a single-turn run of as many requests (items
× turns one-turn items, same endpoint limits) right after: "vs 1-turn" is the multi-turn run's
turns/s over that run's requests/s, what turn-by-turn asking costs on this machine now.

    .venv-test/bin/python bench/bench_multi_turn.py [--items 600] [--turns 3] [--latency 0.1] [--inflight 8 32]
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOALS = {32: 0.85}

from bench.common import bench_dataset, fresh_endpoint, live_stack, wait_for_run  # noqa: E402


def dialogues(items: int, turns: int) -> tuple[Any, Any]:
    """Task "bench" with `items` conversations of `turns` user turns each (MT-Bench's shape)."""
    from apps.datasets.models import Dataset, Item, Task

    task = Task.objects.create(slug="bench", name="Bench")
    dataset = Dataset.objects.create(
        task=task,
        name="dialogues",
        format="jsonl",
        status="ready",
        row_count=items,
        columns=["id", "turns"],
        mapping={"id_column": "id", "input_columns": [], "conversation_column": "turns"},
    )

    def conversation(i: int) -> list[dict[str, str]]:
        return [
            {"role": "user", "content": f"Item {i}, turn {t}: what is {i} times {t}?"}
            for t in range(1, turns + 1)
        ]

    Item.objects.bulk_create(
        Item(
            dataset=dataset,
            position=i,
            key=str(i),
            fields={"id": str(i), "turns": conversation(i)},
            conversation=conversation(i),
        )
        for i in range(items)
    )
    return task, dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--inflight", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--no-reference", action="store_true", help="skip the single-turn run")
    args = parser.parse_args()

    with live_stack("multi-turn", latency=args.latency) as server:
        failed_goal = measure(args, server)
    sys.exit(1 if failed_goal else 0)


def measure(args: argparse.Namespace, server: Any) -> bool:
    """Print one line per in-flight limit; True if a goal was missed."""
    from apps.runs.kinds.generation import create_generation_run
    from apps.runs.models import PromptTemplate, Turn

    task, dataset = dialogues(args.items, args.turns)
    template = PromptTemplate.objects.create(
        task=task,
        name="chat",
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "conversation"}],
    )
    plain_task, plain = bench_dataset(args.items * args.turns, slug="bench-single")
    single = PromptTemplate.objects.create(
        task=plain_task, name="qa", system_message="Answer briefly.", user_message="{{ question }}"
    )
    failed_goal = False
    print(
        f"{args.items} items × {args.turns} turns, {args.latency * 1000:.0f} ms latency, "
        "one worker, SQLite"
    )
    print(
        f"{'in flight':>9} {'items/s':>9} {'turns/s':>9} {'ceiling':>8} {'ratio':>6} "
        f"{'from launch':>12} {'peak':>5} {'vs 1-turn':>9}  goal"
    )
    for inflight in args.inflight:
        endpoint = fresh_endpoint(server, f"bench-{inflight}", inflight)
        launched = time.monotonic()
        run = create_generation_run(
            dataset,
            endpoint,
            template,
            chunk_size=args.chunk_size,
            logging_mode="none",
            multi_turn=True,
            use_cache=False,
        )
        landed = wait_for_run(run)
        turns = Turn.objects.filter(run=run).count()
        if turns != args.items * args.turns:
            raise SystemExit(f"{turns} turns written, not {args.items * args.turns}")
        seconds = (run.finished_at - run.started_at).total_seconds()
        rate = run.done / seconds
        ceiling = inflight / args.latency / args.turns
        from_launch = run.done / (landed - launched) / ceiling
        peak = server.stats(log=False)["peak_concurrency"]
        goal = GOALS.get(inflight)
        verdict = "" if goal is None else ("ok" if rate / ceiling >= goal else "MISSED")
        failed_goal |= verdict == "MISSED"
        versus = ""
        if not args.no_reference:
            endpoint = fresh_endpoint(server, f"single-{inflight}", inflight)
            reference = create_generation_run(
                plain, endpoint, single, chunk_size=args.chunk_size, logging_mode="none"
            )
            wait_for_run(reference)
            elapsed = (reference.finished_at - reference.started_at).total_seconds()
            versus = f"{(turns / seconds) / (reference.done / elapsed):.2f}"
        print(
            f"{inflight:>9} {rate:>9.1f} {turns / seconds:>9.1f} {ceiling:>8.1f} "
            f"{rate / ceiling:>6.2f} {from_launch:>12.2f} {peak:>5} {versus:>9}  "
            f"{'>= ' + str(goal) if goal else 'max'} {verdict}"
        )
    print(
        "ratio: the run's own items/s (its start to its end) / (in flight ÷ latency ÷ turns).\n"
        "from launch: the same, timed from the click (includes RQ handing the job over).\n"
        "peak: most requests in flight at once. vs 1-turn: turns/s over the requests/s of a\n"
        "single-turn run of as many requests, timed right after on this (shared) machine."
    )
    return failed_goal


if __name__ == "__main__":
    main()
