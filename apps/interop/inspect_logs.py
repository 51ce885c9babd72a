"""Inspect AI logs in and out.

In: a log (`.eval`, the zip Inspect writes by default, or `.json`) per model; the samples
become items (id, input, target, metadata as fields), each log's outputs a response set with
its epochs, each scorer a judge whose values and explanations are the scores (`results`).

Out: the log of one response set as an Inspect `.json` log, every sample as Inspect wrote it
with a scorer added, `reviewers`, whose value is the score people left for the item (the
judge's where nobody changed it), so inspect_ai's own reader and viewer show both.

The `.eval` zip is compressed with Zstandard (method 93), which Python's zipfile reads once
zipfile-zstd has registered it, the same patch inspect_ai itself relies on.
"""

import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any

import zipfile_zstd  # noqa: F401  # registers Zstandard (method 93) with zipfile

from apps.interop.models import Import, ImportedLog
from apps.interop.results import Answer, ImportError_, ModelResults, Results, Sample, subject_range
from apps.judges.models import Judge, Score

REVIEWERS = "reviewers"
# Inspect's letter values (inspect_ai.scorer: CORRECT, INCORRECT, PARTIAL, NOANSWER), and the
# words its value_to_float reads as numbers.
LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def read_log(data: bytes, file_name: str) -> dict[str, Any]:
    """The log as one JSON object (header fields and `samples`), from either format."""
    if data[:2] == b"PK":
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            names = set(archive.namelist())
            if "header.json" not in names:
                raise ImportError_(
                    f"{file_name}: the log has no header.json; was the evaluation still running?"
                )
            log = json.loads(archive.read("header.json"))
            log["samples"] = [
                json.loads(archive.read(name))
                for name in sorted(names)
                if name.startswith("samples/") and name.endswith(".json")
            ]
            if "reductions.json" in names:
                log["reductions"] = json.loads(archive.read("reductions.json"))
        except (zipfile.BadZipFile, NotImplementedError, ValueError, KeyError) as exc:
            if isinstance(exc, ImportError_):
                raise
            raise ImportError_(f"{file_name}: not a readable Inspect .eval log ({exc}).") from None
    else:
        try:
            log = json.loads(data)
        except ValueError as exc:
            raise ImportError_(f"{file_name}: not JSON ({exc}).") from None
    if not isinstance(log, dict) or not isinstance(log.get("eval"), dict):
        raise ImportError_(f"{file_name}: not an Inspect log (no “eval” section).")
    if not isinstance(log.get("samples"), list) or not log["samples"]:
        raise ImportError_(f"{file_name}: the log has no samples (run it with samples logged).")
    return log


def read_logs(files: list[tuple[str, bytes]], dataset_name: str = "") -> Results:
    """Logs of one task (one per model) as `Results`; ImportError_ names the file and sample."""
    if not files:
        raise ImportError_("Choose at least one Inspect log.")
    logs = [(name, read_log(data, name)) for name, data in files]
    first_name, first = logs[0]
    task = str(first["eval"].get("task") or "inspect")
    samples: dict[str, Sample] = {}
    models: list[ModelResults] = []
    scorers: dict[str, dict[str, tuple[float, float]]] = {}
    ranges: dict[tuple[str, str], list[float]] = {}
    for file_name, log in logs:
        if log["eval"].get("task") != first["eval"].get("task"):
            raise ImportError_(
                f"{file_name}: task {log['eval'].get('task')!r}, not {task!r} as {first_name}; "
                "import each task's logs on their own."
            )
        answers = []
        for index, raw in enumerate(log["samples"]):
            sample, answer = _sample(raw, f"{file_name}, sample {index + 1}")
            known = samples.setdefault(sample.key, sample)
            if known.row != sample.row and answer.epoch == 0:
                raise ImportError_(
                    f"{answer.where}: sample {sample.key!r} differs from the same sample in "
                    f"{known.where.split(',')[0]} (input, target or metadata)."
                )
            for scorer, values in answer.values.items():
                for subject, value in values.items():
                    ranges.setdefault((scorer, subject), [])
                    if value is not None:
                        ranges[(scorer, subject)].append(value)
            answers.append(answer)
        epochs = int((log["eval"].get("config") or {}).get("epochs") or 1)
        epochs = max([epochs, *(a.epoch + 1 for a in answers)])
        header = {k: v for k, v in log.items() if k != "samples"}
        models.append(
            ModelResults(
                label=_model_label(log),
                file_name=file_name,
                epochs=epochs,
                answers=answers,
                header=header,
            )
        )
    for (scorer, subject), seen in ranges.items():
        scorers.setdefault(scorer, {})[subject] = subject_range(seen)
    columns = ["id", "input", "target"]
    for sample in samples.values():
        columns += [c for c in sample.row if c not in columns]
    versions = sorted(
        {str((log["eval"].get("packages") or {}).get("inspect_ai", "")) for _, log in logs}
    )
    return Results(
        tool=Import.Tool.INSPECT,
        tool_version=", ".join(v for v in versions if v),
        dataset_name=(dataset_name or task)[:200],
        columns=columns,
        mapping={"id_column": "id", "input_columns": ["input"], "reference_column": "target"},
        samples=list(samples.values()),
        models=models,
        scorers=scorers,
        file_names=[name for name, _ in files],
    )


def _model_label(log: dict[str, Any]) -> str:
    """The model's name as Inspect gives it, less the provider path ("openai/gpt-4o" stays;
    "openai-api/local/m" is "m" on the board, the full name in the run's file)."""
    model = str(log["eval"].get("model") or "model")
    parts = model.split("/")
    return parts[-1] if parts[0] == "openai-api" and len(parts) > 2 else model


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: the text ones
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return "" if content is None else str(content)


