"""OpenAI Evals' run logs in (`oaieval <completion_fn> <eval> --record_path run.jsonl`, or the
log it leaves under /tmp/evallogs/).

The recorder (evals/record.py, LocalRecorder) writes one JSON object a line: first the run's
`spec` (completion_fns, eval_name, base_eval, split, run_id…), then events, each with a
sample_id, a type and its data, and, when the run finished, a `final_report` line, which may
come before the last events (events are flushed in batches). The events read here:

- `raw_sample`: the registry sample itself (`input`, chat messages or a text, and `ideal`);
- `sampling`: the prompt sent (chat messages or a text) and what was `sampled` (a list of
  completions, or one text); the first is the model's answer, later ones (a model-graded
  eval's grader) go into the explanation;
- `match`: `correct` (true/false), `expected`, `picked`;
- `metrics`: any values (numbers and true/false are scores; words, like a model grader's
  `choice`, go into the explanation);
- `error`: a sample that failed.

Each log is one model (its completion_fns; several logs of one model and different evals
join). Each sample is an item (its sample_id as the id, the chat prompt as the conversation
and its text as the input, the expected answer as the reference, the raw sample's other
fields as fields), each model's first sampled answer a response set, and each eval's
`correct` and numeric metrics the subjects of a judge `openai-<base eval>`. The recorder
does not write evals' version, so the import has none.

OpenAI's Evals platform (the API's evals, being retired) gives a run's results as output
items (`client.evals.runs.output_items.list(…)`, each `eval.run.output_item`): saved one a line
(the SDK's `model_dump_json()`, or whole list pages), a file per run. Each data source item
is an item (`datasource_item_id` its id, the item's fields as fields, the one named like a
reference answer as the reference, the sample's input messages as the conversation, a
developer message as the system one, and their text as the input), the run's model
(`sample.model`) a response set of the sample's output, and the graders a judge
`openai-graders`: a subject per grader (its score) and `pass` (the item's status), each
grader's passed verdict and own sample as the reason.

Out (oaieval's logs only): each run's log again, line for line, with the values people left
in the `match` (`correct`) and `metrics` events (the recorded value, the reviewed one and the
reason beside them under `evalsite_review`) and the final report's `evalsite_reviewed`, each
subject's mean over the run's samples; evals' own log readers (evals/utils/log_utils.py,
line by line) and this importer read the corrected scores.
"""

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from apps.datasets.importing import reference_like
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

ANSWER_EVENTS = ("sampling", "match", "metrics", "error")
OUTPUT_ITEM = "eval.run.output_item"
GRADERS = "graders"


def read_logs(files: list[tuple[str, bytes]], dataset_name: str = "") -> Results:
    if not files:
        raise ImportError_("Choose OpenAI Evals run logs (oaieval's --record_path .jsonl).")
    platform = [_is_output_items(data) for _, data in files]
    if all(platform):
        return read_output_items(files, dataset_name)
    if any(platform):
        raise ImportError_(
            "Import the Evals platform's output items and oaieval's run logs one at a time."
        )
    items: dict[str, Sample] = {}
    models: dict[str, ModelResults] = {}
    scorers: dict[str, dict[str, list[float]]] = {}
    evals: list[str] = []
    for name, data in files:
        spec, final_report, events = _read(name, data)
        label = _label(spec, name)
        base_eval = str(spec.get("base_eval") or str(spec.get("eval_name") or "eval").split(".")[0])
        if base_eval not in evals:
            evals.append(base_eval)
        model = models.setdefault(
            label,
            ModelResults(label=label, file_name=name, epochs=1, answers=[], header={"runs": []}),
        )
        model.header["runs"].append({"file": name, "spec": spec, "final_report": final_report})
        for sample_id, sample_events in events.items():
            where = f"{name}, line {sample_events[0][0]} (sample {sample_id})"
            sample = _sample(sample_id, sample_events, where)
            known = items.setdefault(sample_id, sample)
            if known.row != sample.row:
                known.row = _merged(known, sample)
            answer = _answer(sample_id, base_eval, sample_events, name)
            if answer is None:
                continue
            for subject, value in answer.values[base_eval].items():
                scorers.setdefault(base_eval, {}).setdefault(subject, [])
                if value is not None:
                    scorers[base_eval][subject].append(value)
            model.answers.append(answer)
    if not items:
        raise ImportError_(f"{', '.join(n for n, _ in files)}: the logs hold no samples.")
    columns = ["id", "input", "conversation", "ideal"]
    for sample in items.values():
        columns += [c for c in sample.row if c not in columns]
    chats = all(sample.row.get("conversation") for sample in items.values())
    if not chats:
        columns.remove("conversation")
        for sample in items.values():
            sample.row.pop("conversation", None)
    return Results(
        tool=Import.Tool.OPENAI,
        tool_version="",
        dataset_name=(dataset_name or "+".join(evals))[:200],
        columns=columns,
        mapping={
            "id_column": "id",
            "input_columns": ["input"],
            "reference_column": "ideal",
            **({"conversation_column": "conversation"} if chats else {}),
        },
        samples=list(items.values()),
        models=list(models.values()),
        scorers={
            scorer: {s: subject_range(v) for s, v in subjects.items()}
            for scorer, subjects in scorers.items()
        },
        file_names=[name for name, _ in files],
    )


