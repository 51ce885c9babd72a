import json
import math
from collections.abc import Iterable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.access import AppRequest, reviewer_required
from apps.datasets.csvsafe import csv_response
from apps.datasets.models import Task
from apps.judges.models import Judge, TaskJudging, judge_id_of, judge_of
from apps.leaderboards import agreement as agreement_mod
from apps.leaderboards import (
    alignment,
    bias,
    boards,
    corrected,
    costs,
    exports,
    formatting,
    metric_board,
    pairs,
    pairwise_board,
    tables,
)
from apps.leaderboards import grid as grid_mod
from apps.leaderboards import regressions as regressions_mod
from apps.leaderboards import robustness as robustness_mod
from apps.leaderboards.compare import compare as compare_runs
from apps.leaderboards.forms import ThresholdForm
from apps.leaderboards.models import BoardSettings, StopRule
from apps.leaderboards.stopping import RuleError, set_rule
from apps.runs.models import Run

VALUE_VIEWS = [("both", "Side by side"), ("human", "Human-corrected"), ("judge", "Judge only")]
SCORING_VIEWS = [
    ("strict", "Strict (failed = worst value)"),
    ("answered", "Answered items only"),
]


def _format(request: AppRequest) -> str:
    fmt = request.GET.get("format", "csv")
    if fmt not in exports.FORMATS and fmt not in tables.FORMATS:
        raise Http404(f"Unknown export format {fmt!r}: use csv, jsonl, xlsx or parquet.")
    return fmt


