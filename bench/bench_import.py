"""Import a generated 100k-row, 6-column CSV through the real import path and compare it with
`pandas.read_csv` plus a plain `executemany` insert of the same rows into the same kind of table.

Runs on a fresh SQLite database in a temporary directory (never the project's data).
Goal: the import takes <= 10 s, and <= 3x the pandas + executemany baseline.

    .venv-test/bin/python bench/bench_import.py [--rows 100000]
"""

import argparse
import csv
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 10.0
GOAL_RATIO = 3.0
TEXT = (
    "the model answer question context reference because therefore however 数据 评估 模型 "
    '回答 问题 alpha beta gamma delta long short value result, "quoted" line\nbreak'
)
WORDS = TEXT.split(" ")


def generate(path: Path, rows: int) -> None:
    rng = random.Random(7)
    with path.open("w", newline="", encoding="utf-8-sig") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "question", "context", "answer", "tags", "response"])
        for i in range(rows):
            writer.writerow(
                [
                    f"q{i:07d}",
                    " ".join(rng.choices(WORDS, k=14)) + "?",
                    " ".join(rng.choices(WORDS, k=40)),
                    rng.choice("ABCD"),
                    rng.choice(["math;easy", "history", "science, hard", "law;medium;long"]),
                    " ".join(rng.choices(WORDS, k=25)),
                ]
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="evalsite-bench-import-"))
    os.environ["EVALSITE_DATA_DIR"] = str(tmp)
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0, skip_checks=True)

    import pandas as pd

    from apps.datasets.importing import import_dataset
    from apps.datasets.models import Item, Task

    csv_path = tmp / "bench.csv"
    generate(csv_path, args.rows)
    size_mb = csv_path.stat().st_size / 1e6
    task = Task.objects.create(slug="bench", name="Bench")
    mapping = {
        "id_column": "id",
        "input_columns": ["question", "context"],
        "reference_column": "answer",
        "tags_column": "tags",
        "response_columns": ["response"],
    }

    # The import: the same function the upload page, the CLI and the worker call.
    started = time.perf_counter()
    dataset = import_dataset(task, "bench", csv_path, mapping)
    import_seconds = time.perf_counter() - started
    assert dataset.row_count == args.rows == Item.objects.filter(dataset=dataset).count()

    # The baseline: pandas.read_csv, then executemany into a copy of the item table.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = %s AND sql IS NOT NULL",
            [Item._meta.db_table],
        )
        for (ddl,) in cursor.fetchall():
            cursor.execute(
                ddl.replace(Item._meta.db_table, "bench_plain_item").replace(
                    "item_unique_", "bench_plain_unique_"
                )
            )
    started = time.perf_counter()
    frame = pd.read_csv(csv_path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    read_seconds = time.perf_counter() - started
    columns = list(frame.columns)
    started = time.perf_counter()
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    rows = [
        (dataset.pk, position, values[0], dumps(dict(zip(columns, values, strict=True))), "", "[]")
        for position, values in enumerate(frame.itertuples(index=False, name=None))
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO bench_plain_item (dataset_id, position, key, fields, reference, tags,"
            " tags_text, search_text) VALUES (%s, %s, %s, %s, %s, %s, '', '')",
            rows,
        )
    insert_seconds = time.perf_counter() - started
    baseline = read_seconds + insert_seconds
    ratio = import_seconds / baseline

    print(f"rows: {args.rows}, file: {size_mb:.1f} MB, database: SQLite at {tmp}")
    print(f"import_dataset (read, check, build, insert): {import_seconds:.2f} s")
    print(
        f"baseline pandas.read_csv {read_seconds:.2f} s + executemany {insert_seconds:.2f} s"
        f" = {baseline:.2f} s"
    )
    print(f"import seconds / goal {GOAL_SECONDS:.0f} s: {import_seconds / GOAL_SECONDS:.2f}")
    print(
        f"ratio to baseline: {ratio:.2f} (goal <= {GOAL_RATIO:.0f}; / goal: {ratio / GOAL_RATIO:.2f})"
    )
    # The item browser on the same 100k items: keyset pages, search and tag filters.
    from apps.datasets.browse import item_page

    last = args.rows - 100
    for label, params in [
        ("first page", {}),
        (f"page after position {last}", {"after": str(last)}),
        ("search, common word", {"q": "alpha"}),
        ("search, no match (full scan)", {"q": "no-such-text"}),
        ("tag filter", {"tag": "history"}),
        ("tag filter, no match (full scan)", {"tag": "no-such-tag"}),
    ]:
        started = time.perf_counter()
        item_page(dataset, params)
        print(f"browse {label}: {(time.perf_counter() - started) * 1000:.0f} ms")
    ok = import_seconds <= GOAL_SECONDS and ratio <= GOAL_RATIO
    print("PASS" if ok else "FAIL")
    for path in tmp.iterdir():
        path.unlink()
    tmp.rmdir()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
