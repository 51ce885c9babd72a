"""lm-evaluation-harness's `--log_samples` output in and back out.

A run writes, per model, `results_<time>.json` (the model, lm_eval's version, the scores) and
per task `samples_<task>_<time>.jsonl`, a line per document: doc_id, doc, target, arguments,
resps, filtered_resps and each metric's value. Give the samples files (and the results files,
which name the model and the version; without one the model is named after its file). Each
document becomes an item (`<task>/<doc_id>` when several tasks come together, tagged with its
task; the doc's fields as fields, the prompt sent, the target as the reference), each model's
filtered responses a response set, and each task's metrics a judge `lm-eval-<task>` (a metric
under a filter other than "none" is `metric,filter`).

Out: the model's files again, in lm-eval's layout and names (`<model>/results_<time>.json`,
`<model>/samples_<task>_<time>.jsonl`): every sample line as lm-eval wrote it, each metric's
value the one people left (the judge's where nobody changed it; what lm-eval said and the
reviewer's reason kept beside it under `evalsite_review`), and the results file's per-task
means and standard errors (lm-eval's `mean_stderr`) counted again from those values, so a
reader of lm-eval's output reads the corrected scores."""

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from apps.interop.models import Import, ImportedLog
from apps.interop.results import (
    Answer,
    ImportError_,
    ModelResults,
    Results,
    Sample,
    judge_name,
    subject_range,
)
from apps.judges.models import Judge, Score

SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<time>\d{4}-\d\d-\d\dT[\d.-]+)\.jsonl$")
RESULTS = re.compile(r"^results_(?P<time>\d{4}-\d\d-\d\dT[\d.-]+)\.json$")


def read_samples(files: list[tuple[str, bytes]], dataset_name: str = "") -> Results:
    results: dict[str, dict[str, Any]] = {}  # time -> results file
    results_names: dict[str, str] = {}  # time -> its file name
    samples_files: list[tuple[str, str, str, bytes]] = []  # (name, task, time, data)
    for name, data in files:
        if match := RESULTS.match(name):
            try:
                results[match["time"]] = json.loads(data)
                results_names[match["time"]] = name
            except ValueError as exc:
                raise ImportError_(f"{name}: not JSON ({exc}).") from None
        elif match := SAMPLES.match(name):
            samples_files.append((name, match["task"], match["time"], data))
        else:
            raise ImportError_(
                f"{name}: not an lm-eval file (samples_<task>_<time>.jsonl or results_<time>.json)."
            )
    if not samples_files:
        raise ImportError_("Choose lm-eval's samples_<task>_<time>.jsonl files (--log_samples).")
    tasks = sorted({task for _, task, _, _ in samples_files})
    several = len(tasks) > 1
    items: dict[str, Sample] = {}
    models: dict[str, ModelResults] = {}
    scorers: dict[str, dict[str, list[float]]] = {}
    versions = set()
    for name, task, time, data in samples_files:
        summary = results.get(time) or {}
        label = str(summary.get("model_name") or name.removesuffix(".jsonl"))
        if summary.get("lm_eval_version"):
            versions.add(str(summary["lm_eval_version"]))
        model = models.setdefault(
            label,
            ModelResults(
                label=label,
                file_name=name,
                epochs=1,
                answers=[],
                # the way back: the results file, and each task's samples file
                header={"results_file": results_names.get(time, ""), "results": summary},
            ),
        )
        model.header.setdefault("samples_files", {})[task] = name
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{name}, line {number}"
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ImportError_(f"{where}: not JSON ({exc}).") from None
            if not isinstance(row, dict) or "doc_id" not in row:
                raise ImportError_(f"{where}: no doc_id (is this a --log_samples file?).")
            key = f"{task}/{row['doc_id']}" if several else str(row["doc_id"])
            where += f" (doc {row['doc_id']})"
            sample = _sample(row, key, task, several, where)
            known = items.setdefault(key, sample)
            if known.row != sample.row:
                raise ImportError_(f"{where}: doc {key!r} differs from {known.where}.")
            answer = _answer(row, key, task, where)
            for subject, value in answer.values[task].items():
                scorers.setdefault(task, {}).setdefault(subject, [])
                if value is not None:
                    scorers[task][subject].append(value)
            model.answers.append(answer)
    columns = ["id", "prompt", "target"]
    for sample in items.values():
        columns += [c for c in sample.row if c not in columns]
    return Results(
        tool=Import.Tool.LM_EVAL,
        tool_version=", ".join(sorted(versions)),
        dataset_name=(dataset_name or "+".join(tasks))[:200],
        columns=columns,
        mapping={
            "id_column": "id",
            "input_columns": ["prompt"],
            "reference_column": "target",
            **({"tags_column": "task"} if several else {}),
        },
        samples=list(items.values()),
        models=list(models.values()),
        scorers={
            task: {s: subject_range(v) for s, v in subjects.items()}
            for task, subjects in scorers.items()
        },
        file_names=[name for name, _ in files],
    )


def _prompt(arguments: Any) -> str:
    """The request's context: the first argument of the first request (a chat-templated
    request is the messages as JSON: their contents, one per line)."""
    if not isinstance(arguments, dict) or not arguments:
        return ""
    first = next(iter(arguments.values()))
    context = first.get("arg_0") if isinstance(first, dict) else None
    if isinstance(context, list):
        context = context[0] if context else ""
    if isinstance(context, str) and context.startswith("[{"):
        try:
            messages = json.loads(context)
            return "\n".join(str(m.get("content", "")) for m in messages)
        except (ValueError, AttributeError):
            pass
    return "" if context is None else str(context)


