from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from apps.accounts.access import AppRequest, reviewer_required
from apps.accounts.models import User
from apps.datasets.models import Item, Task
from apps.judges import learning, pairwise, plugins, results
from apps.judges.forms import DefaultJudgeForm, JudgeForm, JudgeRunForm, PairwiseRunForm
from apps.judges.judge_prompts import (
    DEFAULT_MCQ_SYSTEM,
    DEFAULT_PAIRWISE_SYSTEM,
    default_rubric_system,
)
from apps.judges.launching import (
    JudgeRunError,
    create_judge_run,
    retry_all_failed,
    retry_items,
    retry_kind,
)
from apps.judges.models import Judge, TaskJudging, judge_of, runs_of
from apps.judges.pairwise import consistency, estimate_pairwise_run, start_pairwise_run
from apps.runs.engine.launch import LaunchError
from apps.runs.estimate import Estimate, estimate
from apps.runs.models import Endpoint, ErrorKind, Run


# ---- judges ---------------------------------------------------------------------------------------
def judge_list(request: AppRequest) -> HttpResponse:
    visible = Task.objects.for_user(request.user)
    judges = Judge.objects.latest_versions().filter(task__in=visible).select_related("task")
    task = visible.filter(slug=request.GET.get("task", "")).first()
    # ?responses=run:ID (from a generation run's page) is handed on to the judge's start form.
    context: dict[str, Any] = {"task": task, "responses": request.GET.get("responses", "")}
    if task is not None:
        judges = judges.filter(task=task)
        context["default_form"] = DefaultJudgeForm(task=task)
        context["judging"] = TaskJudging.of(task.pk)
    context["judges"] = judges.order_by("task__slug", "name")
    return render(request, "judges/judge_list.html", context)


