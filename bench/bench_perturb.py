"""Perturbed copies of a 100k-item dataset (the import benchmark's file): the time of each
perturbation's copy against a goal, and what the content fingerprint adds to an import.

Runs on a fresh SQLite database in a temporary directory (never the project's data).
Goal: a copy of 100k items in <= 30 s (the page makes it inside the request); the fingerprint
<= 15% of the import.

    .venv-test/bin/python bench/bench_perturb.py [--rows 100000]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL_SECONDS = 30.0
GOAL_FINGERPRINT_SHARE = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-bench-perturb-"))
    os.environ["EVALSITE_DATA_DIR"] = str(tmp)
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)
    from apps.datasets.importing import import_dataset
    from apps.datasets.models import Task
    from apps.datasets.perturb import PERTURBATIONS, changed_count, perturb_dataset
    from bench.bench_import import generate

    csv_path = tmp / "bench.csv"
    generate(csv_path, args.rows)
    task = Task.objects.create(slug="bench", name="Bench")
    mapping = {
        "id_column": "id",
        "input_columns": ["question", "context"],
        "reference_column": "answer",
        "tags_column": "tags",
        "response_columns": ["response"],
    }
    started = time.perf_counter()
    dataset = import_dataset(task, "bench", csv_path, mapping)
    import_seconds = time.perf_counter() - started
    started = time.perf_counter()
    assert dataset.compute_fingerprint() == dataset.fingerprint
    fingerprint_seconds = time.perf_counter() - started
    print(f"rows: {args.rows}; import {import_seconds:.2f} s")
    print(
        f"fingerprint from the stored items {fingerprint_seconds:.2f} s (the import computes it "
        f"from rows in memory, cheaper); share of the import / goal "
        f"{fingerprint_seconds / import_seconds / GOAL_FINGERPRINT_SHARE:.2f}"
    )
    for name in PERTURBATIONS:
        started = time.perf_counter()
        copy = perturb_dataset(dataset, name, 7)
        seconds = time.perf_counter() - started
        print(
            f"{name:12s} {seconds:6.2f} s, {changed_count(copy)} of {copy.row_count} changed; "
            f"seconds / goal {seconds / GOAL_SECONDS:.2f}"
        )


if __name__ == "__main__":
    main()