def _read(
    name: str, data: bytes
) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[tuple[int, dict[str, Any]]]]]:
    """The spec, the final report and each sample's events ((line, event), in event order)."""
    spec: dict[str, Any] | None = None
    final_report: dict[str, Any] = {}
    events: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ImportError_(f"{where}: not JSON ({exc}).") from None
        if not isinstance(row, dict):
            raise ImportError_(f"{where}: not a JSON object.")
        if "spec" in row:
            if not isinstance(row["spec"], dict):
                raise ImportError_(f"{where}: spec is not an object.")
            spec = row["spec"]
        elif "final_report" in row:
            final_report = row["final_report"] if isinstance(row["final_report"], dict) else {}
        elif "type" in row and "sample_id" in row:
            if not isinstance(row.get("data"), dict):
                raise ImportError_(f"{where}: the {row['type']!r} event's data is not an object.")
            events[str(row["sample_id"])].append((number, row))
        else:
            raise ImportError_(
                f"{where}: neither the spec, an event (type, sample_id, data) nor the final report."
            )
    if spec is None:
        raise ImportError_(
            f"{name}: not an OpenAI Evals log (no spec line; oaieval writes it first)."
        )
    for sample_events in events.values():
        sample_events.sort(key=lambda pair: (_event_id(pair[1]), pair[0]))
    return spec, final_report, events


def _event_id(event: dict[str, Any]) -> float:
    value = event.get("event_id")
    return float(value) if isinstance(value, int | float) else math.inf


def _label(spec: dict[str, Any], name: str) -> str:
    """The completion functions the run asked (older logs: model_name)."""
    fns = spec.get("completion_fns")
    if isinstance(fns, list) and fns:
        return "+".join(str(f) for f in fns)
    return str(spec.get("model_name") or Path(name).stem)


def _first(events: list[tuple[int, dict[str, Any]]], kind: str) -> dict[str, Any] | None:
    return next((event["data"] for _, event in events if event["type"] == kind), None)


def _text(prompt: Any) -> str:
    """A prompt as text: a chat prompt's messages' contents, one per line."""
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        return "\n".join(str(m.get("content") or "") for m in prompt)
    return prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)


def _is_chat(prompt: Any) -> bool:
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(m, dict) and "role" in m for m in prompt)
    )


def _sample(sample_id: str, events: list[tuple[int, dict[str, Any]]], where: str) -> Sample:
    raw = _first(events, "raw_sample") or {}
    sampling = _first(events, "sampling") or {}
    match = _first(events, "match") or {}
    prompt = raw.get("input", sampling.get("prompt"))
    ideal = raw.get("ideal", match.get("expected"))
    if isinstance(ideal, list) and len(ideal) == 1:
        ideal = ideal[0]
    row: dict[str, Any] = {
        "id": sample_id,
        "input": _text(prompt) if prompt is not None else "",
        "conversation": prompt if _is_chat(prompt) else None,
        "ideal": ideal,
    }
    for field, value in raw.items():
        if field not in ("input", "ideal"):
            row[field if field not in row else f"sample.{field}"] = value
    return Sample(key=sample_id, row=row, where=where)


