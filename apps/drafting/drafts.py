"""Generated datasets (#15.1): a generator's three prompts asked N times make a draft dataset.

A dataset generation run (`Run.Kind.GENERATE_DATASET`) has N units; unit i asks, in turn,
the generator's content prompt (e.g. "ten facts about a fictional world"), its questions
prompt (which sees the content as `{{ content }}`) and its answers prompt (which sees
`{{ content }}` and the questions as `{{ questions }}`, a numbered list, or `question_list`).
Every prompt also sees `unit` (1…N) and `count` (N). A questions prompt that does not place
`{{ content }}` (or an answers prompt without `{{ questions }}`) continues the conversation
instead: the earlier request and its reply go before it, as GoodAI's LTM prompts expect ("from
the content prompt above"). Where the endpoint has a seed, unit i's three requests carry
seed + i, so a unit asked again asks the same.

A questions or answers reply is read as a JSON list (of strings, or of objects with a
"question"/"answer"/"text" field; an object holding one such list; a ```json fence is fine)
or else as a numbered list ("1." "2)" "Q3:" …, numbered 1, 2, 3… in order; lines that follow
an entry continue it) or else as a bullet list. A reply that is none of those, or answers
that are not as many as the questions, is a failed unit ("Unparseable reply") whose raw reply
is in the attempt log, like any failure of any run; retry failed asks that unit again.

Each unit's questions become draft items (content, question, reference) of the run's dataset,
which stays a draft (`Dataset.Status.DRAFT`, refused by every start form and command) until a
person has decided every item (approve, edit or reject) and publishes it: then its approved
and edited items become the dataset's items in one transaction, the dataset is ready, and
`dataset_imported` tells later apps, as an upload does.
"""

import json
import re
from argparse import ArgumentParser
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.template import Context
from django.template.base import Template

from apps.datasets.importing import Mapping, announce_imported, build_item_rows, write_items
from apps.datasets.models import Dataset, Item
from apps.datasets.readers import Table
from apps.drafting.models import DraftItem, DraftSetup, DraftUnit, Generator
from apps.runs.engine.contract import Call, Progress, Result, RunPlugin
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.models import AttemptLog, Endpoint, ErrorKind, LoggingMode, Run
from apps.runs.prompts import DataList, PromptError, compile_template

MAX_UNITS = 1000
# A reply listing more than this is not a list of questions about one content.
MAX_QUESTIONS = 200
COLUMNS = ["id", "content", "question", "reference", "tags"]
MAPPING = Mapping(
    id_column="id",
    input_columns=["content", "question"],
    reference_column="reference",
    tags_column="tags",
)


