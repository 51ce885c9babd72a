"""Imports at scale on PostgreSQL (#33.4): a 1M-row CSV, JSONL, Parquet and xlsx file each imported
as the worker imports them, and a 5 GB file imported by a real worker with its progress on the page.

    .venv-test/bin/python bench/bench_import_scale.py [--rows 1000000] [--formats csv,jsonl,...]
                                                      [--no-tracemalloc] [--files DIR]
    .venv-test/bin/python bench/bench_import_scale.py --huge [--huge-gb 5]

Uses DATABASE_URL when it names PostgreSQL, else a throwaway cluster (bench_scale's `postgres()`).
The files are written first (not timed; `--files DIR` keeps them for the next run). Each import
runs in a fresh process (`fill_dataset_from_file`, what the import job calls), twice: once
timed, with the peak resident memory (VmHWM) above the process's start, the process's CPU time
and its PostgreSQL backend's CPU time (from /proc: others load this machine, CPU says what the
import itself cost); once under tracemalloc for Python's own peak. Limits: CSV ≥ 50k rows/s;
peak memory ≤ 3 × the file's longest row + 64 MB (a batch of rows and the driver's buffers),
for every format. Ratios: time and memory ≤ 1 is within the limit, rows/s ≥ 1.

`--huge` writes a CSV of `--huge-gb` GB (~200-byte rows), starts Redis and an `rqworker imports`
process, creates the import as the upload page does (`start_background_import`), and polls the
dataset's page as a signed-in user (the HTMX partial the page refreshes every 2 s), printing
the progress shown there, the worker's memory and the rate, until the dataset is ready.
"""

import argparse
import contextlib
import csv
import datetime
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_scale import postgres  # noqa: E402

CSV_ROWS_S = 50_000
CONSTANT_MB = 64.0
FORMATS = ("csv", "jsonl", "parquet", "xlsx")
COLUMNS = ["id", "question", "answer", "tags", "response", "score", "asked", "share"]
WORDS = [
    "the",
    "model",
    "answer",
    "question",
    "context",
    "reference",
    "because",
    "therefore",
    "however",
    "数据",
    "评估",
    "模型",
    "回答",
    "问题",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "long",
    "short",
    "value",
    "result",
]
TAGS = ["math;easy", "history", "science, hard", "law;medium;long"]


# ---- files ----------------------------------------------------------------------------------
def rows_of(count: int) -> Iterator[list[Any]]:
    rng = random.Random(7)
    start = datetime.date(2024, 1, 1)
    for i in range(count):
        yield [
            f"q{i:08d}",
            " ".join(rng.choices(WORDS, k=14)) + "?",
            rng.choice("ABCD"),
            rng.choice(TAGS),
            " ".join(rng.choices(WORDS, k=25)),
            rng.randint(1, 5),
            start + datetime.timedelta(days=i % 700),
            round(rng.random(), 4),
        ]


def row_bytes(row: list[Any]) -> int:
    return sum(len(str(v).encode()) + 1 for v in row)


def write_file(fmt: str, path: Path, count: int) -> int:
    """Write `count` rows as `fmt`; returns the longest row's length in bytes (as text)."""
    longest = 0
    if fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(COLUMNS)
            for row in rows_of(count):
                writer.writerow(row)
                longest = max(longest, row_bytes(row))
    elif fmt == "jsonl":
        with path.open("w", encoding="utf-8") as out:
            for row in rows_of(count):
                line = json.dumps(dict(zip(COLUMNS, row, strict=True)), default=str)
                out.write(line + "\n")
                longest = max(longest, len(line.encode()) + 1)
    elif fmt == "parquet":
        import pyarrow
        import pyarrow.parquet

        writer = None
        batch: list[list[Any]] = []

        def flush() -> None:
            nonlocal writer
            table = pyarrow.table({n: [r[i] for r in batch] for i, n in enumerate(COLUMNS)})
            writer = writer or pyarrow.parquet.ParquetWriter(path, table.schema)
            writer.write_table(table)
            batch.clear()

        for row in rows_of(count):
            batch.append(row)
            longest = max(longest, row_bytes(row))
            if len(batch) == 100_000:
                flush()
        if batch:
            flush()
        assert writer is not None
        writer.close()
    elif fmt == "xlsx":
        import openpyxl

        book = openpyxl.Workbook(write_only=True)
        sheet = book.create_sheet("Items")
        sheet.append(COLUMNS)
        for row in rows_of(count):
            sheet.append(row)
            longest = max(longest, row_bytes(row))
        book.save(path)
    return longest


