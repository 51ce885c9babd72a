from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from apps.accounts.access import reviewer_required
from apps.datasets.forms import TaskForm
from apps.datasets.models import Dataset, Task


def task_list(request: HttpRequest) -> HttpResponse:
    tasks = Task.objects.all()
    return render(request, "datasets/task_list.html", {"tasks": tasks, "form": TaskForm()})


@reviewer_required
def task_create(request: HttpRequest) -> HttpResponse:
    form = TaskForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        task = form.save(commit=False)
        task.created_by = request.user
        task.save()
        messages.success(request, f"Task {task.slug} created.")
        return redirect(task)
    return render(request, "datasets/task_form.html", {"form": form})


def task_detail(request: HttpRequest, slug: str) -> HttpResponse:
    task = get_object_or_404(Task, slug=slug)
    context = {
        "task": task,
        "datasets": task.datasets.all(),
        "runs": task.runs.select_related("dataset", "endpoint", "judge")[:50],
    }
    return render(request, "datasets/task_detail.html", context)


def dataset_list(request: HttpRequest) -> HttpResponse:
    datasets = Dataset.objects.select_related("task")
    return render(request, "datasets/dataset_list.html", {"datasets": datasets})


def dataset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset.objects.select_related("task"), pk=pk)
    items = dataset.items.all()[:50]
    return render(request, "datasets/dataset_detail.html", {"dataset": dataset, "items": items})