@require_POST
@reviewer_required
def set_default(request: AppRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    form = DefaultJudgeForm(request.POST, task=task)
    # The judge page's "make this the default" comes back to that page, errors and all.
    back = request.POST.get("next", "")
    back = back if url_has_allowed_host_and_scheme(back, {request.get_host()}) else ""
    if not form.is_valid() and back:
        for errors in form.errors.values():
            messages.error(request, " ".join(str(error) for error in errors))
        return redirect(back)
    if not form.is_valid():
        judges = Judge.objects.latest_versions().filter(task=task).order_by("name")
        context = {
            "task": task,
            "judges": judges,
            "default_form": form,
            "judging": TaskJudging.of(task.pk),
        }
        return render(request, "judges/judge_list.html", context, status=400)
    form.save()
    judge = form.cleaned_data["judge"]
    messages.success(
        request,
        f"Each new response set in {task.slug} is now judged by {judge}."
        if judge
        else f"New response sets in {task.slug} are no longer judged automatically.",
    )
    if back:
        return redirect(back)
    return redirect(f"{reverse('judges:list')}?{urlencode({'task': task.slug})}")


@reviewer_required
def judge_create(request: AppRequest) -> HttpResponse:
    tasks = Task.objects.for_user(request.user, User.Role.REVIEWER)
    task = tasks.filter(slug=request.GET.get("task", "")).first()
    if task is None:
        return render(request, "judges/pick_task.html", {"tasks": tasks})
    form = JudgeForm(request.POST or None, task=task)
    if request.method == "POST" and form.is_valid():
        judge = form.build().save_as_new_version(request.user)
        messages.success(request, f"Judge {judge} saved.")
        return redirect(_start_form_url(judge, request.GET.get("responses", "")))
    return render(request, "judges/judge_form.html", {"form": form, "task": task})


def _start_form_url(judge: Judge, responses: str) -> str:
    """The judge's page; from "judge these responses", at its start form with them chosen."""
    if not responses:
        return judge.get_absolute_url()
    return f"{judge.get_absolute_url()}?{urlencode({'responses': responses})}#start-judge-run"


@reviewer_required
def judge_edit(request: AppRequest, pk: int) -> HttpResponse:
    current = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    form = JudgeForm(request.POST or None, instance=current, task=current.task, editing=True)
    if request.method == "POST" and form.is_valid():
        judge = form.build().save_as_new_version(request.user)
        messages.success(request, f"Saved as {judge}; runs keep the version they used.")
        return redirect(judge)
    context = {"form": form, "task": current.task, "judge": current}
    return render(request, "judges/judge_form.html", context)


def judge_detail(request: AppRequest, pk: int) -> HttpResponse:
    judge = get_object_or_404(Judge.objects.select_related("task", "created_by"), pk=pk)
    if judge.kind == Judge.Kind.PAIRWISE:
        return _judge_page(request, judge, PairwiseRunForm(judge=judge))
    initial = {"responses": request.GET.get("responses", "")}
    return _judge_page(request, judge, JudgeRunForm(judge=judge, initial=initial))


def _judge_page(
    request: AppRequest, judge: Judge, form: JudgeRunForm | PairwiseRunForm, status: int = 200
) -> HttpResponse:
    default_system: dict[str, str] = {
        Judge.Kind.RUBRIC: default_rubric_system(judge.reply_format),
        Judge.Kind.MCQ: DEFAULT_MCQ_SYSTEM,
        Judge.Kind.PAIRWISE: DEFAULT_PAIRWISE_SYSTEM,
    }
    judging = TaskJudging.of(judge.task_id)
    context: dict[str, Any] = {
        "judge": judge,
        "judging": judging,
        "versions": judge.versions().order_by("-version"),
        "runs": runs_of(judge).with_names().exclude(kind=Run.Kind.CHECK).order_by("-pk")[:50],
        "form": form,
        "default_system": default_system.get(judge.kind, ""),
        "is_default": judging.default_judge_id == judge.pk,
        "default_form": DefaultJudgeForm(task=judge.task),
        "consistency": consistency(judge) if judge.kind == Judge.Kind.PAIRWISE else None,
        "split": learning.split_of(judge) if judge.kind == Judge.Kind.RUBRIC else {},
        "endpoints": Endpoint.objects.order_by("name"),
        # Its plug-ins as installed now, against the code the version recorded.
        "plugin_changes": plugins.changed(judge.plugin_code) if judge.plugin_code else [],
    }
    if request.user.can_edit:
        context["estimate"] = _estimate_of(form)
    return render(request, "judges/judge_detail.html", context, status=status)


def _estimate_of(form: JudgeRunForm | PairwiseRunForm) -> Estimate | None:
    if isinstance(form, PairwiseRunForm):
        return _pairwise_estimate(form)
    return _estimate(form)


def _pairwise_estimate(form: PairwiseRunForm) -> Estimate | None:
    """The cost estimate of a bound pairwise form's choices (None before any are made)."""
    if not form.is_bound or not form.is_valid():
        return None
    sources, baseline = form.response_sets()
    try:
        return estimate_pairwise_run(
            form.judge,
            sources,
            baseline,
            endpoint=form.cleaned_data["endpoint"],
            use_cache=form.cache_choice(),
        )
    except JudgeRunError:
        return None


def _estimate_only(
    request: AppRequest, judge: Judge, form: JudgeRunForm | PairwiseRunForm
) -> HttpResponse | None:
    """The estimate of the choices so far, when that is all the request asks: its partial
    (HTMX), or the page with it (no JavaScript)."""
    if not (request.POST.get("estimate") or request.htmx.target == "cost-estimate"):
        return None
    if request.htmx:
        context = {"estimate": _estimate_of(form)}
        return render(request, "judges/judge_detail.html#estimate", context)
    return _judge_page(request, judge, form)


def _estimate(form: JudgeRunForm) -> Estimate | None:
    """The cost estimate of the form's choices (its initial ones before anything was chosen:
    the responses it came for and the task's judging endpoint)."""
    if not form.is_bound:
        responses = form.initial.get("responses") or ""
        endpoint = form.fields["endpoint"].initial if "endpoint" in form.fields else None
        if not responses or (form.judge.uses_llm and not endpoint):
            return None
        data = {"responses": responses, "endpoint": endpoint or "", "chunk_size": 200}
        form = JudgeRunForm({**data, "logging_mode": "failed"}, judge=form.judge)
    return estimate(form.unsaved_run()) if form.is_valid() else None


@require_POST
@reviewer_required
def judge_run_start(request: AppRequest, pk: int) -> HttpResponse:
    judge = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    if judge.kind == Judge.Kind.PAIRWISE:
        return _pairwise_start(request, judge)
    form = JudgeRunForm(request.POST, judge=judge)
    if answered := _estimate_only(request, judge, form):
        return answered
    if form.is_valid():
        try:
            run = create_judge_run(
                judge,
                endpoint=form.cleaned_data.get("endpoint"),
                user=request.user,
                label=form.cleaned_data["label"],
                logging_mode=form.cleaned_data["logging_mode"],
                chunk_size=form.cleaned_data["chunk_size"],
                batch=form.cleaned_data.get("batch", False),
                use_cache=form.cache_choice(),
                budget_usd=form.cleaned_data.get("budget_usd"),
                **form.source(),
            )
        except JudgeRunError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Started judge run #{run.pk}: {run.total} items.")
            return redirect(run)
    return _judge_page(request, judge, form, status=400)


def _pairwise_start(request: AppRequest, judge: Judge) -> HttpResponse:
    form = PairwiseRunForm(request.POST, judge=judge)
    if answered := _estimate_only(request, judge, form):
        return answered
    if form.is_valid():
        try:
            sources, baseline = form.response_sets()
            run = start_pairwise_run(
                judge,
                sources,
                baseline,
                endpoint=form.cleaned_data["endpoint"],
                user=request.user,
                logging_mode=form.cleaned_data["logging_mode"],
                batch=form.cleaned_data["batch"],
                use_cache=form.cache_choice(),
                budget_usd=form.cleaned_data.get("budget_usd"),
            )
        except JudgeRunError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Started pairwise run #{run.pk}: {run.total} comparisons.")
            return redirect(run)
    return _judge_page(request, judge, form, status=400)


# ---- examples from reviews (#14.1) ------------------------------------------------------------
def _draft(judge: Judge, params: Any) -> learning.Draft:
    count = params.get("count", "")
    seed = params.get("seed", "")
    return learning.draft(
        judge,
        k=int(count) if count.isdigit() else learning.DEFAULT_EXAMPLES,
        seed=int(seed) if seed.isdigit() else 0,
    )


@reviewer_required
def improve(request: AppRequest, pk: int) -> HttpResponse:
    """Draft a new version whose prompt carries examples from reviewed items; the reviewer
    picks, edits or drops them, and saving records the held-out split."""
    judge = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    error = ""
    try:
        found = _draft(judge, request.POST if request.method == "POST" else request.GET)
        if request.method == "POST":
            picked = [
                (int(request.POST[f"run_{i}"]), int(request.POST[f"item_{i}"]), reply)
                for i in request.POST.getlist("use")
                if i.isdigit() and (reply := request.POST.get(f"reply_{i}")) is not None
            ]
            examples = learning.chosen_examples(found, picked)
            new = learning.save_version(judge, examples, found, request.user)
            messages.success(request, f"Saved {new} with {len(examples)} examples from reviews.")
            return redirect(new)
    except (learning.LearningError, KeyError, ValueError) as exc:
        error = str(exc)
        found = None
    context = {"judge": judge, "draft": found, "error": error}
    return render(request, "judges/improve.html", context, status=400 if error else 200)


@require_POST
@reviewer_required
def check(request: AppRequest, pk: int) -> HttpResponse:
    """Check this version against people on the held-out reviewed items (a run per reviewed
    run), then show the report."""
    judge = get_object_or_404(Judge.objects.select_related("task"), pk=pk)
    endpoint = Endpoint.objects.filter(pk=request.POST.get("endpoint") or 0).first()
    try:
        runs = learning.start_check(judge, endpoint, request.user)
    except learning.LearningError as exc:
        messages.error(request, str(exc))
        return redirect(judge)
    items = sum(run.total for run in runs)
    messages.success(request, f"Checking {judge} on {items} held-out reviewed items.")
    return redirect(reverse("leaderboards:judge-alignment", args=[judge.pk]))


# ---- a judge run's results and failed items -------------------------------------------------------
def _judge_run(pk: int) -> Run:
    run = get_object_or_404(
        Run.objects.select_related(
            "task", "dataset", "judged_with__judge", "endpoint", "source_run"
        ),
        pk=pk,
    )
    if run.kind != Run.Kind.JUDGE:
        raise Http404("Not a judge run.")
    return run


def comparisons(request: AppRequest, pk: int) -> HttpResponse:
    """A pairwise run's comparisons, both orders of each (item, pair) on one line, with what
    the judge said, the outcome and, for failures, why (the raw reply folded)."""
    run = get_object_or_404(
        Run.objects.select_related("task", "dataset", "judged_with__judge"),
        pk=pk,
        kind=Run.Kind.PAIRWISE,
    )
    which = request.GET.get("show", "")
    which = which if which in pairwise.UNIT_FILTERS else ""
    page = Paginator(pairwise.unit_lines(run, which), 50).get_page(request.GET.get("page"))
    context = {
        "run": run,
        "page": page,
        "lines": pairwise.lines(run, list(page.object_list)),
        "show": which,
        "filters": pairwise.UNIT_FILTERS,
        "page_query": {"show": which} if which else {},
    }
    partial = "#comparisons" if request.htmx and request.htmx.target == "comparisons" else ""
    return render(request, f"judges/comparisons.html{partial}", context)


def run_results(request: AppRequest, pk: int) -> HttpResponse:
    run = _judge_run(pk)
    subjects = judge_of(run).subject_names
    filters = results.ItemFilters.from_query(request.GET, subjects)
    page, rows = results.items_page(run, filters, request.GET.get("page"))
    context = {
        "run": run,
        "filters": filters,
        "page_query": filters.query(),
        "page": page,
        "rows": rows,
        "subjects": subjects,
        "tags": results.run_tags(run),
        "page_sizes": results.PAGE_SIZES,
        "doubts": TaskJudging.of(run.task_id).doubts,
    }
    if request.htmx and request.htmx.target == "judge-items":
        return render(request, "judges/results.html#items", context)
    summaries = results.subject_results(run)
    context |= {"summaries": summaries, "tag_rows": results.tag_table(summaries)}
    return render(request, "judges/results.html", context)


def failed_items(request: AppRequest, pk: int) -> HttpResponse:
    """One line per failed item, grouped by error kind; the details fold open in place."""
    run = _judge_run(pk)
    kind = request.GET.get("kind", "")
    kind = kind if kind in ErrorKind.values else ""
    counts = results.failed_groups(run)
    groups = [g for g in counts if g.kind == kind] if kind else list(counts)
    page = results.failed_page(run, groups, kind, request.GET.get("page"))
    context = {
        "run": run,
        "page": page,
        "groups": [g for g in groups if g.items],
        "counts": counts,
        "retryable": sum(g.retryable for g in counts),
        "kind": kind,
        "page_query": {"kind": kind} if kind else {},
    }
    return render(request, "judges/failed.html", context)


def _back_to_failed(run: Run, request: AppRequest) -> HttpResponse:
    url = reverse("judges:failed", args=[run.pk])
    kind = request.POST.get("kind", "")
    return redirect(f"{url}?{urlencode({'kind': kind})}" if kind in ErrorKind.values else url)


@require_POST
@reviewer_required
def retry_item(request: AppRequest, pk: int, item_id: int) -> HttpResponse:
    run = _judge_run(pk)
    item = get_object_or_404(Item, pk=item_id, dataset_id=run.dataset_id)
    try:
        count = retry_items(run, [item.pk])
    except LaunchError as exc:
        messages.error(request, str(exc))
    else:
        if count:
            messages.success(request, f"Judging item {item.key} again (its failed rounds only).")
        else:
            messages.info(request, f"Item {item.key} has no failed rounds to retry.")
    return _back_to_failed(run, request)


@require_POST
@reviewer_required
def retry_failed_kind(request: AppRequest, pk: int) -> HttpResponse:
    run = _judge_run(pk)
    kind = request.POST.get("error_kind", "")
    if kind not in ErrorKind.values:
        raise Http404("No such error kind.")
    label = ErrorKind(kind).label
    try:
        count = retry_kind(run, kind)
    except LaunchError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Judging {count} items that failed with “{label}” again; the other failures wait."
            if count
            else f"No items that failed with “{label}” can be retried.",
        )
    return _back_to_failed(run, request)


@require_POST
@reviewer_required
def retry_failed(request: AppRequest, pk: int) -> HttpResponse:
    run = _judge_run(pk)
    try:
        count = retry_all_failed(run)
    except LaunchError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Judging {count} failed items again; good rounds and the logs stay."
            if count
            else "No failed items to retry.",
        )
    return _back_to_failed(run, request)
