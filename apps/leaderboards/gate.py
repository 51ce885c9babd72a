"""The release gate (#30.4): does a candidate model regress against a baseline, beyond a margin,
with significance, on the same items?

Both are judge runs of one judge (a generation run given instead is judged by the task's
default judge, started here when it has not been). Each subject (or the one asked for) is
compared as the board compares two models (`pairs`): per item, the human-corrected value
scored strictly (a failed or missing item at the subject's worst value), items paired by key,
and the board's paired test (`stats.paired_p`) — here on the differences shifted by the
margin, d + M, where d = candidate − baseline with "better" positive (a lower-is-better
subject's differences are turned around). With several subjects the p-values are adjusted by
Holm's step-down, as the board adjusts its pairs. Then for each subject:

- **regressed**: the mean of d + M is below 0 with adjusted p < α: the candidate is worse by
  more than the margin, significantly;
- **holds**: the mean of d + M is above 0 with adjusted p < α (no regression beyond the margin
  shown), or the test had the items to see one (see below) and did not;
- **not enough items**: neither, and fewer items than `stats.items_needed` for a difference of
  M at 80 % power, at the spread of these differences (with no margin, the observed drop's
  size; a candidate not worse at all needs no more items).

The gate's exit code: 1 when any subject regressed, else 2 when any had too few items, else 0.
"""

import logging
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from apps.datasets.models import Task
from apps.judges.launching import JudgeRunError, create_judge_run
from apps.judges.models import Judge, TaskJudging, runs_of
from apps.leaderboards.boards import Board, Params, Row, model_label
from apps.leaderboards.items import common_positions, dataset_items
from apps.leaderboards.pairs import board_values, holm
from apps.leaderboards.signals import gate_decided
from apps.leaderboards.stats import (
    POWER,
    TESTS,
    Interval,
    items_needed,
    mean_ci,
    paired_p,
)
from apps.leaderboards.subjects import SubjectInfo, subject_infos
from apps.runs.models import Run

HOLDS, REGRESSED, TOO_FEW = "holds", "regressed", "not enough items"
EXIT_CODES = {HOLDS: 0, REGRESSED: 1, TOO_FEW: 2}
LISTED_ITEMS = 20  # regressed items listed per subject in the summary

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ItemChange:
    key: str
    baseline: float
    candidate: float
    change: float  # candidate − baseline, "better" positive


@dataclass
class SubjectVerdict:
    subject: str
    n: int
    mean_baseline: float | None
    mean_candidate: float | None
    mean_change: float | None  # candidate − baseline, "better" positive
    ci: Interval | None  # of mean_change, 95 %
    p: float | None  # two-sided, of "mean change + margin = 0", by `test`
    test: str | None
    p_adjusted: float | None = None
    needed: int | None = None  # items to tell at 80 % power (None: no more are needed)
    verdict: str = HOLDS
    worse: list[ItemChange] = field(default_factory=list)  # items the candidate did worse on

    @property
    def test_label(self) -> str:
        return TESTS.get(self.test or "", "no test")


@dataclass
class Gate:
    task: Task
    judge: Judge
    baseline: Run  # judge runs
    candidate: Run
    margin: float
    alpha: float
    subjects: list[SubjectVerdict] = field(default_factory=list)

    @property
    def baseline_label(self) -> str:
        return model_label(self.baseline)

    @property
    def candidate_label(self) -> str:
        return model_label(self.candidate)

    @property
    def verdict(self) -> str:
        verdicts = {s.verdict for s in self.subjects}
        return REGRESSED if REGRESSED in verdicts else TOO_FEW if TOO_FEW in verdicts else HOLDS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def headline(self) -> str:
        """One sentence, in Markdown (names escaped: a label may be anything)."""
        names = ", ".join(_md(s.subject) for s in self.subjects if s.verdict == self.verdict)
        candidate, baseline = _md(self.candidate_label), _md(self.baseline_label)
        if self.verdict == REGRESSED:
            return f"Regression: {candidate} is worse than {baseline} beyond the margin on {names}."
        if self.verdict == TOO_FEW:
            needed = max(s.needed or 0 for s in self.subjects if s.verdict == TOO_FEW)
            return (
                f"Not enough items to tell on {names}: {needed} paired items are needed to see a "
                f"regression of the margin at {POWER:.0%} power."
            )
        return f"No significant regression of {candidate} against {baseline} beyond the margin."


