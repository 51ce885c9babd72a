from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.accounts.access import admin_required, reviewer_required
from apps.runs import jobs
from apps.runs.models import Endpoint, Run, WorkerCheck
from apps.runs.queue import enqueue


def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.select_related("task", "dataset", "endpoint", "judge")[:200]
    return render(request, "runs/run_list.html", {"runs": runs})


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(
        Run.objects.select_related("task", "dataset", "endpoint", "judge"), pk=pk
    )
    return render(request, "runs/run_detail.html", {"run": run})


@admin_required
def endpoint_list(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/endpoint_list.html", {"endpoints": Endpoint.objects.all()})


def system(request: HttpRequest) -> HttpResponse:
    checks = WorkerCheck.objects.select_related("requested_by")[:10]
    return render(request, "runs/system.html", {"checks": checks})


@require_POST
@reviewer_required
def check_worker(request: HttpRequest) -> HttpResponse:
    check = WorkerCheck.objects.create(requested_by=request.user)
    enqueue(jobs.check_worker, check.pk, job_id=f"worker-check-{check.pk}", timeout=60)
    messages.info(request, "Asked a worker to answer; reload to see its reply.")
    return redirect("runs:system")
