"""promptfoo's results file (`promptfoo eval -o results.json`) in and back out.

In: tests × prompts × providers. Each test is an item (its description as the id when every
test has a distinct one, its vars as fields, the value of its first equals/contains assertion
as the reference); each provider (and prompt, when there are several) a response set; the
verdicts a judge `promptfoo-assertions` whose subjects are `pass` (the test's verdict, 1 or
0), `score` (promptfoo's weighted score) and one per assertion (its metric name, else its
type), each with promptfoo's reason.

Out: the same file with the reviewers' verdicts laid in as promptfoo lays a person's rating
in: a `human` component result first, the result's pass, score and success set to it, and
the stats and each prompt column's counts counted again; so `promptfoo import` and its viewer
read it as rated.
"""

import json
import math
from pathlib import Path
from typing import Any

from apps.interop.models import Import, ImportedLog
from apps.interop.results import Answer, ImportError_, ModelResults, Results, Sample, subject_range
from apps.judges.models import Judge, Score

SCORER = "assertions"
REFERENCE_TYPES = ("equals", "contains", "icontains", "starts-with")


def read_results(files: list[tuple[str, bytes]], dataset_name: str = "") -> Results:
    if len(files) != 1:
        raise ImportError_("Choose one promptfoo results file (promptfoo eval -o results.json).")
    file_name, data = files[0]
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise ImportError_(f"{file_name}: not JSON ({exc}).") from None
    body = document.get("results") if isinstance(document, dict) else None
    rows = body.get("results") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(rows, list) or not rows:
        raise ImportError_(f"{file_name}: not a promptfoo results file (no results.results).")
    tests: dict[int, dict[str, Any]] = {}
    for index, row in enumerate(rows):
        where = f"{file_name}, result {index + 1}"
        if not isinstance(row, dict) or not isinstance(row.get("testIdx"), int):
            raise ImportError_(f"{where}: no testIdx.")
        tests.setdefault(row["testIdx"], row.get("testCase") or {})
    descriptions = [str(t.get("description") or "") for t in tests.values()]
    by_description = all(descriptions) and len(set(descriptions)) == len(descriptions)
    keys = {
        idx: str(test.get("description")) if by_description else str(idx + 1)
        for idx, test in tests.items()
    }
    samples = [
        _sample(keys[idx], test, f"{file_name}, test {idx + 1}")
        for idx, test in sorted(tests.items())
    ]
    # promptIdx counts prompt × provider pairs; the prompt itself is its id (or label).
    prompts = sorted({_prompt_of(row) for row in rows})
    models: dict[str, ModelResults] = {}
    seen: list[float] = []
    for index, row in enumerate(rows):
        where = f"{file_name}, result {index + 1} (test {keys[row['testIdx']]!r})"
        provider = row.get("provider") or {}
        label = str(provider.get("label") or provider.get("id") or "provider")
        if len(prompts) > 1:
            label += f" · prompt {prompts.index(_prompt_of(row)) + 1}"
        model = models.setdefault(
            label, ModelResults(label=label, file_name=file_name, epochs=1, answers=[])
        )
        answer = _answer(row, keys[row["testIdx"]], where)
        seen += [v for v in answer.values[SCORER].values() if v is not None]
        model.answers.append(answer)
    subjects: dict[str, tuple[float, float]] = {}
    for model in models.values():
        for answer in model.answers:
            for subject in answer.values[SCORER]:
                subjects.setdefault(subject, subject_range(seen))
    header = {k: v for k, v in document.items() if k != "results"}
    header["results"] = {k: v for k, v in body.items() if k != "results"}
    for model in models.values():
        model.header = header
    columns = ["id", "description"]
    for sample in samples:
        columns += [c for c in sample.row if c not in columns]
    version = str((document.get("metadata") or {}).get("promptfooVersion") or "")
    return Results(
        tool=Import.Tool.PROMPTFOO,
        tool_version=version,
        dataset_name=(
            dataset_name
            or str((document.get("config") or {}).get("description") or "")
            or Path(file_name).stem
        )[:200],
        columns=columns,
        mapping={
            "id_column": "id",
            "input_columns": [c for c in columns if c not in ("id", "description", "expected")],
            "reference_column": "expected" if "expected" in columns else None,
        },
        samples=samples,
        models=list(models.values()),
        scorers={SCORER: subjects},
        file_names=[file_name],
    )


def _prompt_of(row: dict[str, Any]) -> str:
    return str(row.get("promptId") or (row.get("prompt") or {}).get("label") or "")


def _sample(key: str, test: dict[str, Any], where: str) -> Sample:
    row: dict[str, Any] = {"id": key, "description": str(test.get("description") or "")}
    variables = test.get("vars") or {}
    if not isinstance(variables, dict):
        raise ImportError_(f"{where}: vars is not an object.")
    for name, value in variables.items():
        row[name if name not in row else f"vars.{name}"] = value
    for assertion in test.get("assert") or []:
        if (
            isinstance(assertion, dict)
            and assertion.get("type") in REFERENCE_TYPES
            and isinstance(assertion.get("value"), str)
        ):
            row["expected"] = assertion["value"]
            break
    return Sample(key=key, row=row, where=where)