# ---- reading a list out of a reply ------------------------------------------------------------
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```", re.S)
_NUMBERED = re.compile(
    r"^\s*(?:[*_#]+\s*)?(?:(?:q|question|a|answer|fact)\s*)?[(\[]?(\d{1,3})[.):\]]"
    r"(?:[*_]+)?(?:\s+|$)(.*)$",
    re.I,
)
_BULLET = re.compile(r"^\s*[-*•]\s+(.*)$")
_TEXT_KEYS = ("question", "answer", "text", "q", "a", "content")


def split_list(text: str) -> list[str]:
    """The entries of a listed reply (JSON, numbered or bulleted), or [] when it is none."""
    fenced = _FENCE.search(text)
    for candidate in ([fenced.group(1)] if fenced else []) + [text]:
        entries = _json_entries(candidate.strip())
        if entries:
            return entries
    lines = text.splitlines()
    return _numbered(lines) or _bulleted(lines)


def _json_entries(text: str) -> list[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        data = lists[0] if len(lists) == 1 else None
    if not isinstance(data, list) or not data:
        return []
    entries = []
    for entry in data:
        if isinstance(entry, dict):
            entry = next((entry[k] for k in _TEXT_KEYS if isinstance(entry.get(k), str)), None)
        if isinstance(entry, int | float) and not isinstance(entry, bool):
            entry = str(entry)
        if not isinstance(entry, str) or not entry.strip():
            return []
        entries.append(entry.strip())
    return entries


def _numbered(lines: list[str]) -> list[str]:
    numbers = [int(m.group(1)) for line in lines if (m := _NUMBERED.match(line))]
    if 1 in numbers:
        numbers = numbers[numbers.index(1) :]
    # "1. 2. 4.": a number skipped or repeated is a list we cannot pair with its answers.
    if numbers != list(range(1, len(numbers) + 1)):
        return []
    return _entries(lines, _numbered_entry)


def _numbered_entry(line: str, n: int) -> str | None:
    match = _NUMBERED.match(line)
    return match.group(2) if match and int(match.group(1)) == n else None


def _bulleted(lines: list[str]) -> list[str]:
    return _entries(lines, lambda line, n: (m := _BULLET.match(line)) and m.group(1))


def _entries(lines: list[str], entry_of: Any) -> list[str]:
    """Entries start where `entry_of(line, next number)` finds one; a line right below an
    entry continues it, and after a blank line plain text ends the list (a model's closing
    remark is not part of the last answer)."""
    entries: list[str] = []
    gap = closed = False
    for line in lines:
        found = entry_of(line, len(entries) + 1)
        if found is not None and found is not False:
            entries.append(found.strip())
            gap = closed = False
        elif not line.strip():
            gap = True
        elif entries and not closed:
            if gap:
                closed = True
            else:
                entries[-1] = f"{entries[-1]} {line.strip()}".strip()
    return [_unmark(entry) for entry in entries] if entries and all(entries) else []


def _unmark(entry: str) -> str:
    """Markdown bold around a whole entry, as models like to write it, is not its text."""
    return entry.strip().strip("*_").strip() or entry.strip()


def numbered_text(entries: list[str]) -> str:
    return "\n".join(f"{n}. {entry}" for n, entry in enumerate(entries, 1))


# ---- the plug-in ------------------------------------------------------------------------------
@dataclass(slots=True)
class GeneratorUnit:
    key: str
    index: int
    seed: int | None
    item_id: int = 0  # no item: it makes them (attempts are logged under `log_unit`)

    @property
    def log_unit(self) -> int:
        return self.index


_USES = re.compile(r"\{[{%][^}]*\b(?P<name>content|questions|question_list)\b")


def places(source: str, names: set[str]) -> bool:
    """Whether a prompt puts one of these earlier replies into its text itself."""
    return any(match["name"] in names for match in _USES.finditer(source))


@dataclass
class Prompts:
    """A generator version's prompts, compiled once per chunk."""

    system: Template
    content: Template
    questions: Template
    answers: Template
    count: int
    # False: the prompt does not place the earlier reply, so it continues the conversation.
    questions_place_content: bool = True
    answers_place_questions: bool = True

    @classmethod
    def compile(cls, generator: Generator, count: int) -> "Prompts":
        return cls(
            compile_template(generator.system_message or "", "System message"),
            compile_template(generator.content_prompt, "Content prompt"),
            compile_template(generator.questions_prompt, "Questions prompt"),
            compile_template(generator.answers_prompt, "Answers prompt"),
            count,
            places(generator.questions_prompt, {"content"}),
            places(generator.answers_prompt, {"questions", "question_list"}),
        )

    def messages(self, template: Template, data: dict[str, Any]) -> list[dict[str, str]]:
        context = Context({"count": self.count, **data}, autoescape=False)
        system = self.system.render(context)
        user = template.render(context)
        messages = [{"role": "system", "content": system}] if system.strip() else []
        return [*messages, {"role": "user", "content": user}]


@dataclass
class Made:
    content: str
    questions: list[str]
    answers: list[str]
    seed: int | None


@dataclass
class Failure:
    error_kind: str
    message: str
    content: str = ""
    seed: int | None = None


class Unreadable(Exception):
    """A reply that is not what the next step needs; the message says what it lacks."""

    def __init__(self, message: str, content: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.content = content


class DatasetGenerationPlugin(RunPlugin):
    """Units are the N content → questions → answers chains; results are DraftUnit rows."""

    kind = Run.Kind.GENERATE_DATASET
    startable = False  # `manage.py generate_dataset`, or the generator's page

    def total(self, run: Run) -> int:
        return run.total

    @staticmethod
    def _check_draft(run: Run) -> None:
        if run.dataset.status != Dataset.Status.DRAFT:
            raise LaunchError(
                f"{run.dataset} is {run.dataset.draft_state}: its generation run cannot run again. "
                "Generate a new draft instead."
            )

    def pending_keys(self, run: Run, mode: str) -> list[str]:
        self._check_draft(run)
        if mode == Run.Mode.OVERWRITE:
            raise LaunchError(
                "A generation run is not run all again: its items may be reviewed already. "
                "Retry its failed units, or generate a new draft."
            )
        units = DraftUnit.objects.filter(run=run)
        if mode == Run.Mode.RETRY_FAILED:
            redo = units.filter(status=DraftUnit.Status.FAILED, launch__lt=run.launch)
            return [str(i) for i in redo.order_by("index").values_list("index", flat=True)]
        made = set(units.values_list("index", flat=True))
        return [str(i) for i in range(run.total) if i not in made]

    def settled_counts(self, run: Run, mode: str) -> tuple[int, int]:
        units = DraftUnit.objects.filter(run=run)
        if mode == Run.Mode.RETRY_FAILED:
            units = units.exclude(status=DraftUnit.Status.FAILED, launch__lt=run.launch)
        counts = units.aggregate(
            done=Count("pk", filter=Q(status=DraftUnit.Status.OK)),
            failed=Count("pk", filter=Q(status=DraftUnit.Status.FAILED)),
        )
        return counts["done"], counts["failed"]

    def prepare(self, run: Run) -> Prompts:
        return Prompts.compile(run.draft_setup.generator, run.total)

    def load_units(self, run: Run, ctx: Prompts, keys: list[str]) -> list[GeneratorUnit]:
        seed = run.endpoint.seed if run.endpoint is not None else None
        return [
            GeneratorUnit(key, int(key), None if seed is None else seed + int(key)) for key in keys
        ]

    async def perform(self, run: Run, ctx: Prompts, unit: GeneratorUnit, call: Call) -> Result:
        params = {"seed": unit.seed} if unit.seed is not None else {}
        data: dict[str, Any] = {"unit": unit.index + 1}
        try:
            asked = ctx.messages(ctx.content, data)
            reply = await call.chat(asked, **params)
            content = reply.text.strip()
            if not content:
                raise Unreadable("the content reply is empty")
            data["content"] = content
            asked = self._next(
                asked, reply.text, ctx.messages(ctx.questions, data), ctx.questions_place_content
            )
            reply = await call.chat(asked, **params)
            questions = split_list(reply.text)
            if not questions:
                raise Unreadable(
                    "the questions reply is not a numbered list, a bullet list or a JSON list "
                    "of questions",
                    content,
                )
            if len(questions) > MAX_QUESTIONS:
                raise Unreadable(
                    f"the questions reply lists {len(questions)} questions (at most "
                    f"{MAX_QUESTIONS} per unit)",
                    content,
                )
            data.update(questions=numbered_text(questions), question_list=DataList(questions))
            asked = self._next(
                asked, reply.text, ctx.messages(ctx.answers, data), ctx.answers_place_questions
            )
            reply = await call.chat(asked, **params)
            answers = split_list(reply.text)
            if len(answers) != len(questions):
                found = (
                    f"{len(answers)} answers"
                    if answers
                    else "no numbered list, bullet list or JSON list of answers"
                )
                raise Unreadable(
                    f"the answers reply has {found} for {len(questions)} questions", content
                )
        except Unreadable as exc:
            if call.log:
                # The request went well; its reply did not: the attempt is a failure, logged
                # with its raw reply (the logging mode "failed" keeps it).
                last = call.log[-1]
                last.ok, last.error_kind, last.error = False, ErrorKind.UNPARSEABLE, exc.message
            failure = Failure(ErrorKind.UNPARSEABLE, exc.message, exc.content, unit.seed)
            return Result(unit.key, 0, False, data=failure)
        except PromptError as exc:
            return self.failed_result(run, ctx, unit, ErrorKind.TEMPLATE, str(exc))
        return Result(unit.key, 0, True, data=Made(content, questions, answers, unit.seed))

    @staticmethod
    def _next(
        asked: list[dict[str, str]], reply: str, prompt: list[dict[str, str]], placed: bool
    ) -> list[dict[str, str]]:
        """The next request: the prompt alone when it placed the earlier reply itself, else the
        conversation so far (the earlier request, its reply) followed by the prompt."""
        if placed:
            return prompt
        return [*asked, {"role": "assistant", "content": reply}, prompt[-1]]

    def failed_result(
        self, run: Run, ctx: Any, unit: GeneratorUnit, error_kind: str, message: str
    ) -> Result:
        return Result(unit.key, 0, False, data=Failure(error_kind, message, seed=unit.seed))

    def persist(self, run: Run, ctx: Any, results: list[Result]) -> Progress:
        """Each unit once per launch (a duplicate from a relaunched chunk is dropped), with its
        draft items; a failed unit asked again replaces its failed row."""
        progress = Progress()
        existing = dict(
            DraftUnit.objects.filter(run=run, index__in=[int(r.key) for r in results]).values_list(
                "index", "launch"
            )
        )
        for result in results:
            index = int(result.key)
            spent = Progress(
                prompt_tokens=sum(a.prompt_tokens for a in result.attempts),
                completion_tokens=sum(a.completion_tokens for a in result.attempts),
                cost=sum(a.cost for a in result.attempts),
            )
            progress += spent  # tokens were spent even on a duplicate
            if index in existing:
                if run.mode != Run.Mode.RETRY_FAILED or existing[index] >= run.launch:
                    continue
                DraftUnit.objects.filter(
                    run=run, index=index, status=DraftUnit.Status.FAILED
                ).delete()
            try:
                with transaction.atomic():
                    self._write_unit(run, index, result, spent)
            except IntegrityError:
                continue  # another chunk wrote it first
            progress += Progress(done=int(result.ok), failed=int(not result.ok))
        return progress

    @staticmethod
    def _write_unit(run: Run, index: int, result: Result, spent: Progress) -> None:
        data: Made | Failure = result.data
        row = DraftUnit.objects.create(
            run=run,
            index=index,
            status=DraftUnit.Status.OK if result.ok else DraftUnit.Status.FAILED,
            content=data.content,
            seed=data.seed,
            error_kind="" if isinstance(data, Made) else data.error_kind,
            error="" if isinstance(data, Made) else data.message,
            prompt_tokens=spent.prompt_tokens,
            completion_tokens=spent.completion_tokens,
            cost=spent.cost,
            launch=run.launch,
        )
        if isinstance(data, Made):
            DraftItem.objects.bulk_create(
                DraftItem(
                    unit=row,
                    dataset_id=run.dataset_id,
                    generator_id=run.draft_setup.generator_id,
                    number=number,
                    content=data.content,
                    question=question,
                    reference=answer,
                    generated={"content": data.content, "question": question, "reference": answer},
                )
                for number, (question, answer) in enumerate(
                    zip(data.questions, data.answers, strict=True)
                )
            )

    def add_cli_arguments(self, parser: ArgumentParser) -> None:
        return None

    def page_context(self, run: Run) -> dict[str, Any]:
        """The run's generator, its units (each failed one with its last failed attempt) and
        how many of its draft's items wait for review."""
        units = list(
            DraftUnit.objects.filter(run=run)
            .annotate(item_count=Count("items"))
            .order_by("index")[:500]
        )
        failed = [unit.index for unit in units if unit.status == DraftUnit.Status.FAILED]
        logs = {
            log.unit: log
            for log in AttemptLog.objects.filter(run=run, unit__in=failed, ok=False).order_by("pk")
        }
        for unit in units:
            unit.log = logs.get(unit.index)  # type: ignore[attr-defined]
        pending = DraftItem.objects.filter(dataset_id=run.dataset_id).undecided().count()
        generator = DraftSetup.objects.select_related("generator").get(run=run).generator
        return {"units": units, "to_review": pending, "generator": generator}


DATASET_GENERATION = DatasetGenerationPlugin()  # named in settings.RUN_KINDS


# ---- starting ----------------------------------------------------------------------------------
def create_dataset_generation_run(
    generator: Generator,
    endpoint: Endpoint,
    count: int,
    *,
    user: Any = None,
    name: str = "",
    logging_mode: str = LoggingMode.FAILED,
    chunk_size: int = 50,
) -> Run:
    """A new draft dataset (the next version of `name`, default the generator's name) and the
    run that fills it, launched (its jobs are enqueued when the transaction commits)."""
    if not 1 <= count <= MAX_UNITS:
        raise ValueError(f"The count must be between 1 and {MAX_UNITS}, not {count}.")
    name = (name or generator.name).strip()
    with transaction.atomic():
        dataset = Dataset.objects.new_version(
            generator.task,
            name,
            format=Dataset.Format.JSONL,
            status=Dataset.Status.DRAFT,
            columns=COLUMNS,
            mapping=MAPPING.to_dict(),
            created_by=user if getattr(user, "pk", None) else None,
        )
        run = Run.objects.create(
            task_id=generator.task_id,
            kind=Run.Kind.GENERATE_DATASET,
            dataset=dataset,
            endpoint=endpoint,
            # Its N units ask the same prompts on purpose, for N different drafts: a cached
            # reply would make them one draft N times (apps.runs.engine.cache).
            use_cache=False,
            label=f"{generator} · {endpoint.model} → draft {dataset}",
            logging_mode=logging_mode,
            chunk_size=max(1, chunk_size),
            total=count,
            created_by=user if getattr(user, "pk", None) else None,
        )
        DraftSetup.objects.create(run=run, generator=generator)
        launch(run, Run.Mode.RESUME)
    return run


# ---- publishing ---------------------------------------------------------------------------------
class DraftError(Exception):
    """The draft cannot be published (or discarded) now; the message says why."""


def generation_run(dataset: Dataset) -> Run | None:
    return (
        Run.objects.filter(dataset=dataset, kind=Run.Kind.GENERATE_DATASET)
        .select_related("draft_setup__generator", "endpoint")
        .order_by("-pk")
        .first()
    )


def _locked_draft(dataset: Dataset, while_going: str) -> Dataset:
    """The draft, locked to be published or discarded (call inside a transaction); DraftError
    when it is no longer a draft or its generation run is still going."""
    locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
    if locked.status != Dataset.Status.DRAFT:
        raise DraftError(f"{locked} is not a draft (it is {locked.get_status_display()}).")
    run = generation_run(locked)
    if run is not None and run.is_active and not run.is_stalled:
        raise DraftError(f"Its generation run is still going: {while_going}.")
    return locked


def publish(dataset: Dataset) -> Dataset:
    """Make a reviewed draft a ready dataset of its approved and edited items, atomically, and
    send `dataset_imported` once that has committed. Every item must be decided first: a draft
    is published as a whole, so nobody publishes half a review by mistake."""
    with transaction.atomic():
        locked = _locked_draft(dataset, "wait for it to end")
        drafts = DraftItem.objects.filter(dataset=locked)
        undecided = drafts.undecided().count()
        if undecided:
            raise DraftError(
                f"{undecided} item{'s are' if undecided != 1 else ' is'} still to review: "
                "approve, edit or reject every item first."
            )
        kept = list(drafts.kept().select_related("unit").order_by("unit__index", "number"))
        if not kept:
            raise DraftError("No item was approved or edited: there is nothing to publish.")
        rows = [
            {
                "id": draft.key,
                "content": draft.content,
                "question": draft.question,
                "reference": draft.reference,
                "tags": f"unit:{draft.unit.index + 1}",
            }
            for draft in kept
        ]
        items = build_item_rows(Table(format="jsonl", columns=COLUMNS, rows=rows), MAPPING)
        write_items(locked, items)
        ids = dict(Item.objects.filter(dataset=locked).values_list("key", "pk"))
        for draft in kept:
            draft.item_id = ids[draft.key]
        DraftItem.objects.bulk_update(kept, ["item"])
        locked.columns = COLUMNS
        locked.mapping = MAPPING.to_dict()
        locked.row_count = locked.progress = len(kept)
        locked.tag_counts = items.tag_counts
        locked.status = Dataset.Status.READY
        # What an upload records too: an unchanged re-upload of the same items is then known.
        locked.fingerprint = locked.compute_fingerprint()
        locked.save()
        transaction.on_commit(lambda: announce_imported(locked))
    return locked


def discard(dataset: Dataset) -> Dataset:
    """Give up a draft nobody wants (questions too general, a prompt to fix first): it is
    used by no run and listed as discarded, and its decisions so far still count in the
    generator's rates (its items left undecided do not count as waiting). Its generation run
    must have ended: cancel it first."""
    with transaction.atomic():
        locked = _locked_draft(dataset, "cancel it first")
        locked.status = Dataset.Status.DISCARDED
        locked.save(update_fields=["status"])
    return locked


# ---- how often people keep what a generator makes ----------------------------------------------
@dataclass
class VersionRates:
    generator: Generator
    approved: int = 0
    edited: int = 0
    rejected: int = 0
    pending: int = 0

    @property
    def decided(self) -> int:
        return self.approved + self.edited + self.rejected

    def _rate(self, count: int) -> float | None:
        return count / self.decided if self.decided else None

    @property
    def approved_rate(self) -> float | None:
        return self._rate(self.approved)

    @property
    def edited_rate(self) -> float | None:
        return self._rate(self.edited)

    @property
    def rejected_rate(self) -> float | None:
        return self._rate(self.rejected)

    @property
    def kept_rate(self) -> float | None:
        return self._rate(self.approved + self.edited)


def rates_by_version(generator: Generator) -> list[VersionRates]:
    """Per version of the generator (newest first): its items approved, edited, rejected and
    still to review (in drafts not discarded); rates are shares of the decided items."""
    versions = {g.pk: VersionRates(g) for g in generator.versions().order_by("-version")}
    counts = (
        DraftItem.objects.filter(generator_id__in=versions)
        .exclude(decision=DraftItem.Decision.PENDING, dataset__status=Dataset.Status.DISCARDED)
        .values_list("generator_id", "decision")
        .annotate(n=Count("pk"))
    )
    for generator_id, decision, n in counts:
        setattr(versions[generator_id], decision, n)
    return list(versions.values())