# ---- the two sides ----------------------------------------------------------------------------
class GateError(Exception):
    """The gate cannot compare: a run or label that is not there, a judge run that failed."""


@dataclass
class Side:
    """What RUN|LABEL names, and its judge run once there is one."""

    spec: str
    named: Run
    judged: Run | None

    @property
    def ready(self) -> bool:
        return self.judged is not None and self.judged.status in (
            Run.Status.COMPLETED,
            Run.Status.COMPLETED_WITH_FAILURES,
        )

    @property
    def waiting_for(self) -> str:
        """What the gate waits for on this side (blank when ready)."""
        if self.ready:
            return ""
        if self.judged is not None:
            return f"judge run #{self.judged.pk} of {self.spec} ({self.judged.status})"
        return f"run #{self.named.pk} of {self.spec} ({self.named.status}), then its judge run"


def gate_judge(task: Task, name: str | None) -> Judge:
    """The judge asked for by name (its newest version), else the task's default judge."""
    if name:
        judge = Judge.objects.filter(task=task, name=name).order_by("-version").first()
        if judge is None:
            raise GateError(f"{task.slug} has no judge {name!r}.")
        return judge
    judge = TaskJudging.of(task.pk).default_judge
    if judge is None:
        raise GateError(f"{task.slug} has no default judge: name one with --judge.")
    return judge


def side(task: Task, spec: str, judge: Judge, start: bool = True) -> Side:
    """RUN (an id: a judge run of `judge`, or a run of answers it judges) or LABEL (the model's
    name on the board: its newest run of answers). A finished run of answers without a judge
    run of `judge` gets one (`start`), on the task's default judge endpoint."""
    runs = Run.objects.filter(task=task).select_related("task", "dataset", "source_run__endpoint")
    if spec.isdigit():
        named = runs.filter(pk=int(spec)).first()
        if named is None:
            raise GateError(f"{task.slug} has no run #{spec}.")
    else:
        labelled = runs.filter(kind__in=Run.JUDGEABLE_KINDS, label=spec).order_by("-pk")
        named = labelled.first()
        if named is None:
            judge_runs = runs_of(judge).judging().filter(task=task).order_by("-pk")
            named = next((r for r in judge_runs if model_label(r) == spec), None)
        if named is None:
            raise GateError(f"{task.slug} has no model labelled {spec!r}.")
    if named.kind == Run.Kind.JUDGE:
        if named.judged_with.judge.pk != judge.pk:
            raise GateError(
                f"Run #{named.pk} is judged by {named.judged_with.judge}, not {judge}: "
                "compare runs of one judge."
            )
        return _checked(Side(spec, named, named))
    if named.kind not in Run.JUDGEABLE_KINDS:
        raise GateError(
            f"Run #{named.pk} is a {named.get_kind_display()} run: name the answers or their judge run."
        )
    judged = runs_of(judge).judging().filter(source_run=named).order_by("-pk").first()
    if judged is None and start and named.is_terminal:
        judged = _start_judging(task, named, judge)
    return _checked(Side(spec, named, judged))


def _start_judging(task: Task, run: Run, judge: Judge) -> Run:
    judging = TaskJudging.of(task.pk)
    endpoint = judging.default_judge_endpoint if judge.uses_llm else None
    if judge.uses_llm and endpoint is None:
        raise GateError(
            f"Run #{run.pk} has no judge run of {judge}, and the task has no default judge "
            "endpoint to start one on: start it, or set the default judge's endpoint."
        )
    try:
        return create_judge_run(judge, endpoint=endpoint, source_run=run, user=run.created_by)
    except JudgeRunError as exc:
        raise GateError(f"Run #{run.pk} cannot be judged: {exc}") from None


def _checked(found: Side) -> Side:
    for run in (found.named, found.judged):
        if run is not None and run.status in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise GateError(f"Run #{run.pk} of {found.spec} is {run.status}: nothing to compare.")
    return found