def _sample(raw: Any, where: str) -> tuple[Sample, Answer]:
    if not isinstance(raw, dict) or "id" not in raw:
        raise ImportError_(f"{where}: not an Inspect sample (no id).")
    key = str(raw["id"])
    where = f"{where.split(',')[0]}, sample {key!r}"
    epoch = raw.get("epoch", 1)
    if not isinstance(epoch, int) or epoch < 1:
        raise ImportError_(f"{where}: epoch {epoch!r} is not a number from 1.")
    where += f" epoch {epoch}"
    given = raw.get("input")
    if isinstance(given, list):
        users = [_text(m.get("content")) for m in given if isinstance(m, dict)]
        text = users[-1] if users else ""
    else:
        text = _text(given)
    target = raw.get("target", "")
    row: dict[str, Any] = {
        "id": key,
        "input": text,
        "target": target if isinstance(target, str) else "\n".join(map(str, target)),
    }
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ImportError_(f"{where}: metadata is not an object.")
    for name, value in metadata.items():
        row[name if name not in row else f"metadata.{name}"] = value
    output = raw.get("output") or {}
    usage = output.get("usage") or {}
    choices = output.get("choices") or [{}]
    error = raw.get("error")
    answer = Answer(
        key=key,
        epoch=epoch - 1,
        text=_text(output.get("completion")),
        where=where,
        error=_text(error.get("message") if isinstance(error, dict) else error),
        finish_reason=str(choices[0].get("stop_reason") or ""),
        prompt_tokens=int(usage.get("input_tokens") or 0),
        completion_tokens=int(usage.get("output_tokens") or 0),
        record=raw,
    )
    for scorer, score in (raw.get("scores") or {}).items():
        if scorer == REVIEWERS:
            continue  # our own scorer, from a log exported here and imported again
        if not isinstance(score, dict) or "value" not in score:
            raise ImportError_(f"{where}: score {scorer!r} has no value.")
        value = score["value"]
        if isinstance(value, dict):
            answer.values[scorer] = {
                str(k): _number(v, f"{where}: score {scorer!r}, {k!r}") for k, v in value.items()
            }
        else:
            answer.values[scorer] = {scorer: _number(value, f"{where}: score {scorer!r}")}
        answer.explanations[scorer] = _text(score.get("explanation"))
    return Sample(key=key, row=row, where=where), answer


def _number(value: Any, where: str) -> float | None:
    """A score value as a number, read as inspect_ai's value_to_float reads it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ImportError_(f"{where}: {value!r} is not a finite number.")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in LETTERS:
            return LETTERS[text]
        if text.lower() in WORDS:
            return WORDS[text.lower()]
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    raise ImportError_(
        f"{where}: {value!r} is not a number, true/false or one of Inspect's C, I, P, N."
    )


# ---- out ---------------------------------------------------------------------------------
def export_log(log: ImportedLog) -> dict[str, Any]:
    """The Inspect log of `log`'s response set, with the reviewers' scores added."""
    judges = {
        judge_run.pk: judge_run.judged_with.judge
        for judge_run in log.run.judge_runs.filter(judged_with__judge__kind=Judge.Kind.IMPORTED)
        .select_related("judged_with__judge")
        .order_by("pk")
    }
    finals: dict[int, dict[str, float | None]] = {}
    reasons: dict[int, list[str]] = {}
    changed: dict[int, list[str]] = {}
    for run_id, item_id, subject, final, judge_value, overridden, reason in Score.objects.filter(
        run_id__in=judges
    ).values_list(
        "run_id",
        "item_id",
        "subject",
        "final_value",
        "judge_value",
        "override_value",
        "override_reason",
    ):
        # The subject is the scorer's name, or a key of a scorer's dict value; two scorers
        # with the same key are told apart by the judge's name.
        key = subject if subject not in finals.get(item_id, {}) else f"{judges[run_id]}/{subject}"
        finals.setdefault(item_id, {})[key] = final
        if overridden is not None:
            changed.setdefault(item_id, []).append(key)
            reasons.setdefault(item_id, []).append(
                f"{key}: {judge_value} → {final} ({reason})" if reason else f"{key}: {final}"
            )
    out = dict(log.header)
    samples = []
    per_key: dict[str, list[float]] = {}
    for record in log.records.order_by("position"):
        sample = dict(record.data)
        values = finals.get(record.item_id, {})
        sample["scores"] = {
            **(sample.get("scores") or {}),
            REVIEWERS: {
                "value": dict(values),
                "explanation": "; ".join(reasons.get(record.item_id, []))
                or "No reviewer changed the judge's values.",
                "metadata": {"overridden": changed.get(record.item_id, [])},
                "history": [],
            },
        }
        if record.epoch == 0:
            for key, value in values.items():
                if value is not None:
                    per_key.setdefault(key, []).append(value)
        samples.append(sample)
    out["samples"] = samples
    results = dict(out.get("results") or {})
    results["scores"] = [
        *[s for s in results.get("scores") or [] if s.get("name") != REVIEWERS],
        {
            "name": REVIEWERS,
            "scorer": REVIEWERS,
            "scored_samples": len({r.item_id for r in log.records.all()}),
            "unscored_samples": 0,
            "params": {},
            "metrics": {
                key: {"name": key, "value": math.fsum(v) / len(v), "params": {}}
                for key, v in per_key.items()
            },
        },
    ]
    out["results"] = results
    return out


def export_name(log: ImportedLog) -> str:
    stem = Path(log.file_name).stem or "inspect"
    return f"{stem}-reviewed.json"
