"""Judges that learn from reviewers (#14.1): people's settled scores become few-shot examples of
a new judge version, and a seeded share of the reviewed items is held out so the version can be
checked on items it never saw.

A reviewed item is a (judge run, item) of any version of the judge whose every subject people
settled (an override, a confirmation or the several reviewers' consensus). Items are split by
dataset item, not by run, so an item reviewed in two models' runs is on one side only: an
example never teaches the judge the question it is checked on. The split is a hash of the seed
and the item id, so new reviews never move an item from one side to the other.

An example is rendered by the judge's own prompt (its user message for that item and response)
and the reply people would have wanted, in the judge's reply format; `judge_prompts.with_examples`
puts the examples before the item in every request of the version.
"""

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F

from apps.datasets.models import Item
from apps.datasets.values import as_text, prompt_inputs
from apps.judges.judge_prompts import PromptError, build_rubric_messages
from apps.judges.models import Judge, JudgeCheck, JudgeRun, Score
from apps.judges.parsing import JudgeReplyError, parse_rubric_reply
from apps.runs.engine.launch import launch
from apps.runs.models import Response, Run

HELD_OUT_SHARE = 0.5
DEFAULT_EXAMPLES = 6
MAX_EXAMPLES = 20


class LearningError(ValueError):
    """Examples that cannot be drafted or saved; the message says why in plain words."""


def is_held_out(item_id: int, seed: int, share: float = HELD_OUT_SHARE) -> bool:
    digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


@dataclass
class Reviewed:
    """A judge run's item whose every subject people settled."""

    run_id: int
    item_id: int
    values: dict[str, float]  # people's final value per subject
    judge_values: dict[str, float | None]
    reason: str
    overridden: bool  # at least one subject changed (these teach the most)


def reviewed_items(judge: Judge) -> list[Reviewed]:
    """Every reviewed (run, item) of the judge's versions, over its current subjects. Runs of
    generation runs with several epochs are left out: people settle the item, not an answer."""
    subjects = judge.subject_names
    runs = Run.objects.judging().filter(
        judged_with__judge__task_id=judge.task_id, judged_with__judge__name=judge.name
    )
    runs = runs.exclude(source_run__epochs__gt=1)
    rows = (
        Score.objects.filter(run__in=runs, subject__in=subjects)
        .reviewed()
        .filter(final_value__isnull=False)
        .values_list(
            "run_id", "item_id", "subject", "final_value", "judge_value", "override_reason"
        )
        .annotate(by=F("override_by_id"))
    )
    found: dict[tuple[int, int], Reviewed] = {}
    for run_id, item_id, subject, final, judged, reason, by in rows.order_by("run_id", "item_id"):
        if final is None:  # excluded above; says so to the type checker
            continue
        entry = found.setdefault(
            (run_id, item_id), Reviewed(run_id, item_id, {}, {}, "", overridden=False)
        )
        entry.values[subject] = final
        entry.judge_values[subject] = judged
        # Several reviewers' consensus is written by the app (no user), naming the reviewers:
        # not a reason to teach a judge. A person's override or adjudication reason is.
        if reason and by is not None:
            entry.reason = f"{entry.reason} {reason}".strip()
        entry.overridden = entry.overridden or judged is None or judged != final
    return [entry for entry in found.values() if len(entry.values) == len(subjects)]


def stratified(candidates: list[Reviewed], subject: str, k: int, seed: int) -> list[Reviewed]:
    """Up to k candidates spread over the subject's values: one of each value in turn (lowest
    first), overrides before confirmations within a value, seeded otherwise."""
    rng = random.Random(seed)
    strata: dict[float, list[Reviewed]] = {}
    for candidate in sorted(candidates, key=lambda c: (c.run_id, c.item_id)):
        strata.setdefault(candidate.values[subject], []).append(candidate)
    for members in strata.values():
        rng.shuffle(members)
        members.sort(key=lambda c: not c.overridden)  # stable: the shuffle orders the rest
    chosen: list[Reviewed] = []
    seen: set[int] = set()
    queues = [strata[value] for value in sorted(strata)]
    while len(chosen) < k and any(queues):
        for queue in queues:
            while queue and queue[0].item_id in seen:
                queue.pop(0)  # one example per item, even when two runs reviewed it
            if queue and len(chosen) < k:
                picked = queue.pop(0)
                seen.add(picked.item_id)
                chosen.append(picked)
    return chosen