# ---- comparing --------------------------------------------------------------------------------
def compare(
    baseline: Run,
    candidate: Run,
    subject: str | None = None,
    margin: float = 0.0,
    alpha: float = 0.05,
) -> Gate:
    """The gate on two finished judge runs of one judge."""
    judge = baseline.judged_with.judge
    if candidate.judged_with.judge.pk != judge.pk:
        raise ValueError(
            f"The baseline is judged by {judge} and the candidate by "
            f"{candidate.judged_with.judge}: compare runs of one judge."
        )
    infos = subject_infos(judge)
    board = Board(
        task=baseline.task,
        params=Params(judge_id=judge.pk, values="human"),
        judges=[judge],
        judge=judge,
        subjects=infos,
        weights={info.name: 1.0 for info in infos},
        normalised=all(info.has_range for info in infos),
    )
    if subject is not None and subject != "overall" and board.subject(subject) is None:
        known = ", ".join(info.name for info in infos)
        raise ValueError(f"{judge} has no subject {subject!r} (it has {known}, and overall).")
    keys = [subject] if subject else [info.name for info in infos]
    gate = Gate(baseline.task, judge, baseline, candidate, margin, alpha)
    base_row = Row(baseline, model_label(baseline), {}, {})
    cand_row = Row(candidate, model_label(candidate), {}, {})
    for key in keys:
        info = board.subject(key)
        gate.subjects.append(_subject(board, key, info, base_row, cand_row, margin))
    tested = [i for i, s in enumerate(gate.subjects) if s.p is not None]
    adjusted = holm([gate.subjects[i].p for i in tested])  # type: ignore[misc]
    for i, p in zip(tested, adjusted, strict=True):
        gate.subjects[i].p_adjusted = p
    for verdict in gate.subjects:
        verdict.verdict = _verdict(verdict, margin, alpha)
    for receiver, error in gate_decided.send_robust(sender=Gate, gate=gate):
        if isinstance(error, Exception):
            logger.error("gate_decided receiver %s failed: %r", receiver, error)
    return gate


def _subject(
    board: Board, key: str, info: SubjectInfo | None, base: Row, cand: Row, margin: float
) -> SubjectVerdict:
    values_b, values_c = board_values(board, base, key), board_values(board, cand, key)
    keys = dataset_items(base.run.dataset).keys
    if base.run.dataset_id != cand.run.dataset_id:
        at_b, at_c = common_positions([base.run.dataset, cand.run.dataset])
        values_b, values_c, keys = values_b[at_b], values_c[at_c], keys[at_b]
    both = ~np.isnan(values_b) & ~np.isnan(values_c)
    b, c, keys = values_b[both], values_c[both], keys[both]
    sign = -1.0 if info is not None and not info.higher_is_better else 1.0
    change = sign * (c - b)
    n = int(change.size)
    if n == 0:
        return SubjectVerdict(key, 0, None, None, None, None, None, None)
    span = _span(board, info, key)
    p, test = paired_p(change + margin)
    worse = [
        ItemChange(str(keys[i]), float(b[i]), float(c[i]), float(change[i]))
        for i in np.argsort(change, kind="stable")
        if change[i] < 0
    ]
    return SubjectVerdict(
        subject=key,
        n=n,
        mean_baseline=float(b.mean()),
        mean_candidate=float(c.mean()),
        mean_change=float(change.mean()),
        ci=mean_ci(change, -span, span) if span else mean_ci(change),
        p=p,
        test=test,
        needed=_needed(change, margin),
        worse=worse,
    )


def _span(board: Board, info: SubjectInfo | None, key: str) -> float | None:
    if key == "overall":
        return 100.0 if board.normalised else None
    if info is None or not info.has_range:
        return None
    return float(info.high) - float(info.low)  # type: ignore[arg-type]


def _needed(change: np.ndarray, margin: float) -> int | None:
    """Paired items needed to see a regression of the margin (with no margin, of the drop
    observed) at 80 % power; None when nothing is to be seen (no margin and no drop)."""
    target = margin if margin > 0 else -float(change.mean())
    if target <= 0:
        return None
    if change.size < 2:
        return 2
    return items_needed(float(change.std(ddof=1)), target)