def _merged(known: Sample, other: Sample) -> dict[str, Any]:
    """One sample seen by several models: what one log lacks (a raw sample, the expected
    answer), another may give; a field two logs give differently is an error."""
    row = dict(known.row)
    for field, value in other.row.items():
        if row.get(field) in (None, "") or row[field] == value:
            row[field] = value if value not in (None, "") else row.get(field)
        elif value not in (None, ""):
            raise ImportError_(
                f"{other.where}: {field} differs from {known.where} ({value!r}, not {row[field]!r})."
            )
    return row


def _answer(
    sample_id: str, scorer: str, events: list[tuple[int, dict[str, Any]]], name: str
) -> Answer | None:
    samplings = [event["data"] for _, event in events if event["type"] == "sampling"]
    if not samplings and not any(event["type"] in ANSWER_EVENTS for _, event in events):
        return None  # a raw sample only: an item nobody answered
    values: dict[str, list[float | None]] = defaultdict(list)
    notes: list[str] = []
    error = ""
    for number, event in events:
        kind, data = event["type"], event["data"]
        at = f"{name}, line {number} (sample {sample_id})"
        if kind == "match":
            values["correct"].append(_number(data.get("correct"), f"{at}: match 'correct'"))
            notes.append(
                f"match: expected {json.dumps(data.get('expected'), ensure_ascii=False)}, "
                f"picked {json.dumps(data.get('picked'), ensure_ascii=False)}"
            )
        elif kind == "metrics":
            for metric, value in data.items():
                if isinstance(value, bool | int | float) or value is None:
                    values[str(metric)].append(_number(value, f"{at}: metric {metric!r}"))
                else:
                    notes.append(f"{metric}: {json.dumps(value, ensure_ascii=False)}")
        elif kind == "error":
            error = f"{data.get('type') or 'error'}: {data.get('message') or data}"
    for later in samplings[1:]:
        notes.append(f"grader: {_sampled(later)}")
    first = samplings[0] if samplings else {}
    usage: dict[str, Any] = first["usage"] if isinstance(first.get("usage"), dict) else {}
    text = _sampled(first) if samplings else ""
    return Answer(
        key=sample_id,
        epoch=0,
        text=text,
        where=f"{name}, line {events[0][0]} (sample {sample_id})",
        error=error if not samplings else "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        values={scorer: {s: _mean(vs) for s, vs in values.items()}},
        explanations={scorer: "\n".join(notes)},
        record={"events": [event for _, event in events]},
    )


def _mean(values: list[float | None]) -> float | None:
    """A subject recorded several times for a sample (an eval may match twice): their mean."""
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def _sampled(data: dict[str, Any]) -> str:
    sampled = data.get("sampled")
    if isinstance(sampled, list):
        sampled = sampled[0] if len(sampled) == 1 else sampled
    return _text(sampled) if sampled is not None else ""


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return float(value)
    raise ImportError_(f"{where}: {value!r} is not a number or true/false.")


# ---- the Evals platform's output items ----------------------------------------------------
def _is_output_items(data: bytes) -> bool:
    head = data.lstrip()[:4000].decode("utf-8", "replace")
    return f'"{OUTPUT_ITEM}"' in head and '"spec"' not in head