def _download(chunks: Iterable[str], fmt: str, name: str, stream: bool) -> HttpResponseBase:
    """The export in `fmt`; `chunks` are its CSV for .xlsx and .parquet (made from it)."""
    if fmt in tables.FORMATS:
        response: HttpResponseBase = HttpResponse(
            tables.convert(chunks, fmt), content_type=tables.FORMATS[fmt]
        )
    elif stream:
        response = StreamingHttpResponse(chunks, content_type=exports.FORMATS[fmt])
    else:
        response = HttpResponse("".join(chunks), content_type=exports.FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@require_GET
def index(request: AppRequest) -> HttpResponse:
    tasks = (
        Task.objects.for_user(request.user)
        .annotate(judge_runs=Count("runs", filter=Q(runs__kind=Run.Kind.JUDGE)))
        .order_by("slug")
    )
    return render(request, "leaderboards/index.html", {"tasks": tasks})


@require_GET
def methods(request: AppRequest) -> HttpResponse:
    """How evalsite computes its numbers: each estimator, test, interval and prior, with the
    reference implementation the tests pin it to (linked from every board)."""
    return render(request, "leaderboards/methods.html")


@require_GET
def board(request: AppRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    built = boards.build(task, boards.Params.from_query(request.GET))
    matrix = pairs.build(built, request.GET.get("correction", "holm"))
    built.corrected = corrected.build(built, _difference(request.GET.get("target", "")))
    context = {
        "task": task,
        "board": built,
        "pairs": matrix,
        "corrections": pairs.CORRECTIONS,
        "columns": formatting.columns(built),
        "table": formatting.table(built),
        "chart": boards.chart(built),
        **costs.page(built),
        "value_views": VALUE_VIEWS,
        "scoring_views": SCORING_VIEWS,
        "epoch_views": formatting.epoch_views(built),
        "alarms": [] if request.htmx else alignment.alarms(task),
        "has_copies": task.datasets.filter(perturbed_from__isnull=False).exists(),
        "metric_judges": len({j.name for j in built.judges if j.kind == Judge.Kind.METRIC}),
    }
    template = "leaderboards/board.html#board" if request.htmx else "leaderboards/board.html"
    return render(request, template, context)


@require_GET
def board_export(request: AppRequest, slug: str) -> HttpResponseBase:
    task = get_object_or_404(Task, slug=slug)
    fmt = _format(request)
    built = boards.build(task, boards.Params.from_query(request.GET))
    if built.judge is None:
        raise Http404("This task has no judged runs yet.")
    matrix = pairs.build(built, request.GET.get("correction", "holm"))
    built.corrected = corrected.build(built, _difference(request.GET.get("target", "")))
    name = f"{task.slug}-{built.judge.name}-v{built.judge.version}-leaderboard"
    if request.GET.get("pairs") == "corrected" and fmt != "jsonl":
        if built.corrected is None:
            raise Http404("This task's review policy draws no random sample: no corrected scores.")
        chunks = exports.corrected_pairs_csv(built.corrected)
        return _download(chunks, fmt, f"{name}-corrected-pairs", stream=False)
    if request.GET.get("pairs") == "1" and fmt != "jsonl":
        return _download(exports.pairs_csv(built, matrix), fmt, f"{name}-pairs", stream=False)
    chunks = exports.board_jsonl(built) if fmt == "jsonl" else exports.board_csv(built)
    return _download(chunks, fmt, name, stream=False)


@require_GET
def run_export(request: AppRequest, run_id: int) -> HttpResponseBase:
    run = get_object_or_404(
        Run.objects.select_related("dataset", "judged_with__judge", "task"), pk=run_id
    )
    fmt = _format(request)
    chunks = exports.results_jsonl(run) if fmt == "jsonl" else exports.results_csv(run)
    return _download(chunks, fmt, f"{run.task.slug}-run-{run.pk}-results", stream=True)


@require_GET
def pairwise(request: AppRequest, slug: str) -> HttpResponseBase:
    """Bradley–Terry ratings from the task's pairwise runs, with the win-rate matrix."""
    task = get_object_or_404(Task, slug=slug)
    judge = request.GET.get("judge", "")
    source, baseline = request.GET.get("source", "judge"), request.GET.get("baseline", "")
    built = pairwise_board.build(
        task,
        int(judge) if judge.isdigit() else None,
        source,
        int(baseline) if baseline.isdigit() else None,
    )
    fmt = request.GET.get("format", "")
    if fmt in ("csv", "jsonl", *tables.FORMATS):
        chunks = exports.pairwise_jsonl(built) if fmt == "jsonl" else exports.pairwise_csv(built)
        return _download(chunks, fmt, f"{task.slug}-pairwise", stream=False)
    context = {"task": task, "board": built, "sources": pairwise_board.SOURCES}
    return render(request, "leaderboards/pairwise.html", context)


@require_GET
def reviews_export(request: AppRequest, run_id: int) -> HttpResponseBase:
    """Every review of a judge run (several reviewers per item): one row per review."""
    run = get_object_or_404(Run.objects.judging().select_related("task"), pk=run_id)
    fmt = _format(request)
    chunks = exports.reviews_jsonl(run) if fmt == "jsonl" else exports.reviews_csv(run)
    return _download(chunks, fmt, f"{run.task.slug}-run-{run.pk}-reviews", stream=True)


@require_GET
def compare(request: AppRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    runs = list(
        task.runs.judging()
        .exclude(status=Run.Status.QUEUED)
        .select_related("judged_with__judge", "dataset", "source_run__endpoint")
        .order_by("-pk")
    )
    by_id = {run.pk: run for run in runs}
    a, b = _run_param(request, "a", by_id), _run_param(request, "b", by_id)
    mode = "judge" if request.GET.get("values") == "judge" else "human"
    wanted = _difference(request.GET.get("detect", ""))
    comparisons = compare_runs(a, b, mode, delta=wanted) if a and b and a != b else []
    for comparison in comparisons:
        comparison.wanted = wanted
    context = {
        "task": task,
        "runs": [(run, boards.model_label(run)) for run in runs],
        "a": a,
        "b": b,
        "mode": mode,
        "comparisons": comparisons,
        "label_a": boards.model_label(a) if a else "",
        "label_b": boards.model_label(b) if b else "",
        "detect": request.GET.get("detect", ""),
        "wanted": wanted,
        "stop_rule": StopRule.objects.filter(run=a).first() if a else None,
        # A run still going (or stopped with items left) may be set to stop when decided.
        "may_stop": bool(
            request.user.can_edit and a and b and a != b and (a.is_active or a.can_resume)
        ),
    }
    return render(request, "leaderboards/compare.html", context)


@reviewer_required
@require_POST
def stop_rule(request: AppRequest, slug: str) -> HttpResponse:
    """Set run A to stop itself once its comparison with run B on a subject decides (#31.4)."""
    task = get_object_or_404(Task, slug=slug)
    runs = task.runs.judging()
    a = get_object_or_404(runs, pk=request.POST.get("a") or 0)
    b = get_object_or_404(runs, pk=request.POST.get("b") or 0)
    delta = _difference(request.POST.get("delta", "")) or 0.0
    try:
        rule = set_rule(a, b, request.POST.get("subject", ""), delta, request.user)
    except RuleError as exc:
        messages.error(request, str(exc))
    else:
        if rule.stopped_at is not None:
            messages.success(request, f"Run #{a.pk} has decided already and is stopping.")
        else:
            messages.success(
                request,
                f"Run #{a.pk} will stop itself once its comparison on {rule.subject} decides.",
            )
    url = reverse("leaderboards:compare", args=[task.slug])
    return redirect(f"{url}?a={a.pk}&b={b.pk}" + (f"&detect={delta:g}" if delta else ""))


def _judge_runs(task: Task) -> list[Run]:
    return list(
        task.runs.judging()
        .exclude(status=Run.Status.QUEUED)
        .select_related("judged_with__judge", "dataset", "source_run__endpoint")
        .order_by("-pk")
    )


@require_GET
def regressions(request: AppRequest, slug: str) -> HttpResponseBase:
    """A baseline and a candidate run item by item: what improved, regressed, stayed or failed
    in one, with a word-level diff of the responses; ?format=csv for every item."""
    task = get_object_or_404(Task, slug=slug)
    runs = _judge_runs(task)
    by_id = {run.pk: run for run in runs}
    a, b = _run_param(request, "a", by_id), _run_param(request, "b", by_id)
    mode = "judge" if request.GET.get("values") == "judge" else "human"
    context: dict[str, Any] = {"task": task, "a": a, "b": b, "mode": mode, "subjects": []}
    context["runs"] = [(run, boards.model_label(run)) for run in runs]
    if a and b and a != b and (subjects := regressions_mod.subjects_of(a, b)):
        subject = request.GET.get("subject", "")
        subject = subject if subject in subjects else subjects[0]
        done = regressions_mod.compared(a, b, subject, mode)
        found = done.found
        if request.GET.get("format") == "csv":
            name = f"{task.slug}-regressions-{a.pk}-{b.pk}-{subject}.csv"
            rows = regressions_mod.csv_rows(found, subject)
            return csv_response(name, regressions_mod.CSV_HEADER, rows)
        show = request.GET.get("show", "")
        shown = done.by_state[show] if show in regressions_mod.STATES else found
        page = Paginator(shown, 50).get_page(request.GET.get("page"))
        context |= {"subjects": subjects, "subject": subject, "show": show, "page": page}
        context |= {"counts": done.counts(), "total": len(found)}
        context["rows"] = list(regressions_mod.shown(a, b, list(page.object_list)))
    return render(request, "leaderboards/regressions.html", context)


@require_GET
def grid(request: AppRequest, slug: str) -> HttpResponse:
    """Items × models for one dataset and judge: each model's response and score per item."""
    task = get_object_or_404(Task, slug=slug)
    runs = _judge_runs(task)
    pairs = {(run.dataset_id, judge_id_of(run)): run for run in runs if judge_id_of(run)}
    choices = [(f"{d}-{j}", run) for (d, j), run in pairs.items()]
    picked = request.GET.get("of", "") or (choices[0][0] if choices else "")
    context: dict[str, Any] = {
        "task": task,
        "choices": choices,
        "of": picked,
        "params": request.GET,
    }
    if (run := dict(choices).get(picked)) is not None and judge_id_of(run) is not None:
        subjects = judge_of(run).subject_names
        subject = request.GET.get("subject", "")
        subject = subject if subject in subjects else subjects[0]
        context |= {
            "subjects": subjects,
            "subject": subject,
            "tags": run.dataset.sorted_tag_counts(),
        }
        context["grid"] = grid_mod.build(
            run.dataset,
            judge_of(run),
            subject,
            "judge" if request.GET.get("values") == "judge" else "human",
            request.GET.get("tag", ""),
            _number(request.GET.get("low", "")),
            _number(request.GET.get("high", "")),
            request.GET.get("disagree") == "1",
            request.GET.get("page"),
        )
    return render(request, "leaderboards/grid.html", context)


def _number(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _difference(raw: str) -> float | None:
    """The difference typed into "detect a difference of", if it is a finite non-zero number."""
    try:
        value = abs(float(raw))
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _run_param(request: AppRequest, name: str, runs: dict[int, Run]) -> Run | None:
    value = request.GET.get(name, "")
    return runs.get(int(value)) if value.isdigit() else None


@require_GET
def robustness(request: AppRequest, slug: str) -> HttpResponseBase:
    """Each model on perturbed copies minus on their originals, per subject and tag; the same
    numbers as CSV or JSONL with ?format=."""
    task = get_object_or_404(Task, slug=slug)
    judge = request.GET.get("judge", "")
    found = robustness_mod.build(
        task,
        int(judge) if judge.isdigit() else None,
        request.GET.get("values", "human"),
        request.GET.get("scoring", "strict"),
        request.GET.get("subject") or None,
    )
    fmt = request.GET.get("format", "")
    if fmt in exports.FORMATS:
        records = robustness_mod.records(found)
        chunks = (
            [exports.records_csv(robustness_mod.HEADER, records)]
            if fmt == "csv"
            else (json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        )
        return _download(chunks, fmt, f"{task.slug}-robustness", stream=False)
    context = {
        "task": task,
        "found": found,
        "summary": found.summary(),
        "value_views": VALUE_VIEWS[1:],
        "scoring_views": SCORING_VIEWS,
    }
    return render(request, "leaderboards/robustness.html", context)


@require_GET
def metrics(request: AppRequest, slug: str) -> HttpResponse:
    """Every metric judge of the task as columns, one row per model, sorted by ?perf=."""
    task = get_object_or_404(Task, slug=slug)
    built = metric_board.build(
        task,
        names=request.GET.getlist("judge") or None,
        perf=request.GET.get("perf"),
        scoring=request.GET.get("scoring") or "strict",
    )
    context = {"task": task, "board": built, "scoring_views": SCORING_VIEWS}
    return render(request, "leaderboards/metrics.html", context)


@require_GET
def agreement(request: AppRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    rows, people = agreement_mod.page(task)
    context = {"task": task, "rows": rows, "people": people}
    return render(request, "leaderboards/agreement.html", context)


@require_GET
def judge_alignment(request: AppRequest, pk: int) -> HttpResponse:
    """A judge version checked against people on held-out reviewed items, beside the version
    people reviewed (#14.2)."""
    judge = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    board_settings = BoardSettings.of(judge.task_id)
    context = {
        "judge": judge,
        "report": alignment.report(judge),
        "history": alignment.history(judge),
        "threshold_form": ThresholdForm(instance=board_settings),
        "task_threshold": board_settings.alignment_threshold,
        "default_judge": TaskJudging.of(judge.task_id).default_judge,
        "version_label": f"v{judge.version}",
    }
    return render(request, "leaderboards/alignment.html", context)


@require_GET
def judge_bias(request: AppRequest, pk: int) -> HttpResponseBase:
    """A judge version's bias report (#31.3): position, verbosity, self-preference and
    agreement by tag, with intervals; ?format=csv for its numbers."""
    judge = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    found = bias.report(judge)
    if request.GET.get("format") == "csv":
        name = f"{judge.task.slug}-{judge.name}-v{judge.version}-bias.csv"
        return csv_response(name, bias.HEADER, bias.records(found))
    return render(request, "leaderboards/bias.html", {"judge": judge, "report": found})


@require_POST
@reviewer_required
def alignment_threshold(request: AppRequest, pk: int) -> HttpResponse:
    """Set the task's agreement threshold from a judge's alignment page."""
    judge = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    # The row is made on first save (an unsaved one from `of` is saved as new).
    form = ThresholdForm(request.POST, instance=BoardSettings.of(judge.task_id))
    if form.is_valid():
        form.save()
        messages.success(request, "Saved the agreement threshold of the task.")
    else:
        messages.error(
            request, " ".join(str(e) for e in form.errors.get("alignment_threshold", []))
        )
    return redirect(reverse("leaderboards:judge-alignment", args=[judge.pk]))