def _answer(row: dict[str, Any], key: str, where: str) -> Answer:
    response = row.get("response") or {}
    usage = response.get("tokenUsage") or {}
    grading = row.get("gradingResult") or {}
    output = response.get("output")
    values: dict[str, float | None] = {
        "pass": _number(row.get("success", grading.get("pass")), f"{where}: success"),
        "score": _number(row.get("score", grading.get("score")), f"{where}: score"),
    }
    reasons = [str(grading.get("reason") or "")]
    for part in grading.get("componentResults") or []:
        assertion = part.get("assertion") or {}
        name = str(assertion.get("metric") or assertion.get("type") or "assertion")
        if name == "human":
            continue  # a person's rating in promptfoo: what the reviewers' export writes
        subject, n = name, 1
        while subject in values:
            n += 1
            subject = f"{name}-{n}"
        values[subject] = _number(part.get("score"), f"{where}: assertion {name!r}")
        if part.get("reason"):
            reasons.append(f"{subject}: {part['reason']}")
    error = row.get("error") or response.get("error") or ""
    return Answer(
        key=key,
        epoch=0,
        text=output if isinstance(output, str) else json.dumps(output, ensure_ascii=False),
        where=where,
        error=str(error) if error and output is None else "",
        finish_reason=str(response.get("finishReason") or ""),
        prompt_tokens=int(usage.get("prompt") or 0),
        completion_tokens=int(usage.get("completion") or 0),
        values={SCORER: values},
        explanations={SCORER: "\n".join(r for r in reasons if r)},
        record=row,
    )


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return float(value)
    raise ImportError_(f"{where}: {value!r} is not a number or true/false.")


# ---- out ---------------------------------------------------------------------------------
def export_results(log: ImportedLog) -> dict[str, Any]:
    """The whole results file of `log`'s import (every provider), reviewers' verdicts in."""
    logs = list(log.source.logs.select_related("run"))
    reviewed: dict[tuple[int, int], dict[str, Any]] = {}  # (run, item) -> the pass score
    for score in Score.objects.filter(
        run__source_run__in=[lg.run for lg in logs],
        run__judged_with__judge__kind=Judge.Kind.IMPORTED,
        subject="pass",
    ).select_related("run"):
        if score.is_reviewed:
            reviewed[(score.run.source_run_id or 0, score.item_id)] = {
                "value": score.final_value,
                "reason": score.override_reason if score.is_overridden else "Confirmed",
            }
    rows = []
    for order, each in enumerate(logs):
        for record in each.records.all():
            row = json.loads(json.dumps(record.data))
            rating = reviewed.get((each.run_id, record.item_id))
            if rating is not None and rating["value"] is not None:
                passed = rating["value"] >= 0.5
                grading = row.setdefault("gradingResult", {}) or {}
                grading["componentResults"] = [
                    {
                        "pass": passed,
                        "score": rating["value"],
                        "reason": f"evalsite reviewers: {rating['reason']}",
                        "assertion": {"type": "human"},
                    },
                    *[
                        c
                        for c in grading.get("componentResults") or []
                        if (c.get("assertion") or {}).get("type") != "human"
                    ],
                ]
                grading["pass"], grading["score"] = passed, rating["value"]
                grading["reason"] = f"evalsite reviewers: {rating['reason']}"
                row["gradingResult"] = grading
                row["success"], row["score"] = passed, rating["value"]
                row["failureReason"] = 0 if passed else 1
            rows.append(((row.get("testIdx", 0), row.get("promptIdx", 0), order), row))
    header = log.header
    out = {k: v for k, v in header.items() if k != "results"}
    body = dict(header.get("results") or {})
    body["results"] = [row for _, row in sorted(rows, key=lambda pair: pair[0])]
    stats = dict(body.get("stats") or {})
    stats["successes"] = sum(bool(r.get("success")) for r in body["results"])
    # failureReason: 1 an assertion failed, 2 the provider erred (promptfoo's own counts)
    stats["failures"] = sum(
        not r.get("success") and r.get("failureReason") != 2 for r in body["results"]
    )
    body["stats"] = stats
    body["prompts"] = _prompt_metrics(body.get("prompts") or [], body["results"])
    out["results"] = body
    return out


def _prompt_metrics(prompts: list[Any], rows: list[dict[str, Any]]) -> list[Any]:
    """Each prompt × provider column's test counts and score counted again from its rows:
    promptfoo's summary of an imported eval (`promptfoo export`, its viewer) comes from these,
    not from the stats."""
    counted = []
    for index, prompt in enumerate(prompts):
        mine = [r for r in rows if r.get("promptIdx") == index]
        if not isinstance(prompt, dict) or not isinstance(prompt.get("metrics"), dict) or not mine:
            counted.append(prompt)
            continue
        metrics = dict(prompt["metrics"])
        metrics["testPassCount"] = sum(bool(r.get("success")) for r in mine)
        metrics["testFailCount"] = sum(
            not r.get("success") and r.get("failureReason") != 2 for r in mine
        )
        metrics["testErrorCount"] = sum(
            not r.get("success") and r.get("failureReason") == 2 for r in mine
        )
        metrics["score"] = math.fsum(
            float(r["score"]) for r in mine if isinstance(r.get("score"), int | float)
        )
        counted.append({**prompt, "metrics": metrics})
    return counted


def export_name(log: ImportedLog) -> str:
    return f"{Path(log.file_name).stem or 'results'}-reviewed.json"
