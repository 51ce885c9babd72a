"""Judge throughput through the real path: one RQ worker process, the real engine and judge
kind, the real openai SDK, SQLite, against the loopback test LLM server in its own process.

For each (rounds per item, in-flight limit) a rubric judge run over 2,000 responses (a
dataset's response column, two subjects, JSON replies) is started while one worker waits.
Requests/s (items/s × rounds) is measured from the run's start to its end (and, stricter, from
the launch, which includes the worker picking the job up) and compared with the ceiling,
in-flight ÷ latency. Goal: ratio >= 0.85 at 32 in flight; as high as possible at 128 (where
one process's SDK client is the limit, see tests/llm_server.py's notes).

Then the results page of a judge run over `--results-items` items (3 subjects, 3 rounds)
through the Django test client: the full page (per-subject means, distributions, per-tag
means, first page of items) and the items table under each filter, p50/max server time and
query count, at 50 and 500 items a page. Goal: the query count does not grow with the page
size, and the full page stays under `RESULTS_GOAL_MS` at 100k items.

    .venv-test/bin/python bench/bench_judge.py [--items 2000] [--latency 0.1] [--inflight 32 128]
                                          [--rounds 1 3] [--results-items 100000]
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOALS = {32: 0.85}
RESULTS_GOAL_MS = 1000.0

from bench.common import bench_dataset, fresh_endpoint, live_stack, wait_for_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--inflight", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--results-items", type=int, default=100_000, help="0 skips it")
    args = parser.parse_args()

    reply = json.dumps({"reason": "Correct and clear.", "accuracy": 5, "clarity": 4})
    with live_stack("judge", latency=args.latency, default_reply=reply) as server:
        failed_goal = measure(args, server)
    sys.exit(1 if failed_goal else 0)


def measure(args: argparse.Namespace, server: Any) -> bool:
    """Print one line per (rounds, in-flight limit), then the rest; True if a goal was missed."""
    from django.db import transaction

    from apps.judges.launching import create_judge_run
    from apps.judges.models import Judge, Score

    task, dataset = bench_dataset(args.items, answered=True)
    failed_goal = False
    print(
        f"{args.items} items, {args.latency * 1000:.0f} ms latency, rubric judge with 2 "
        "subjects, one worker, SQLite"
    )
    print(
        f"{'rounds':>6} {'in flight':>9} {'items/s':>8} {'requests/s':>10} {'ceiling':>8} "
        f"{'ratio':>6} {'from launch':>12} {'peak':>5}  goal"
    )
    for rounds in args.rounds:
        judge = Judge.objects.create(
            task=task,
            name=f"bench-{rounds}",
            kind=Judge.Kind.RUBRIC,
            subjects=[
                {"name": "accuracy", "min": 1, "max": 5},
                {"name": "clarity", "min": 1, "max": 5},
            ],
            n_iter=rounds,
        )
        for inflight in args.inflight:
            endpoint = fresh_endpoint(server, f"bench-{rounds}-{inflight}", inflight)
            launched = time.monotonic()
            with transaction.atomic():
                run = create_judge_run(
                    judge,
                    endpoint=endpoint,
                    dataset=dataset,
                    source_column="response",
                    chunk_size=args.chunk_size,
                    logging_mode="none",
                )
            landed = wait_for_run(run, poll=0.02)
            scored = Score.objects.filter(run=run, status="ok").count()
            assert scored == 2 * args.items, scored
            seconds = (run.finished_at - run.started_at).total_seconds()
            items_rate = run.done / seconds
            rate = items_rate * rounds
            ceiling = inflight / args.latency
            from_launch = run.done * rounds / (landed - launched) / ceiling
            peak = server.stats(log=False)["peak_concurrency"]
            goal = GOALS.get(inflight)
            verdict = "" if goal is None else ("ok" if rate / ceiling >= goal else "MISSED")
            failed_goal |= verdict == "MISSED"
            print(
                f"{rounds:>6} {inflight:>9} {items_rate:>8.1f} {rate:>10.1f} {ceiling:>8.0f} "
                f"{rate / ceiling:>6.2f} {from_launch:>12.2f} {peak:>5}  "
                f"{'>= ' + str(goal) if goal else 'max'} {verdict}",
                flush=True,
            )
    rule_based(task, dataset)
    if args.results_items:
        failed_goal |= results_page(task, args.results_items)
    return failed_goal


def rule_based(task: object, dataset: object) -> None:
    """A metric judge over the same responses: no API, the engine and the database only."""
    from django.db import transaction

    from apps.judges.launching import create_judge_run
    from apps.judges.models import Judge

    judge = Judge.objects.create(
        task=task,
        name="bench-metric",
        kind=Judge.Kind.METRIC,
        metric="token_f1",
        subjects=[{"name": "token_f1", "min": 0, "max": 100}],
    )
    with transaction.atomic():
        run = create_judge_run(
            judge, dataset=dataset, source_column="response", logging_mode="none"
        )
    wait_for_run(run, poll=0.02)
    rate = run.done / (run.finished_at - run.started_at).total_seconds()
    print(f"\nrule-based (token F1, no API): {run.done} items at {rate:.0f} items/s")


def results_page(task: object, items: int) -> bool:
    """Time the results page of one judge run over `items` items; True if a goal was missed."""
    import random
    import statistics

    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment
    from django.urls import reverse

    from apps.accounts.models import User
    from apps.datasets.models import Dataset, Item
    from apps.judges.models import Judge, JudgeRun, Score
    from bench.bench_leaderboard import bulk_insert

    subjects = ["accuracy", "completeness", "clarity"]
    tags = [["easy"], ["hard"], ["easy", "math"], ["hard", "code"], []]
    started = time.monotonic()
    dataset = Dataset.objects.create(
        task=task,
        name="results",
        format="csv",
        status="ready",
        row_count=items,
        columns=["question"],
        tag_counts={"easy": 1, "hard": 1, "math": 1, "code": 1},
    )
    bulk_insert(
        Item,
        (
            {
                "dataset_id": dataset.pk,
                "position": i,
                "key": str(i),
                "fields": {"question": f"q{i}"},
                "tags": tags[i % 5],
                "tags_text": "".join(f"|{t}" for t in tags[i % 5]) + "|" if tags[i % 5] else "",
            }
            for i in range(items)
        ),
    )
    judge = Judge.objects.create(
        task=task,
        name="results",
        kind="rubric",
        n_iter=3,
        subjects=[{"name": s, "min": 1, "max": 5} for s in subjects],
    )
    run = JudgeRun.create_with(
        judge,
        task=task,
        kind="judge",
        dataset=dataset,
        source_column="question",
        status="completed_with_failures",
        total=items,
        launch=1,
    )
    rng = random.Random(7)
    ids = list(dataset.items.order_by("position").values_list("id", flat=True))

    def scores():
        for n, item_id in enumerate(ids):
            failed = n % 50 == 49
            for subject in subjects:
                rounds = [rng.randint(1, 5) for _ in range(3)]
                value = None if failed else sum(rounds) / 3
                yield {
                    "run_id": run.pk,
                    "item_id": item_id,
                    "subject": subject,
                    "status": "failed" if failed else "ok",
                    "judge_value": value,
                    "final_value": value,
                    "round_values": rounds,
                    "spread": max(rounds) - min(rounds),
                    "launch": 1,
                    "error_kind": "unparseable" if failed else "",
                }

    bulk_insert(Score, scores())
    print(
        f"\nresults page: {items} items × {len(subjects)} subjects "
        f"(made in {time.monotonic() - started:.0f} s)"
    )
    setup_test_environment()  # the test client's host, without a test database
    user = User.objects.create_user(username="bench", password="x", role="viewer")
    client = Client()
    client.force_login(user)
    url = reverse("judges:results", args=[run.pk])
    partial = {"HX-Request": "true", "HX-Target": "judge-items"}
    failed_url = reverse("judges:failed", args=[run.pk])
    cases = [
        ("full page", url, {}, {}),
        ("items, page 1000", url, {"page": "1000"}, partial),
        ("items, failed", url, {"status": "failed"}, partial),
        ("items, tag hard", url, {"tag": "hard"}, partial),
        ("items, accuracy 4–5", url, {"subject": "accuracy", "min": "4", "max": "5"}, partial),
        ("items, rounds disagree", url, {"disagree": "1"}, partial),
        ("items, failed + tag", url, {"status": "failed", "tag": "easy"}, partial),
        ("items, scored only", url, {"status": "ok"}, partial),
        ("failed items page", failed_url, {}, {}),
        ("failed items, page 50", failed_url, {"page": "50"}, {}),
    ]
    missed = False
    print(f"{'view':<24} {'per page':>8} {'p50 ms':>8} {'max ms':>8} {'queries':>8}")
    for label, where, query, headers in cases:
        counts = {}
        for per_page in (50, 500):
            times = []
            for _ in range(3):
                with CaptureQueriesContext(connection) as queries:
                    begun = time.perf_counter()
                    response = client.get(where, {**query, "per_page": per_page}, headers=headers)
                    times.append((time.perf_counter() - begun) * 1000)
                assert response.status_code == 200, response.status_code
            counts[per_page] = len(queries)
            print(
                f"{label:<24} {per_page:>8} {statistics.median(times):>8.0f} "
                f"{max(times):>8.0f} {len(queries):>8}"
            )
            if (
                label == "full page"
                and per_page == 50
                and statistics.median(times) > RESULTS_GOAL_MS
            ):
                missed = True
        if counts[50] != counts[500]:
            print(f"  MISSED: {label} makes more queries at 500 a page")
            missed = True
    print(
        f"goal: full page p50 <= {RESULTS_GOAL_MS:.0f} ms at 50 a page, queries flat: "
        f"{'MISSED' if missed else 'ok'}"
    )
    return missed


if __name__ == "__main__":
    main()
