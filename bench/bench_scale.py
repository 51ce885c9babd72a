"""Benchmark evalsite at scale on PostgreSQL (#33.1): one task with many models' judge runs.

    .venv-test/bin/python bench/bench_scale.py [--models 20] [--items 100000] [--subjects 5]
                                               [--repeat 20] [--quick]

Uses DATABASE_URL when it names a PostgreSQL database (its tables are created by migrate; the
benchmark's rows stay there), else starts a throwaway PostgreSQL cluster in a temporary
directory as bin/test does (fsync off; deleted afterwards). Builds models × items × subjects
scores with COPY, each generation run with 3 epochs (every score carries 3 epoch values),
overrides on 1 % of the scores and a review on another 1 %, then prints p50/p95 and the ratio
to each limit of #33.2 for: the board cold (first request after a restart: the process's memos
empty, the stored run summaries kept; and once with no summaries at all) and warm, right after
an override, with a tag filter, with common items only, majority vote over 3 epochs; the grid
and regressions pages; the review list at page 1 and at the last page; the agreement page;
exports (CSV/JSONL rows/s, peak memory); the database's size per million scores. It states
the machine and the data volume first.

The full size (20 × 100k × 5 = 10M scores) wants ~10 GB of disk and an hour on a quiet
machine; `--quick` (3 × 20k × 5 = 300k scores) checks the benchmark itself in a few minutes.

`--keep DIR` keeps the throwaway cluster's data in DIR: a later run with the same DIR and
sizes skips the build (it migrates the kept database and measures again), so a change to the
code can be measured on the same data in minutes. `--only board,pages,review,exports,size`
measures some sections only.
"""

import argparse
import contextlib
import glob
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_leaderboard import bulk_insert, make_dataset, p95, timed  # noqa: E402