def files(folder: Path, formats: list[str], count: int) -> dict[str, tuple[Path, int]]:
    """Each format's file (written unless `folder` has it for this count) and longest row."""
    out = {}
    for fmt in formats:
        path = folder / f"rows-{count}.{fmt}"
        info = path.with_suffix(f".{fmt}.longest")
        if not path.exists() or not info.exists():
            began = time.perf_counter()
            longest = write_file(fmt, path, count)
            info.write_text(str(longest))
            print(f"  wrote {path.name}: {time.perf_counter() - began:.0f} s", flush=True)
        out[fmt] = (path, int(info.read_text()))
    return out


# ---- one import in a fresh process ------------------------------------------------------------
def status_kb(pid: int | str, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` (from /proc, so PostgreSQL's backend too)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup_django(url: str, data_dir: Path, max_bytes: int) -> None:
    os.environ.update(
        DATABASE_URL=url,
        EVALSITE_DATA_DIR=str(data_dir),
        EVALSITE_ENV_FILE="",
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DATASET_MAX_UPLOAD_BYTES=str(max_bytes),
        DEBUG="0",
    )
    import django

    django.setup()


def child(url: str, path: Path, fmt: str, traced: bool) -> None:
    """Import `path` into a new dataset; print what it cost as JSON."""
    setup_django(url, Path(tempfile.mkdtemp(prefix="evalsite-bench-import-")), 2**40)
    import gc
    import tracemalloc

    from django.db import connection

    from apps.datasets.importing import Mapping, fill_dataset_from_file
    from apps.datasets.models import Dataset, Task

    task, _ = Task.objects.get_or_create(slug="imports", defaults={"name": "Imports"})
    dataset = Dataset.objects.create(
        task=task,
        name=f"{fmt}-{time.time_ns()}",
        format=fmt,
        status=Dataset.Status.IMPORTING,
        file_name=path.name,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    mapping = Mapping(id_column="id", tags_column="tags")
    # The readers' libraries are imported first: their code is part of the constant, not of
    # what the file costs (pyarrow alone is ~50 MB resident).
    import openpyxl.styles.numbers  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)
    base_kb = status_kb("self", "VmRSS")
    if traced:
        tracemalloc.start()
    cpu0, db0 = time.process_time(), cpu_seconds(backend)
    began = time.perf_counter()
    fill_dataset_from_file(dataset, path, mapping)
    seconds = time.perf_counter() - began
    cpu, db = time.process_time() - cpu0, cpu_seconds(backend) - db0
    traced_peak = tracemalloc.get_traced_memory()[1] if traced else 0
    tracemalloc.stop()
    peak_kb = status_kb("self", "VmHWM") - base_kb
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY, dataset.error
    rows = dataset.items.count()
    print(
        json.dumps(
            {"s": seconds, "cpu": cpu, "db_cpu": db, "rss_kb": peak_kb, "traced": traced_peak}
            | {"rows": rows, "load": os.getloadavg()[0]}
        )
    )
    # The next import starts from the same empty table (and the database stays small).
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM datasets_item WHERE dataset_id = %s", [dataset.pk])
    dataset.delete()


def run_child(url: str, path: Path, fmt: str, traced: bool) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            url,
            str(path),
            fmt,
            *(["--traced"] if traced else []),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise SystemExit(f"the import of {path.name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def migrate(url: str, work: Path) -> str:
    out = subprocess.run(
        [sys.executable, __file__, "--migrate", url, str(work)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return out.stdout.strip()


def migrate_child(url: str, work: Path) -> None:
    setup_django(url, work, 2**40)
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        print(cursor.fetchone()[0])


def bench_formats(url: str, args: argparse.Namespace, work: Path) -> bool:
    folder = Path(args.files) if args.files else work
    folder.mkdir(parents=True, exist_ok=True)
    formats = [f for f in args.formats.split(",") if f]
    print(f"files of {args.rows:,} rows × {len(COLUMNS)} columns:", flush=True)
    made = files(folder, formats, args.rows)
    missed = False
    print(
        f"\nlimits: CSV ≥ {CSV_ROWS_S:,} rows/s; peak memory ≤ 3 × longest row + "
        f"{CONSTANT_MB:.0f} MB. Ratios: rows/s ÷ limit (≥ 1 ok), memory ÷ limit (≤ 1 ok)"
    )
    for fmt in formats:
        path, longest = made[fmt]
        limit_mb = 3 * longest / 2**20 + CONSTANT_MB
        timed = run_child(url, path, fmt, traced=False)
        traced = {} if args.no_tracemalloc else run_child(url, path, fmt, traced=True)
        rate = timed["rows"] / timed["s"]
        cpu_rate = timed["rows"] / max(timed["cpu"] + timed["db_cpu"], 1e-9)
        rss_mb = timed["rss_kb"] / 1024
        traced_mb = traced.get("traced", 0) / 2**20
        worst = max(rss_mb, traced_mb)
        rate_note = ""
        if fmt == "csv":
            ok = rate >= CSV_ROWS_S
            rate_note = f" ratio {rate / CSV_ROWS_S:.2f} {'ok' if ok else 'MISSED'};"
            missed = missed or not ok
        missed = missed or worst > limit_mb
        print(
            f"{fmt:>8}: {path.stat().st_size / 2**20:7.1f} MB, {timed['rows']:,} rows in "
            f"{timed['s']:.1f} s = {rate:,.0f} rows/s;{rate_note} CPU {timed['cpu']:.1f} s here + "
            f"{timed['db_cpu']:.1f} s PostgreSQL = {cpu_rate:,.0f} rows per CPU-s; load "
            f"{timed['load']:.1f}\n{'':>10}peak RSS +{rss_mb:.1f} MB, tracemalloc "
            + (f"{traced_mb:.1f} MB" if traced else "not run")
            + f"; longest row {longest:,} B, limit {limit_mb:.1f} MB, ratio "
            f"{worst / limit_mb:.2f} {'ok' if worst <= limit_mb else 'MISSED'}",
            flush=True,
        )
    return missed


# ---- the 5 GB file from a worker ----------------------------------------------------------------
def write_huge(path: Path, gigabytes: float) -> tuple[int, int]:
    """A CSV of about `gigabytes` GB: blocks of generated rows, ids made unique per block.
    Returns (rows, longest row in bytes)."""
    block = list(rows_of(10_000))
    longest = max(row_bytes(row) for row in block)
    rests = []
    for row in block:
        buffer: list[str] = []
        csv.writer(_Collect(buffer)).writerow(row[1:])
        rests.append("," + buffer[0])
    target = int(gigabytes * 2**30)
    rows = number = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(",".join(COLUMNS) + "\r\n")
        while out.tell() < target:
            out.write("".join(f"q{number}-{i}{rest}" for i, rest in enumerate(rests)))
            rows += len(rests)
            number += 1
    return rows, longest + 8


class _Collect:
    def __init__(self, into: list[str]) -> None:
        self.into = into

    def write(self, text: str) -> None:
        self.into.append(text)


@contextlib.contextmanager
def worker(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rqworker", "imports"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def horse_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of the work horse RQ forked from worker `pid` for the job, or the
    worker's own before it forks (the horse's pages include the worker's it touches)."""
    for each in reversed([str(pid), *_children(pid)]):
        with contextlib.suppress(OSError):
            return status_kb(each, "VmRSS"), status_kb(each, "VmHWM")
    return 0, 0


def _children(pid: int) -> list[str]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for child_pid in (task / "children").read_text().split():
                found += [child_pid, *_children(int(child_pid))]
    return found


def bench_huge(url: str, args: argparse.Namespace, work: Path) -> bool:
    from common import start_redis

    folder = Path(args.files) if args.files else work
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"huge-{args.huge_gb:g}GB.csv"
    info = path.with_suffix(".csv.rows")
    if not path.exists() or not info.exists():
        began = time.perf_counter()
        rows, longest = write_huge(path, args.huge_gb)
        info.write_text(f"{rows} {longest}")
        print(f"  wrote {path.name}: {time.perf_counter() - began:.0f} s", flush=True)
    rows, longest = map(int, info.read_text().split())
    size = path.stat().st_size
    # The worker deletes the staged file when done: it imports a hard link to it.
    staged = work / "upload" / path.name
    staged.parent.mkdir(exist_ok=True)
    staged.unlink(missing_ok=True)
    os.link(path, staged)
    redis_proc, redis_url = start_redis(work)
    env = dict(
        os.environ,
        DATABASE_URL=url,
        REDIS_URL=redis_url,
        EVALSITE_DATA_DIR=str(work),
        EVALSITE_ENV_FILE="",
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DATASET_MAX_UPLOAD_BYTES=str(size * 2),
        LOG_LEVEL="WARNING",
        DEBUG="0",
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from apps.datasets.importing import Mapping
    from apps.datasets.jobs import start_background_import
    from apps.datasets.models import Dataset, Task

    print(
        f"\n--huge: {size / 2**30:.2f} GB CSV, {rows:,} rows (longest {longest} B), imported by "
        "an rqworker process; progress as the dataset's page shows it",
        flush=True,
    )
    user = get_user_model().objects.create_superuser(f"bench{time.time_ns()}", password="x")
    task, _ = Task.objects.get_or_create(slug="imports", defaults={"name": "Imports"})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    shown = re.compile(r"Writing items: (\d+) of (\d+)|Reading the file|Waiting for a worker")
    percent = re.compile(r'aria-valuenow="(\d+)"')
    missed = False
    try:
        with worker(env, work / "worker.log") as proc:
            from common import wait_for_worker

            wait_for_worker()
            idle_kb = status_kb(proc.pid, "VmRSS")
            dataset = start_background_import(
                task,
                f"huge-{time.time_ns()}",
                staged,
                Mapping(id_column="id", tags_column="tags"),
                "csv",
                COLUMNS,
                user,
                path.name,
            )
            began = time.perf_counter()
            peak_rss, samples, last_print = 0, [], 0.0
            while True:
                dataset.refresh_from_db()
                if not dataset.is_importing:
                    break
                if proc.poll() is not None:
                    raise SystemExit(f"the worker stopped: see {work / 'worker.log'}")
                page = client.get(
                    dataset.get_absolute_url(),
                    HTTP_HX_REQUEST="true",
                    HTTP_HX_TARGET="import-progress",
                ).content.decode()
                found = shown.search(page)
                pct = percent.search(page)
                rss, high = horse_kb(proc.pid)
                peak_rss = max(peak_rss, high)
                now = time.perf_counter() - began
                samples.append((now, rss))
                if now - last_print >= args.every or not samples[:-1]:
                    last_print = now
                    print(
                        f"  {now:6.0f} s: page says {found.group(0) if found else '?'!r}"
                        f" ({pct.group(1) if pct else '?'} %); job RSS {rss / 1024:.0f} MB; "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                time.sleep(2)
            seconds = time.perf_counter() - began
        dataset.refresh_from_db()
        print(f"  done in {seconds:.0f} s: status {dataset.status} {dataset.error}")
        if dataset.status != Dataset.Status.READY:
            return True
        count = dataset.items.count()
        quarter = max(len(samples) // 4, 1)
        first = max(r for _, r in samples[:quarter]) / 1024
        last = max(r for _, r in samples[-quarter:]) / 1024
        limit_mb = 3 * longest / 2**20 + CONSTANT_MB
        # The job's own memory: its peak above its first sample (the forked horse's pages
        # are the worker's until touched, so the worker's size says little).
        own_mb = (peak_rss - samples[0][1]) / 1024
        print(
            f"  {count:,} items ({'all' if count == rows else 'NOT all'}), "
            f"{count / seconds:,.0f} rows/s. Worker idle {idle_kb / 1024:.0f} MB; the job's "
            f"first sample {samples[0][1] / 1024:.0f} MB, peak {peak_rss / 1024:.0f} MB: "
            f"+{own_mb:.0f} MB (limit {limit_mb:.0f} MB, "
            f"ratio {own_mb / limit_mb:.2f}); RSS in the first quarter {first:.0f} MB, in the "
            f"last {last:.0f} MB ({last - first:+.0f} MB)"
        )
        missed = count != rows or own_mb > limit_mb
    finally:
        redis_proc.terminate()
        staged.unlink(missing_ok=True)
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--no-tracemalloc", action="store_true")
    parser.add_argument("--files", help="keep the generated files in this folder")
    parser.add_argument("--huge", action="store_true", help="the 5 GB file from a worker")
    parser.add_argument("--huge-gb", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=30, help="--huge: print progress every s")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--migrate", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), args.child[2], args.traced)
        return
    if args.migrate:
        migrate_child(args.migrate[0], Path(args.migrate[1]))
        return
    work = Path(tempfile.mkdtemp(prefix="evalsite-bench-import-scale-"))
    with contextlib.ExitStack() as cleanup, postgres() as url:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        version = migrate(url, work)
        print(
            f"machine: {platform.node()}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; PostgreSQL {version}; "
            f"Python {platform.python_version()}",
            flush=True,
        )
        missed = bench_huge(url, args, work) if args.huge else bench_formats(url, args, work)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