def reply_for(
    values: dict[str, float],
    reason: str,
    confidence: bool = False,
    reply_format: str = "json",
    subjects: list[dict[str, Any]] | None = None,
) -> str:
    """The reply people would have wanted, in the rubric judge's own reply format (people's
    values are certain: a judge asked for its confidence learns 1 for them)."""
    shown: dict[str, float] = {
        name: int(v) if float(v).is_integer() else round(v, 2) for name, v in values.items()
    }
    reason = reason or "As the reviewers scored it."
    if reply_format == "json" or not shown:
        if confidence:
            shown["confidence"] = 1
        return json.dumps({"reason": reason, **shown})
    first = next(iter(shown.values()))
    tops = {str(s["name"]): float(s["max"]) for s in subjects or [] if "max" in s}
    if reply_format == "brackets":
        return f"{reason}\n\nRating: [[{first}]]"
    if reply_format == "result":
        return f"Feedback: {reason} [RESULT] {first}"
    if reply_format == "last_number":
        return f"{reason}\n\n{first}"
    if reply_format == "score":
        if len(shown) == 1:
            return f"{reason}\n\nScore: {first}/{tops.get(next(iter(shown)), 0):g}"
        lines = [f"{name}: {value}/{tops.get(name, 0):g}" for name, value in shown.items()]
        return reason + "\n\n" + "\n".join(lines)
    raise LearningError(
        "Examples cannot be written for a judge whose replies are read by a regular "
        "expression: choose another reply format to learn from reviews."
    )


def render_example(judge: Judge, reviewed: Reviewed) -> dict[str, Any]:
    """The example as the version stores it: the judge's own user message for the item and
    response, the wanted reply, and where it came from."""
    run = Run.objects.select_related("dataset").get(pk=reviewed.run_id)
    item = Item.objects.get(pk=reviewed.item_id)
    if run.source_run_id is not None:
        response = (
            Response.objects.filter(run_id=run.source_run_id, item=item, epoch=0)
            .values_list("text", flat=True)
            .first()
            or ""
        )
    else:
        # As the judge run reads it (judging.JudgePlugin._texts): JSON for a non-string.
        response = as_text((item.fields or {}).get(run.source_column))
    dataset = run.dataset
    fields = item.fields or {}
    hidden = dataset.hidden_columns | {run.source_column}
    inputs = prompt_inputs(fields, dataset.input_columns, hidden)
    try:
        messages = build_rubric_messages(
            subjects=judge.subjects,
            response=response,
            reference=item.reference or "",
            fields=fields,
            inputs=inputs,
            system_prompt=judge.system_prompt,
            user_prompt=judge.user_prompt,
            confidence=judge.ask_confidence,
            reply_format=judge.reply_format,
        )
    except PromptError as exc:
        raise LearningError(f"Item {item.key}: {exc}") from None
    return {
        "item": item.pk,
        "key": item.key,
        "run": run.pk,
        "user": messages[-1]["content"],
        "reply": reply_for(
            reviewed.values,
            reviewed.reason,
            judge.ask_confidence,
            judge.reply_format,
            judge.subjects,
        ),
        "values": reviewed.values,
        "judge_values": reviewed.judge_values,
        "reason": reviewed.reason,
        "overridden": reviewed.overridden,
    }


@dataclass
class Draft:
    judge: Judge
    seed: int
    share: float
    k: int  # examples asked for
    reviewed: int  # reviewed (run, item)s of the judge
    held_out: list[int]  # item ids kept for checking
    candidates: list[Reviewed] = field(default_factory=list)  # the rest: may be examples
    examples: list[dict[str, Any]] = field(default_factory=list)


def draft(
    judge: Judge, k: int = DEFAULT_EXAMPLES, seed: int = 0, share: float = HELD_OUT_SHARE
) -> Draft:
    """Examples for a new version of a rubric judge from its reviewed items."""
    if judge.kind != Judge.Kind.RUBRIC:
        raise LearningError(
            f"{judge} is a {judge.get_kind_display()} judge: examples from reviews are for "
            "LLM rubric judges."
        )
    reviewed = reviewed_items(judge)
    held_out = sorted({r.item_id for r in reviewed if is_held_out(r.item_id, seed, share)})
    kept = set(held_out)
    candidates = [r for r in reviewed if r.item_id not in kept]
    k = max(0, min(k, MAX_EXAMPLES))
    found = Draft(judge, seed, share, k, len(reviewed), held_out, candidates)
    chosen = stratified(candidates, judge.subject_names[0], k, seed)
    found.examples = [render_example(judge, r) for r in chosen]
    return found