def _sample(row: dict[str, Any], key: str, task: str, several: bool, where: str) -> Sample:
    target = row.get("target", "")
    fields: dict[str, Any] = {
        "id": key,
        "prompt": _prompt(row.get("arguments")),
        "target": target if isinstance(target, str) else json.dumps(target),
    }
    if several:
        fields["task"] = task
    doc = row.get("doc")
    if isinstance(doc, dict):
        for name, value in doc.items():
            fields[name if name not in fields else f"doc.{name}"] = value
    return Sample(key=key, row=fields, where=where)


def _answer(row: dict[str, Any], key: str, task: str, where: str) -> Answer:
    filtered = row.get("filtered_resps")
    first = filtered[0] if isinstance(filtered, list) and filtered else filtered
    text = first if isinstance(first, str) else json.dumps(first)
    suffix = "" if row.get("filter", "none") == "none" else f",{row['filter']}"
    values: dict[str, float | None] = {}
    for metric in row.get("metrics") or []:
        value = row.get(metric)
        values[f"{metric}{suffix}"] = _number(value, f"{where}: metric {metric!r}")
    return Answer(
        key=key,
        epoch=0,
        text=text,
        where=where,
        values={task: values},
        explanations={
            task: f"filter {row.get('filter', 'none')}; resps {json.dumps(row.get('resps'))[:2000]}"
        },
        record=row,
    )


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return float(value)
    raise ImportError_(f"{where}: {value!r} is not a number.")


# ---- out ---------------------------------------------------------------------------------
def export_files(log: ImportedLog) -> list[tuple[str, bytes]]:
    """The model's results and samples files, the scores people left in them."""
    header = log.header or {}
    samples_files: dict[str, str] = header.get("samples_files") or {task_of(log.file_name): ""}
    tasks = list(samples_files)
    reviews = _reviews(log, tasks)
    lines: dict[str, list[str]] = defaultdict(list)
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for record in log.records.select_related("item").order_by("position"):
        row = json.loads(json.dumps(record.data))
        key = record.item.key
        task = tasks[0] if len(tasks) == 1 else key.rsplit("/", 1)[0]
        suffix = "" if row.get("filter", "none") == "none" else f",{row['filter']}"
        reviewed = reviews.get((task, record.item_id), {})
        notes = {}
        for metric in row.get("metrics") or []:
            review = reviewed.get(f"{metric}{suffix}")
            if review is not None and review["value"] is not None:
                notes[metric] = {"lm_eval": row.get(metric), **review}
                row[metric] = review["value"]
            if isinstance(row.get(metric), int | float):
                values[task][f"{metric}{suffix}"].append(float(row[metric]))
        if notes:
            row["evalsite_review"] = notes
        lines[task].append(json.dumps(row, ensure_ascii=False))
    # The model's name from the file is a folder name only: no path of its own.
    folder = re.sub(r"[^\w.-]+", "_", log.run.label).strip(".") or "model"
    files = [
        (
            f"{folder}/{Path(name).name or f'samples_{task}.jsonl'}",
            ("\n".join(lines[task]) + "\n").encode(),
        )
        for task, name in samples_files.items()
    ]
    # Imported before the way back was written, the header is the results file itself.
    summary = header.get("results") if "samples_files" in header else header
    if isinstance(summary, dict) and summary:
        name = Path(str(header.get("results_file") or "")).name or "results.json"
        files.insert(0, (f"{folder}/{name}", _summary(summary, values)))
    return files


def task_of(file_name: str) -> str:
    match = SAMPLES.match(file_name)
    return match["task"] if match else Path(file_name).stem


def _reviews(
    log: ImportedLog, tasks: list[str]
) -> dict[tuple[str, int], dict[str, dict[str, Any]]]:
    """(task, item) → subject → the reviewed value and reason, for reviewed scores only."""
    by_judge = {judge_name(Import.Tool.LM_EVAL, task): task for task in tasks}
    found: dict[tuple[str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    scores = Score.objects.filter(
        run__source_run=log.run, run__judged_with__judge__kind=Judge.Kind.IMPORTED
    ).select_related("run__judged_with__judge")
    for score in scores:
        if not score.is_reviewed:
            continue
        task = by_judge.get(score.run.judged_with.judge.name, "")
        found[(task, score.item_id)][score.subject] = {
            "value": score.final_value,
            "reason": score.override_reason if score.is_overridden else "Confirmed",
        }
    return found


def _summary(summary: dict[str, Any], values: dict[str, dict[str, list[float]]]) -> bytes:
    """The results file with each task's means and standard errors counted again."""
    out = json.loads(json.dumps(summary))
    for task, metrics in values.items():
        table = (out.get("results") or {}).get(task)
        if not isinstance(table, dict):
            continue
        for name, numbers in metrics.items():
            metric, _, filter_ = name.partition(",")
            column = f"{metric},{filter_ or 'none'}"
            if column not in table or not numbers:
                continue
            table[column] = math.fsum(numbers) / len(numbers)
            stderr = f"{metric}_stderr,{filter_ or 'none'}"
            if stderr in table:
                table[stderr] = _mean_stderr(numbers)
    return json.dumps(out, indent=2, ensure_ascii=False).encode()


def _mean_stderr(numbers: list[float]) -> float | str:
    """lm-eval's mean_stderr: the sample standard deviation (n − 1) over √n ("N/A", as lm-eval
    writes it, for a single sample)."""
    n = len(numbers)
    if n < 2:
        return "N/A"
    mean = math.fsum(numbers) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in numbers) / (n - 1)) / math.sqrt(n)
