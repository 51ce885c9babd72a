"""Peak memory of a background import: a generated 1M-row CSV (~200 MB), JSONL and JSON file,
and a CSV and a JSON file whose one row holds a 50 MB cell, imported as the worker imports them
(`fill_dataset_from_file`: rows streamed to the database in batches, one transaction).

Each import runs in a fresh process on a fresh SQLite database; its peak resident memory
(VmHWM) is measured above what the process held before the import (Django, the migrated
database). Goal: under 3x the file's longest row plus a constant (64 MB: a batch of rows and
the database's own buffers), whatever the file's size. `--whole` measures the earlier import,
which read the whole file first (`read_table` + `fill_dataset`), for comparison.

    .venv-test/bin/python bench/bench_import_memory.py [--rows 1000000] [--line-mb 50] [--whole]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSTANT_MB = 64.0
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
]


def generate_csv(path: Path, rows: int) -> int:
    """`rows` rows of six columns; returns the longest row's length in bytes."""
    import csv

    rng = random.Random(7)
    longest = 0
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "question", "context", "answer", "tags", "response"])
        for i in range(rows):
            row = [
                f"q{i:07d}",
                " ".join(rng.choices(WORDS, k=6)) + "?",
                " ".join(rng.choices(WORDS, k=12)),
                rng.choice("ABCD"),
                rng.choice(["math;easy", "history", "science, hard"]),
                " ".join(rng.choices(WORDS, k=6)),
            ]
            writer.writerow(row)
            longest = max(longest, sum(len(v.encode()) + 1 for v in row))
    return longest


def generate_jsonl(path: Path, rows: int) -> int:
    rng = random.Random(7)
    longest = 0
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            line = json.dumps(
                {
                    "id": f"q{i:07d}",
                    "question": " ".join(rng.choices(WORDS, k=10)) + "?",
                    "context": " ".join(rng.choices(WORDS, k=20)),
                    "answer": rng.choice("ABCD"),
                },
                ensure_ascii=False,
            )
            out.write(line + "\n")
            longest = max(longest, len(line.encode()) + 1)
    return longest


def generate_json(path: Path, rows: int) -> int:
    """The JSONL file's rows as one JSON list; returns the longest item's length in bytes."""
    rng = random.Random(7)
    longest = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for i in range(rows):
            item = json.dumps(
                {
                    "id": f"q{i:07d}",
                    "question": " ".join(rng.choices(WORDS, k=10)) + "?",
                    "context": " ".join(rng.choices(WORDS, k=20)),
                    "answer": rng.choice("ABCD"),
                },
                ensure_ascii=False,
            )
            out.write(("," if i else "") + item)
            longest = max(longest, len(item.encode()) + 1)
        out.write("]")
    return longest


def generate_long_item(path: Path, megabytes: int) -> int:
    """A JSON list of one item whose text is `megabytes` MB of ASCII words."""
    words = " ".join(["context"] * (megabytes * 1024 * 1024 // 8))
    item = json.dumps({"id": "q1", "context": words, "answer": "A"})
    path.write_text(f"[{item}]", encoding="utf-8")
    return len(item)


def generate_long_line(path: Path, megabytes: int) -> int:
    """A CSV of a header and one row whose text cell is `megabytes` MB of ASCII words."""
    words = " ".join(["context"] * (megabytes * 1024 * 1024 // 8))
    row = f'q1,"{words}",A\n'
    path.write_text("id,context,answer\n" + row, encoding="utf-8")
    return len(row.encode())


def peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    Path("/proc/self/clear_refs").write_text("5")


def child(path: Path, fmt: str, whole: bool) -> None:
    """Import `path` into a fresh database; print the peak memory above the start, in kB."""
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-bench-memory-"))
    os.environ.update(
        EVALSITE_DATA_DIR=str(tmp),
        DATABASE_URL=f"sqlite:///{tmp / 'bench.sqlite3'}",
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        EVALSITE_ENV_FILE="",
        DATASET_MAX_UPLOAD_BYTES=str(2**31),
    )
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from apps.datasets.importing import Mapping, fill_dataset, fill_dataset_from_file
    from apps.datasets.models import Dataset, Item, Task
    from apps.datasets.readers import read_table

    task = Task.objects.create(slug="bench", name="Bench")
    dataset = Dataset.objects.create(
        task=task, name="big", format=fmt, status=Dataset.Status.IMPORTING, file_name=path.name
    )
    mapping = Mapping(id_column="id")
    import gc

    gc.collect()
    reset_peak()
    start = Path("/proc/self/statm").read_text().split()[1]
    base_kb = int(start) * os.sysconf("SC_PAGE_SIZE") // 1024
    began = time.perf_counter()
    if whole:
        fill_dataset(dataset, read_table(path, fmt, path.name), mapping)
    else:
        fill_dataset_from_file(dataset, path, mapping)
    seconds = time.perf_counter() - began
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY, dataset.error
    print(json.dumps({"kb": peak_kb() - base_kb, "rows": Item.objects.count(), "s": seconds}))


def measure(path: Path, fmt: str, longest: int, whole: bool) -> tuple[float, dict]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), fmt, *(["--whole"] if whole else [])],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    limit_mb = 3 * longest / 2**20 + CONSTANT_MB
    return result["kb"] / 1024 / limit_mb, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--line-mb", type=int, default=50)
    parser.add_argument("--whole", action="store_true", help="the earlier whole-file import")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1], args.whole)
        return
    work = Path(tempfile.mkdtemp(prefix="evalsite-bench-memory-files-"))
    cases = [
        ("csv", work / "rows.csv", generate_csv, args.rows),
        ("jsonl", work / "rows.jsonl", generate_jsonl, args.rows),
        ("json", work / "rows.json", generate_json, args.rows),
        ("csv", work / "long.csv", generate_long_line, args.line_mb),
        ("json", work / "long.json", generate_long_item, args.line_mb),
    ]
    missed = False
    how = "whole-file import" if args.whole else "streamed import"
    print(f"{how}: peak memory above the process's start, limit 3 x longest row + {CONSTANT_MB} MB")
    for fmt, path, generate, size in cases:
        longest = generate(path, size)
        ratio, result = measure(path, fmt, longest, args.whole)
        file_mb = path.stat().st_size / 2**20
        limit_mb = 3 * longest / 2**20 + CONSTANT_MB
        print(
            f"{path.name:>10}: {file_mb:7.1f} MB, {result['rows']:>9,} rows, longest row "
            f"{longest / 2**20:6.2f} MB: peak +{result['kb'] / 1024:7.1f} MB, limit "
            f"{limit_mb:6.1f} MB, ratio {ratio:.2f} {'ok' if ratio <= 1 else 'MISSED'} "
            f"({result['s']:.1f} s)"
        )
        missed = missed or ratio > 1
        path.unlink()
    work.rmdir()
    sys.exit(1 if missed and not args.whole else 0)


if __name__ == "__main__":
    main()