BOARD_WARM_MS = 300.0
BOARD_COLD_MS = 3000.0
LIST_MS = 100.0
PAGE_MS = 300.0  # grid, regressions, agreement: the board's limit
EXPORT_ROWS_S = 50_000
SUBJECT_NAMES = ["accuracy", "completeness", "clarity", "safety", "style", "tone", "format"]
EPOCHS = 3
SHARE = 100  # 1 in SHARE scores overridden, another 1 in SHARE reviewed


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres(keep: Path | None = None) -> Iterator[str]:
    """DATABASE_URL if it is PostgreSQL, else a throwaway cluster's URL (stopped afterwards;
    deleted too unless `keep` names the directory that holds it across runs)."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        yield url
        return
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise SystemExit("no PostgreSQL here: set DATABASE_URL or install postgresql")
    bindir = Path(found[-1]).parent
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    work = (
        keep.resolve()
        if keep is not None
        else Path(tempfile.mkdtemp(prefix="evalsite-bench-scale-"))
    )
    as_pg: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(work, "postgres", "postgres")
        os.chmod(work, 0o755)
        as_pg = ["runuser", "-u", "postgres", "--"]
    data, port = work / "data", free_port()
    kept = (data / "PG_VERSION").exists()
    if not kept:
        initdb(bindir, data, as_pg, work)
    server = start_server(bindir, data, port, as_pg, work)
    try:
        wait_ready(bindir, port, server, work)
        if not kept:
            subprocess.run(
                [
                    str(bindir / "createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "postgres",
                    "evalsite",
                ],
                check=True,
            )
        yield f"postgres://postgres@127.0.0.1:{port}/evalsite"
    finally:
        server.terminate()
        server.wait(timeout=120)
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def initdb(bindir: Path, data: Path, as_pg: list[str], work: Path) -> None:
    subprocess.run(
        [
            *as_pg,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        cwd=work,
    )


def start_server(
    bindir: Path, data: Path, port: int, as_pg: list[str], work: Path
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *as_pg,
            str(bindir / "postgres"),
            "-D",
            str(data),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-k",
            str(work),
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "shared_buffers=256MB",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(work / "postgres.log", "a"),
        cwd=work,
    )


def wait_ready(bindir: Path, port: int, server: subprocess.Popen, work: Path) -> None:
    deadline = time.monotonic() + 120
    while subprocess.run(
        [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
    ).returncode:
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"PostgreSQL did not start: see {work / 'postgres.log'}")
        time.sleep(0.2)


def setup_django(url: str, workdir: Path) -> None:
    os.environ.update(
        DATABASE_URL=url,
        EVALSITE_DATA_DIR=str(workdir),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DEBUG="0",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def generate(models: int, items: int, subjects: list[str], user: Any) -> dict[str, Any]:
    """The task: one dataset, `models` generation runs (3 epochs) each judged on every item and
    subject; 1 % of the scores overridden by `user`, another 1 % reviewed by `user`."""
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.datasets.models import Task
    from apps.judges.models import Judge, JudgeRun, Score, ScoreEvent
    from apps.review.models import Review
    from apps.runs.models import Run

    started = time.perf_counter()
    rng = random.Random(33)
    now = timezone.now()
    with transaction.atomic():
        task = Task.objects.create(slug="scale", name="Scale")
        dataset, item_ids = make_dataset(task, "scale", items)
        judge = Judge.objects.create(
            task=task,
            name="quality",
            kind="rubric",
            subjects=[{"name": s, "min": 1, "max": 5} for s in subjects],
        )
        runs = []
        for r in range(models):
            gen = Run.objects.create(
                task=task,
                kind="generation",
                dataset=dataset,
                label=f"model-{r:02d}",
                status="completed",
                epochs=EPOCHS,
            )
            run = JudgeRun.create_with(
                judge,
                task=task,
                kind="judge",
                dataset=dataset,
                source_run=gen,
                status="completed",
                total=items * EPOCHS,
                done=items * EPOCHS,
            )
            runs.append(run)
            skill = 2.5 + r * 0.1

            def scores(run_id: int = run.pk, skill: float = skill) -> Iterator[dict[str, Any]]:
                n = 0
                for pk in item_ids:
                    for subject in subjects:
                        n += 1
                        values = [
                            float(min(5, max(1, round(rng.gauss(skill, 1.1)))))
                            for _ in range(EPOCHS)
                        ]
                        judged = sum(values) / EPOCHS
                        row = {
                            "run_id": run_id,
                            "item_id": pk,
                            "subject": subject,
                            "status": "ok",
                            "judge_value": judged,
                            "final_value": judged,
                            "round_values": [judged],
                            "epoch_values": values,
                            "epoch_spread": max(values) - min(values),
                        }
                        if n % SHARE == 0:
                            override = float(rng.randint(1, 5))
                            row |= {
                                "override_value": override,
                                "final_value": override,
                                "override_reason": "bench",
                                "override_by_id": user.pk,
                                "override_at": now,
                                "revision": 1,
                            }
                        yield row

            bulk_insert(Score, scores())
        # Every override leaves its event (boards lay overrides over the stored summaries by
        # them), and a review on 1 in SHARE scores, beside the overridden ones.
        with connection.cursor() as cursor:
            cursor.execute(
                f'INSERT INTO "{ScoreEvent._meta.db_table}" '
                "(score_id, kind, old_value, new_value, reason, user_id, created_at) "
                "SELECT id, %s, judge_value, override_value, override_reason, override_by_id, "
                f'override_at FROM "{Score._meta.db_table}" WHERE override_value IS NOT NULL',
                [ScoreEvent.Kind.OVERRIDE],
            )
            cursor.execute(
                f'INSERT INTO "{Review._meta.db_table}" '
                "(score_id, user_id, value, reason, seconds, blind, created_at) "
                f'SELECT id, %s, final_value, %s, 30.0, false, %s FROM "{Score._meta.db_table}" '
                f"WHERE id %% {SHARE} = {SHARE // 2}",
                [user.pk, "bench", now],
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"task": task, "runs": runs, "seconds": time.perf_counter() - started}


# Overrides land on other scores in each run of the benchmark (a kept database remembers the
# last run's), always with a value the score does not hold yet: a change the board must show.
fresh = random.Random()


def changed_value(score: Any, n: int) -> float:
    """A value from 1 to 5 that differs from the score's final value."""
    return next(
        value for value in (float(1 + (n + k) % 5) for k in range(5)) if value != score.final_value
    )