def _verdict(subject: SubjectVerdict, margin: float, alpha: float) -> str:
    if subject.n < 2 or subject.p_adjusted is None or subject.mean_change is None:
        subject.needed = subject.needed or 2
        return TOO_FEW
    shifted = subject.mean_change + margin
    if subject.p_adjusted < alpha and shifted < 0:
        return REGRESSED
    if subject.p_adjusted < alpha and shifted > 0:
        return HOLDS
    if subject.needed is not None and subject.n < subject.needed:
        return TOO_FEW
    return HOLDS


# ---- reporting --------------------------------------------------------------------------------
def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.4g}"


def markdown(gate: Gate) -> str:
    """The summary for a pull-request comment."""
    lines = [
        f"## evalsite gate: {gate.verdict} (exit {gate.exit_code})",
        "",
        gate.headline,
        "",
        f"Task `{gate.task.slug}`, judge `{gate.judge}`; baseline **{_md(gate.baseline_label)}** "
        f"(run #{gate.baseline.pk}), candidate **{_md(gate.candidate_label)}** "
        f"(run #{gate.candidate.pk}); margin {gate.margin:g}, α = {gate.alpha:g}; "
        "human-corrected values, failed items at the worst value, items paired by key.",
        "",
        "| Subject | Items | Baseline | Candidate | Change | 95 % CI | p (adjusted) | Test | Items needed | Verdict |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for s in gate.subjects:
        ci = f"[{_num(s.ci.low)}, {_num(s.ci.high)}]" if s.ci else "—"
        lines.append(
            f"| {_md(s.subject)} | {s.n} | {_num(s.mean_baseline)} | {_num(s.mean_candidate)} "
            f"| {_num(s.mean_change)} | {ci} | {_num(s.p_adjusted)} | {s.test_label} "
            f"| {s.needed if s.needed is not None else '—'} | {s.verdict} |"
        )
    for s in gate.subjects:
        if s.verdict != REGRESSED:
            continue
        lines += ["", f"### Items that regressed on {_md(s.subject)} ({len(s.worse)})", ""]
        lines += ["| Item | Baseline | Candidate |", "| --- | ---: | ---: |"]
        for item in s.worse[:LISTED_ITEMS]:
            lines.append(f"| {_md(item.key)} | {_num(item.baseline)} | {_num(item.candidate)} |")
        if len(s.worse) > LISTED_ITEMS:
            lines.append(f"| … {len(s.worse) - LISTED_ITEMS} more | | |")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Model output and names in a table cell: no pipes, no line breaks, no HTML."""
    return (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\n", " ")
    )


def junit(gate: Gate) -> str:
    """JUnit XML: one test case per subject; a regression is a failure, too few items a skip."""
    failures = sum(1 for s in gate.subjects if s.verdict == REGRESSED)
    skipped = sum(1 for s in gate.subjects if s.verdict == TOO_FEW)
    suite = ET.Element(
        "testsuite",
        name=f"evalsite gate {gate.task.slug}",
        tests=str(len(gate.subjects)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for s in gate.subjects:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"evalsite.gate.{gate.task.slug}",
            name=f"{s.subject}: {gate.candidate_label} vs {gate.baseline_label}",
        )
        detail = (
            f"{s.n} items; change {_num(s.mean_change)} (baseline {_num(s.mean_baseline)}, "
            f"candidate {_num(s.mean_candidate)}); margin {gate.margin:g}; p {_num(s.p_adjusted)} "
            f"({s.test_label}, Holm-adjusted)"
        )
        if s.verdict == REGRESSED:
            failure = ET.SubElement(
                case, "failure", message=f"regressed: {detail}", type="regression"
            )
            failure.text = "\n".join(
                f"{item.key}: {_num(item.baseline)} -> {_num(item.candidate)}" for item in s.worse
            )
        elif s.verdict == TOO_FEW:
            ET.SubElement(case, "skipped", message=f"not enough items: {s.needed} needed; {detail}")
        else:
            ET.SubElement(case, "system-out").text = detail
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
