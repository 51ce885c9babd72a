"""Import the same 100k rows from CSV, Excel (.xlsx) and Parquet through the real import path.

The workbook has a column styled as a percentage, so its number formats are read and applied too.

Goal (#15.5): an .xlsx and a .parquet file of 100k rows each import within 3x the CSV import's
time. Runs on a fresh SQLite database in a temporary directory (never the project's data). The
files are written first (not timed); each import is `import_dataset`, the function the upload
page, the CLI and the worker call, and each dataset is deleted before the next import so that
all three write into the same empty table.

    .venv-test/bin/python bench/bench_import_formats.py [--rows 100000]
"""

import argparse
import csv
import datetime
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 3.0
TEXT = (
    "the model answer question context reference because therefore however 数据 评估 模型 "
    "回答 问题 alpha beta gamma delta long short value result"
)
WORDS = TEXT.split()
COLUMNS = ["id", "question", "answer", "tags", "response", "score", "asked", "share"]


def rows_of(count: int) -> list[list]:
    rng = random.Random(7)
    start = datetime.date(2024, 1, 1)
    return [
        [
            f"q{i:07d}",
            " ".join(rng.choices(WORDS, k=14)) + "?",
            rng.choice("ABCD"),
            rng.choice(["math;easy", "history", "science, hard", "law;medium;long"]),
            " ".join(rng.choices(WORDS, k=25)),
            rng.randint(1, 5),
            start + datetime.timedelta(days=i % 700),
            round(rng.random(), 4),
        ]
        for i in range(count)
    ]


def write_files(folder: Path, rows: list[list]) -> dict[str, Path]:
    import openpyxl
    import pyarrow
    import pyarrow.parquet
    from openpyxl.cell import WriteOnlyCell

    paths = {fmt: folder / f"bench.{fmt}" for fmt in ("csv", "xlsx", "parquet")}
    with paths["csv"].open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Items")
    sheet.append(COLUMNS)
    # The share column is styled 0.0% (shown as 12.3%): the reader's number-format path.
    for row in rows:
        share = WriteOnlyCell(sheet, row[-1])
        share.number_format = "0.0%"
        sheet.append([*row[:-1], share])
    book.save(paths["xlsx"])
    columns = {name: [row[i] for row in rows] for i, name in enumerate(COLUMNS)}
    pyarrow.parquet.write_table(pyarrow.table(columns), paths["parquet"])
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="evalsite-bench-formats-"))
    os.environ["EVALSITE_DATA_DIR"] = str(tmp)
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)
    from apps.datasets.importing import import_dataset
    from apps.datasets.models import Item, Task

    started = time.perf_counter()
    paths = write_files(tmp, rows_of(args.rows))
    print(f"rows: {args.rows}, columns: {len(COLUMNS)}, files written in "
          f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    task = Task.objects.create(slug="bench", name="Bench")
    mapping = {
        "id_column": "id",
        "input_columns": ["question"],
        "reference_column": "answer",
        "tags_column": "tags",
        "response_columns": ["response"],
    }
    seconds: dict[str, float] = {}
    for fmt, path in paths.items():
        started = time.perf_counter()
        dataset = import_dataset(task, f"bench-{fmt}", path, mapping)
        seconds[fmt] = time.perf_counter() - started
        assert dataset.row_count == args.rows == Item.objects.filter(dataset=dataset).count()
        first = dataset.items.get(position=0).fields
        assert first["score"].isdigit() and first["asked"] == "2024-01-01", first
        assert first["share"].endswith("%") == (fmt == "xlsx"), first
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size = path.stat().st_size / 1e6
        print(f"{fmt:>8}: {size:5.1f} MB file, import {seconds[fmt]:.2f} s, "
              f"peak RSS so far {peak:.0f} MB")  # fmt: skip
        dataset.delete()

    ok = True
    for fmt in ("xlsx", "parquet"):
        ratio = seconds[fmt] / seconds["csv"]
        ok &= ratio <= GOAL_RATIO
        print(
            f"{fmt}/csv: {ratio:.2f} (goal <= {GOAL_RATIO:.0f}; / goal: {ratio / GOAL_RATIO:.2f})"
        )
    print("PASS" if ok else "FAIL")
    for path in tmp.iterdir():
        path.unlink()
    tmp.rmdir()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