def _output_items(name: str, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(where, output item) of each line; a line may be a whole list page ({"data": […]})."""
    found: list[tuple[str, dict[str, Any]]] = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ImportError_(f"{where}: not JSON ({exc}).") from None
        page = row.get("data") if isinstance(row, dict) and row.get("object") == "list" else None
        for index, item in enumerate(page if isinstance(page, list) else [row], 1):
            at = f"{where}, item {index}" if isinstance(page, list) else where
            if not isinstance(item, dict) or item.get("object") != OUTPUT_ITEM:
                raise ImportError_(f"{at}: not an output item (object {OUTPUT_ITEM!r}).")
            for key in ("datasource_item_id", "datasource_item", "sample", "results"):
                if key not in item:
                    raise ImportError_(f"{at}: the output item has no {key}.")
            found.append((at, item))
    return found


def read_output_items(files: list[tuple[str, bytes]], dataset_name: str = "") -> Results:
    parsed = [(name, _output_items(name, data)) for name, data in files]
    evals = sorted({str(item.get("eval_id") or "") for _, items in parsed for _, item in items})
    several = len(evals) > 1
    samples: dict[str, Sample] = {}
    models: dict[str, ModelResults] = {}
    seen: list[float] = []
    for name, items in parsed:
        for where, item in items:
            key = str(item["datasource_item_id"])
            key = f"{item.get('eval_id')}/{key}" if several else key
            where = f"{where} (item {key})"
            sample, answer = _output_item(item, key, where)
            known = samples.setdefault(key, sample)
            if known.row != sample.row:
                known.row = _merged(known, sample)
            run = str(item.get("run_id") or name)
            label = str((item.get("sample") or {}).get("model") or run)
            model = models.setdefault(
                run,
                ModelResults(label=label, file_name=name, epochs=1, answers=[], header={}),
            )
            model.header.setdefault("runs", {})[run] = {"eval_id": item.get("eval_id")}
            seen += [v for v in answer.values[GRADERS].values() if v is not None]
            model.answers.append(answer)
    if not samples:
        raise ImportError_(f"{', '.join(n for n, _ in files)}: no output items.")
    labels = [m.label for m in models.values()]
    for run, model in models.items():
        if labels.count(model.label) > 1:
            model.label = f"{model.label} ({run})"  # one model in two runs: two response sets
    columns = ["id", "input", "conversation"]
    for sample in samples.values():
        columns += [c for c in sample.row if c not in columns]
    chats = all(sample.row.get("conversation") for sample in samples.values())
    if not chats:
        columns.remove("conversation")
        for sample in samples.values():
            sample.row.pop("conversation", None)
    reference = next((c for c in columns[2:] if c != "conversation" and reference_like(c)), None)
    subjects = {
        s: subject_range(seen)
        for m in models.values()
        for a in m.answers
        for s in a.values[GRADERS]
    }
    return Results(
        tool=Import.Tool.OPENAI,
        tool_version="",
        dataset_name=(dataset_name or "+".join(e for e in evals if e) or "openai-evals")[:200],
        columns=columns,
        mapping={
            "id_column": "id",
            "input_columns": ["input"],
            "reference_column": reference,
            **({"conversation_column": "conversation"} if chats else {}),
        },
        samples=list(samples.values()),
        models=list(models.values()),
        scorers={GRADERS: subjects},
        file_names=[name for name, _ in files],
    )


def _output_item(item: dict[str, Any], key: str, where: str) -> tuple[Sample, Answer]:
    sample = item["sample"] if isinstance(item["sample"], dict) else {}
    fields = item["datasource_item"] if isinstance(item["datasource_item"], dict) else {}
    prompt = sample.get("input")
    chat = None
    if isinstance(prompt, list) and _is_chat(prompt):
        # The platform's "developer" messages are the system prompt of newer models.
        chat = [{**m, "role": "system" if m["role"] == "developer" else m["role"]} for m in prompt]
    row: dict[str, Any] = {
        "id": key,
        "input": _text(prompt) if prompt is not None else "",
        "conversation": chat,
    }
    for field, value in fields.items():
        row[field if field not in row else f"item.{field}"] = value
    values: dict[str, float | None] = {
        "pass": 1.0
        if item.get("status") == "pass"
        else 0.0
        if item.get("status") == "fail"
        else None
    }
    notes = []
    for index, result in enumerate(item["results"] or [], 1):
        if not isinstance(result, dict):
            raise ImportError_(f"{where}: result {index} is not an object.")
        grader = str(result.get("name") or f"grader {index}")
        values[grader] = _number(result.get("score"), f"{where}: grader {grader!r} score")
        note = f"{grader}: {'passed' if result.get('passed') else 'failed'}"
        if result.get("sample"):
            note += f" {json.dumps(result['sample'], ensure_ascii=False)[:2000]}"
        notes.append(note)
    output = sample.get("output") or []
    text = "\n".join(
        str(m.get("content") or "")
        for m in output
        if isinstance(m, dict) and m.get("role", "assistant") == "assistant"
    )
    error: dict[str, Any] = sample["error"] if isinstance(sample.get("error"), dict) else {}
    failed = bool(error.get("code") or error.get("message")) and not text
    usage: dict[str, Any] = sample["usage"] if isinstance(sample.get("usage"), dict) else {}
    return Sample(key=key, row=row, where=where), Answer(
        key=key,
        epoch=0,
        text=text,
        where=where,
        error=f"{error.get('code') or 'error'}: {error.get('message') or ''}" if failed else "",
        finish_reason=str(sample.get("finish_reason") or ""),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        values={GRADERS: values},
        explanations={GRADERS: "\n".join(notes)},
        record=item,
    )


# ---- out (oaieval's logs) -----------------------------------------------------------------
def export_files(log: ImportedLog) -> list[tuple[str, bytes]]:
    """Each run's log of this model, the scores people left in its events."""
    runs = (log.header or {}).get("runs")
    if not isinstance(runs, list) or not runs:
        raise ImportError_(
            "The Evals platform's output items cannot be written back out yet; oaieval's logs can."
        )
    by_run = {str(run["spec"].get("run_id")): run for run in runs}
    scorers = {run_id: _base_eval(run["spec"]) for run_id, run in by_run.items()}
    reviews: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    final: dict[tuple[str, int], dict[str, float]] = {}
    for scorer, score in _scores(log, set(scorers.values())):
        if score.final_value is not None:
            final.setdefault((scorer, score.item_id), {})[score.subject] = score.final_value
        if score.is_reviewed:
            reviews.setdefault((scorer, score.item_id), {})[score.subject] = {
                "value": score.final_value,
                "reason": score.override_reason if score.is_overridden else "Confirmed",
            }
    lines: dict[str, list[str]] = {run_id: [] for run_id in by_run}
    finals: dict[str, dict[str, list[float]]] = {run_id: {} for run_id in by_run}
    for record in log.records.order_by("position"):
        events = record.data.get("events") or []
        run_id = str(events[0].get("run_id")) if events else ""
        if run_id not in by_run:
            run_id = next(iter(by_run))
        reviewed = reviews.get((scorers[run_id], record.item_id), {})
        for event in events:
            event = json.loads(json.dumps(event))
            data = event.get("data")
            if isinstance(data, dict) and event.get("type") in ("match", "metrics"):
                subjects = ["correct"] if event["type"] == "match" else list(data)
                notes = {}
                for subject in subjects:
                    review = reviewed.get(subject)
                    if review is None or review["value"] is None or subject not in data:
                        continue
                    notes[subject] = {"recorded": data[subject], **review}
                    data[subject] = (
                        review["value"] >= 0.5 if event["type"] == "match" else review["value"]
                    )
                if notes:
                    data["evalsite_review"] = notes
            lines[run_id].append(json.dumps(event, ensure_ascii=False))
        for subject, value in final.get((scorers[run_id], record.item_id), {}).items():
            finals[run_id].setdefault(subject, []).append(value)
    files = []
    for run_id, run in by_run.items():
        report = dict(run.get("final_report") or {})
        report["evalsite_reviewed"] = {
            subject: math.fsum(values) / len(values) for subject, values in finals[run_id].items()
        }
        head = [json.dumps({"spec": run["spec"]}), json.dumps({"final_report": report})]
        stem = Path(str(run.get("file") or run_id)).stem or "run"
        body = "\n".join(head + lines[run_id]) + "\n"
        files.append((f"{stem}-reviewed.jsonl", body.encode()))
    return files


def _base_eval(spec: dict[str, Any]) -> str:
    return str(spec.get("base_eval") or str(spec.get("eval_name") or "eval").split(".")[0])


def _scores(log: ImportedLog, scorers: set[str]) -> list[tuple[str, Score]]:
    """(scorer, score) of the imported judges of these scorers over the model's answers."""
    names = {judge_name(Import.Tool.OPENAI, scorer): scorer for scorer in scorers}
    return [
        (names.get(score.run.judged_with.judge.name, ""), score)
        for score in Score.objects.filter(
            run__source_run=log.run, run__judged_with__judge__kind=Judge.Kind.IMPORTED
        ).select_related("run__judged_with__judge")
    ]