def chosen_examples(draft: Draft, chosen: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    """Examples for (run id, item id, reply as edited) picked on the page: each rendered again
    here from its reviewed item (what the judge is shown never comes from the browser)."""
    by_key = {(r.run_id, r.item_id): r for r in draft.candidates}
    examples = []
    for run_id, item_id, reply in chosen:
        reviewed = by_key.get((run_id, item_id))
        if reviewed is None or item_id in draft.held_out:
            raise LearningError(
                f"Item #{item_id} is not a reviewed item outside the held-out split: it cannot "
                "be an example."
            )
        example = render_example(draft.judge, reviewed)
        example["reply"] = reply.strip() or example["reply"]
        examples.append(example)
    return examples


def save_version(judge: Judge, examples: list[dict[str, Any]], draft: Draft, user: Any) -> Judge:
    """The next version of the judge with these examples (chosen and edited from the draft),
    recording the held-out split. An example of a held-out item, or of an item people did not
    review, is refused; an edited reply must read as the judge's own replies do."""
    allowed = {(r.run_id, r.item_id) for r in draft.candidates}
    held = set(draft.held_out)
    for example in examples:
        key = (int(example["run"]), int(example["item"]))
        if example["item"] in held or key not in allowed:
            raise LearningError(
                f"Item {example.get('key', example['item'])} is not a reviewed item outside "
                "the held-out split: it cannot be an example."
            )
        try:
            parse_rubric_reply(
                str(example["reply"]),
                judge.subjects,
                reply_format=judge.reply_format,
                pattern=judge.reply_pattern,
            )
        except JudgeReplyError as exc:
            raise LearningError(
                f"The reply of example {example.get('key', '')} would not be read: {exc.message}"
            ) from None
    with transaction.atomic():
        new = Judge.objects.get(pk=judge.pk)
        new.examples = examples
        new.learned_from = {
            "from_version": judge.pk,
            "seed": draft.seed,
            "held_out_share": draft.share,
            "held_out": draft.held_out,
        }
        return new.save_as_new_version(user)


# ---- checking a version against people (#14.2) ---------------------------------------------------
def split_of(judge: Judge) -> dict[str, Any]:
    """The held-out split a version is checked on: the one it recorded when it learned, else
    the newest recorded by a version of the same judge (so a version without examples is
    checked on the very items an improved one was)."""
    if judge.learned_from.get("held_out") is not None:
        return dict(judge.learned_from)
    for version in judge.versions().order_by("-version"):
        if version.learned_from.get("held_out") is not None:
            return dict(version.learned_from)
    return {}


def start_check(
    judge: Judge, endpoint: Any, user: Any = None, split: dict[str, Any] | None = None
) -> list[Run]:
    """Check runs of this version: for each judge run of the judge with reviewed held-out
    items, one run judging just those items the way that run's responses were judged."""
    split = split if split is not None else split_of(judge)
    if not split:
        raise LearningError(
            f"No version of {judge.name} has a held-out split yet: improve it with reviews first "
            "(the split is made then, and kept)."
        )
    if judge.kind != Judge.Kind.RUBRIC:
        raise LearningError(f"{judge} is not an LLM rubric judge.")
    if endpoint is None:
        raise LearningError(f"{judge} is an LLM judge: choose the endpoint that judges.")
    held = set(split["held_out"])
    per_run: dict[int, list[int]] = {}
    for reviewed in reviewed_items(judge):
        if reviewed.item_id in held:
            per_run.setdefault(reviewed.run_id, []).append(reviewed.item_id)
    if not per_run:
        raise LearningError("No held-out item has been reviewed: nothing to check against.")
    runs = []
    with transaction.atomic():
        for run_id, items in sorted(per_run.items()):
            reviewed_run = Run.objects.get(pk=run_id)
            run = JudgeRun.create_with(
                judge,
                task_id=judge.task_id,
                kind=Run.Kind.CHECK,
                dataset_id=reviewed_run.dataset_id,
                endpoint=endpoint,
                source_run_id=reviewed_run.source_run_id,
                source_column=reviewed_run.source_column,
                chunk_size=50,
                created_by=user if getattr(user, "pk", None) else None,
            )
            JudgeCheck.objects.create(
                run=run,
                reviewed_run=reviewed_run,
                items=sorted(items),
                seed=int(split.get("seed", 0)),
                held_out_share=float(split.get("held_out_share", HELD_OUT_SHARE)),
            )
            launch(run, Run.Mode.RESUME)
            runs.append(run)
    return runs
