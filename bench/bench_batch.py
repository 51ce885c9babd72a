"""Batch mode's own cost around the provider: one RQ worker process, SQLite, the loopback
server's Batch API in its own process answering every line at once.

A generation run of N items in batch mode is timed in three stretches: rendering and
uploading the JSONL file (start → the batch exists at the provider), the provider's work (the
loopback server, not ours), and reading the results and writing them through the plug-in
(the batch completed → the run finished; includes up to one poll interval plus a watchdog tick,
about 2 s). No goal: what a real provider takes (minutes to hours) dwarfs both; the numbers
show that neither stretch grows out of proportion with N.

    .venv-test/bin/python bench/bench_batch.py [--items 2000 10000]
"""

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bench_dataset, fresh_endpoint, live_stack, wait_for_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[2000, 10000])
    args = parser.parse_args()
    os.environ["EVALSITE_BATCH_POLL_SECONDS"] = "0.2"  # the worker's polls
    with live_stack("batch") as server:
        server.batches(lines_per_second=1e9)
        measure(args, server)


def measure(args: argparse.Namespace, server: Any) -> None:
    from apps.datasets.models import Task
    from apps.runs.kinds.generation import create_generation_run
    from apps.runs.models import PromptTemplate, Response, RunBatch

    print("items  render+upload  provider  read+write   items/s written   total")
    for n, items in enumerate(args.items):
        task, dataset = bench_dataset(items)
        template = PromptTemplate.objects.create(task=task, name="q", user_message="{{ question }}")
        endpoint = fresh_endpoint(server, f"batch-{n}", 8)
        endpoint.supports_batch = True
        endpoint.save()
        started = time.monotonic()
        run = create_generation_run(dataset, endpoint, template, logging_mode="none", batch=True)
        while not RunBatch.objects.filter(run=run).exclude(batch_id="").exists():
            time.sleep(0.05)
        sent = time.monotonic()
        while not all(b["status"] == "completed" for b in server.batches()["batches"]):
            time.sleep(0.05)
        answered = time.monotonic()
        landed = wait_for_run(run)
        assert Response.objects.filter(run=run).count() == items
        print(
            f"{items:>5} {sent - started:>13.1f}s {answered - sent:>8.1f}s "
            f"{landed - answered:>9.1f}s {items / (landed - answered):>16.0f} "
            f"{landed - started:>7.1f}s"
        )
        run.delete()
        Task.objects.filter(pk=task.pk).delete()
        server.reset()
        server.batches(lines_per_second=1e9)


if __name__ == "__main__":
    main()