def line(name: str, values: list[float], limit: float) -> None:
    worst = p95(values)
    print(
        f"{name}: p50 {statistics.median(values):.0f} ms, p95 {worst:.0f} ms "
        f"→ {worst / limit:.2f}× the {limit:.0f} ms limit"
    )


def bench_board(data: dict[str, Any], client: Any, user: Any, repeat: int) -> None:
    from django.urls import reverse

    from apps.judges.models import Score
    from apps.leaderboards import memo
    from apps.leaderboards.models import RunSummary

    url = reverse("leaderboards:task", args=[data["task"].slug])

    def get(params: dict[str, str] | None = None) -> Callable[[], None]:
        def fetch() -> None:
            response = client.get(url, params or {})
            assert response.status_code == 200, response.status_code

        return fetch

    RunSummary.objects.all().delete()
    memo.clear_all()
    [unsummarised] = timed(get(), 1)
    print(f"board: first request with no stored run summaries (builds them): {unsummarised:.0f} ms")
    colds = []
    for _ in range(max(3, repeat // 4)):
        memo.clear_all()  # a restarted process: memos empty, stored summaries kept
        colds += timed(get(), 1)
    line("board: cold (first request after a restart)", colds, BOARD_COLD_MS)
    line("board: warm", timed(get(), repeat), BOARD_WARM_MS)
    changed = []
    for n in range(repeat):
        run = data["runs"][n % len(data["runs"])]
        score = Score.objects.filter(run=run, status="ok").order_by("pk")[fresh.randrange(1000)]
        score.override(changed_value(score, n), user, "benchmark override")
        changed += timed(get(), 1)
    line("board: right after an override", changed, BOARD_WARM_MS)
    line("board: tag filter (tag=math)", timed(get({"tag": "math"}), repeat), BOARD_WARM_MS)
    line("board: common items only", timed(get({"common": "1"}), repeat), BOARD_WARM_MS)
    bench_majority(data, get, user, repeat)


def bench_majority(
    data: dict[str, Any], get: Callable[..., Callable[[], None]], user: Any, repeat: int
) -> None:
    """The board with majority vote over the epochs: from the arrays each judge run stores
    when it ends (the finishing job's `items.judge_arrays`, done here for runs that ended
    before it stored them), cold, warm, right after an override and with a tag filter."""
    from apps.judges.models import Score
    from apps.leaderboards import items, memo

    majority = {"epochs": "majority"}
    name = f"board: majority vote over {EPOCHS} epochs"
    started, cpu = time.perf_counter(), time.process_time()
    for run in data["runs"]:
        items.judge_arrays(run)
    print(
        f"{name}: each judge run's stored arrays (the finishing job's part, or read if kept): "
        f"{(time.perf_counter() - started) / len(data['runs']):.1f} s wall, "
        f"{(time.process_time() - cpu) / len(data['runs']):.1f} s CPU per run"
    )
    colds = []
    for _ in range(3):
        memo.clear_all()  # a restarted process: memos empty, stored summaries and arrays kept
        colds += timed(get(majority), 1)
    line(f"{name}, cold (first request after a restart)", colds, BOARD_COLD_MS)
    line(f"{name}, warm", timed(get(majority), repeat), BOARD_WARM_MS)
    changed = []
    for n in range(max(3, repeat // 2)):
        run = data["runs"][n % len(data["runs"])]
        score = Score.objects.filter(run=run, status="ok").order_by("pk")[fresh.randrange(1000)]
        score.override(changed_value(score, n), user, "benchmark override")
        changed += timed(get(majority), 1)
    line(f"{name}, right after an override", changed, BOARD_WARM_MS)
    line(
        f"{name}, tag filter (tag=math)",
        timed(get({**majority, "tag": "math"}), repeat),
        BOARD_WARM_MS,
    )


def bench_pages(data: dict[str, Any], client: Any, repeat: int) -> None:
    """The task's other pages a user opens from the board, each at the board's warm limit.
    Pages not yet kept between requests (the judge's bias report reads every score of its
    runs) are measured with fewer repeats, so the benchmark stays an hour at 10M."""
    from django.urls import reverse

    slug = data["task"].slug
    first, last = data["runs"][0], data["runs"][-1]
    judge = first.judged_with.judge_id
    pages: dict[str, tuple[str, dict[str, str], int]] = {
        "grid": (reverse("leaderboards:grid", args=[slug]), {}, repeat),  # every model
        "regressions": (  # the first model vs the last
            reverse("leaderboards:regressions", args=[slug]),
            {"a": str(first.pk), "b": str(last.pk)},
            repeat,
        ),
        "agreement": (reverse("leaderboards:agreement", args=[slug]), {}, repeat),
        "compare": (
            reverse("leaderboards:compare", args=[slug]),
            {"a": str(first.pk), "b": str(last.pk)},
            repeat,
        ),
        "judge alignment": (reverse("leaderboards:judge-alignment", args=[judge]), {}, 3),
        "judge bias": (reverse("leaderboards:judge-bias", args=[judge]), {}, 2),
        "judge run results": (reverse("judges:results", args=[first.pk]), {}, 3),
        "run": (reverse("runs:detail", args=[first.pk]), {}, repeat),
        "task": (reverse("datasets:task-detail", args=[slug]), {}, repeat),
    }
    for name, (url, params, times) in pages.items():

        def fetch(url: str = url, params: dict[str, str] = params) -> None:
            response = client.get(url, params)
            assert response.status_code == 200, (url, response.status_code)

        [first_ms] = timed(fetch, 1)
        print(f"{name} page: first request {first_ms:.0f} ms")
        line(f"{name} page: warm", timed(fetch, times), PAGE_MS)


def bench_review_list(run: Any, client: Any, items: int, repeat: int) -> None:
    from django.urls import reverse

    url = reverse("review:run", args=[run.pk])
    client.get(url)  # the first visit computes the run's review counts once (then cached)
    per_page = 50
    last = -(-items // per_page)
    for page in (1, last):
        params = {"per_page": str(per_page), "page": str(page)}

        def fetch(params: dict[str, str] = params) -> None:
            response = client.get(url, params)
            assert response.status_code == 200, response.status_code

        line(
            f"review list: page {page} of {last} ({per_page} per page)",
            timed(fetch, repeat),
            LIST_MS,
        )
    # Every filter the list offers, at its first and last page; the first request of a filter
    # reads which items it lists (kept until the run's results or a review change).
    filters = [
        {"review": "unreviewed"},
        {"review": "reviewed"},
        {"review": "overridden"},
        {"status": "ok"},
        {"status": "failed"},
        {"tag": "math"},
        {"assigned": "none"},
        {"q": "what"},
    ]
    for found in filters:
        name = ", ".join(f"{k}={v}" for k, v in found.items())
        for page in ("1", "last"):
            params = {**found, "per_page": str(per_page), "page": page}

            def fetch(params: dict[str, str] = params) -> None:
                response = client.get(url, params)
                assert response.status_code == 200, response.status_code

            if page == "1":
                [first] = timed(fetch, 1)
                print(f"review list: {name}, first request {first:.0f} ms")
            line(f"review list: {name}, page {page}", timed(fetch, repeat), LIST_MS)


def bench_exports(run: Any, items: int, subjects: int) -> None:
    from apps.leaderboards import exports

    for name, make, header in (
        ("CSV", exports.results_csv, 1),
        ("JSONL", exports.results_jsonl, 0),
    ):
        start, cpu = time.perf_counter(), time.process_time()
        size = lines = 0
        for chunk in make(run):
            size += len(chunk)
            lines += chunk.count("\n")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        rows = lines - header
        rate = rows / seconds
        print(
            f"export {name}: {rows:,} rows for {items:,} items × {subjects} subjects "
            f"({size / 1e6:.0f} MB) in {seconds:.1f} s ({cpu:.1f} s CPU here) = {rate:,.0f} "
            f"rows/s → {rate / EXPORT_ROWS_S:.2f}× the {EXPORT_ROWS_S:,} rows/s goal"
        )
    for name, make in (("CSV", exports.results_csv), ("JSONL", exports.results_jsonl)):
        tracemalloc.start()
        size = sum(len(chunk) for chunk in make(run))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"export {name}: peak traced memory {peak / 1e6:.1f} MB "
            f"while writing {size / 1e6:.0f} MB"
        )


def bench_size(scores: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        [[size]] = cursor.fetchall()
    print(
        f"database: {size / 1e9:.2f} GB for {scores:,} scores = "
        f"{size / 1e6 / (scores / 1e6):,.0f} MB per million scores (with items, reviews, indexes)"
    )


SECTIONS = ("size", "board", "pages", "review", "exports")


def volume_name(models: int, items: int, subjects: int) -> str:
    return f"Scale {models} models × {items} items × {subjects} subjects"


def kept_data(models: int, items: int, subjects: int) -> dict[str, Any] | None:
    """The data a kept cluster already holds for these sizes (None: build it)."""
    from apps.datasets.models import Task
    from apps.runs.models import Run

    task = Task.objects.filter(slug="scale").first()
    if task is None:
        return None
    if task.name != volume_name(models, items, subjects):
        raise SystemExit(f"the kept database holds {task.name!r}: use another --keep directory")
    runs = list(Run.objects.filter(task=task, kind="judge").order_by("pk"))
    return {"task": task, "runs": runs, "seconds": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--subjects", type=int, default=5, choices=range(1, 8))
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 models × 20k items × 5 subjects")
    parser.add_argument("--keep", type=Path, help="keep the PostgreSQL cluster in this directory")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = parser.parse_args()
    if args.quick:
        args.models, args.items, args.repeat = 3, 20_000, 8
    only = set(args.only.split(","))
    if unknown := only - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}: choose from {', '.join(SECTIONS)}")
    # A `kill` (or bench/run's timeout) stops the throwaway PostgreSQL too: `finally` runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    subjects = SUBJECT_NAMES[: args.subjects]
    scores = args.models * args.items * len(subjects)
    with (
        postgres(args.keep) as url,
        tempfile.TemporaryDirectory(prefix="evalsite-bench-scale-data-") as tmp,
    ):
        setup_django(url, Path(tmp))
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment

        setup_test_environment()  # the test client's templates/context without a test DB
        from apps.accounts.models import User
        from tests.base import make_user

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            [[version]] = cursor.fetchall()
        print(
            f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; PostgreSQL {version}"
        )
        data = kept_data(args.models, args.items, len(subjects))
        user = User.objects.filter(username="bench-admin").first() or make_user(
            "admin", "bench-admin"
        )
        if data is None:
            data = generate(args.models, args.items, subjects, user)
            data["task"].name = volume_name(args.models, args.items, len(subjects))
            data["task"].save(update_fields=["name"])
        print(
            f"volume: {args.models} models × {args.items:,} items × {len(subjects)} subjects = "
            f"{scores:,} scores ({EPOCHS} epoch values each), {scores // SHARE:,} overrides, "
            f"{scores // SHARE:,} reviews; "
            + (
                f"built in {data['seconds']:.0f} s"
                if data["seconds"]
                else "kept from an earlier run"
            )
        )
        client = Client()
        client.force_login(user)
        if "size" in only:
            bench_size(scores)
        if "board" in only:
            bench_board(data, client, user, args.repeat)
        if "pages" in only:
            bench_pages(data, client, args.repeat)
        if "review" in only:
            bench_review_list(data["runs"][0], client, args.items, args.repeat)
        if "exports" in only:
            bench_exports(data["runs"][0], args.items, len(subjects))
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        connection.close()


if __name__ == "__main__":
    main()
