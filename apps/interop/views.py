from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from apps.accounts.access import AppRequest, reviewer_required
from apps.datasets.models import Task
from apps.interop.forms import ImportForm
from apps.interop.results import ImportError_
from apps.interop.tools import import_files


@reviewer_required
def import_results(request: AppRequest, slug: str) -> HttpResponse:
    """Another tool's result files into the task, all or nothing; errors name the file and
    the sample or row."""
    task = get_object_or_404(Task, slug=slug)
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        uploads = form.cleaned_data["uploads"]
        if sum(u.size or 0 for u in uploads) > settings.DATASET_MAX_UPLOAD_BYTES:
            form.add_error("uploads", "The files are larger than the upload limit.")
        else:
            files = [(u.name or "file", u.read()) for u in uploads]
            try:
                source = import_files(
                    task, form.cleaned_data["tool"], files, request.user, form.cleaned_data["name"]
                )
            except ImportError_ as exc:
                form.add_error("uploads", str(exc))
            else:
                runs = ", ".join(log.run.label for log in source.logs.select_related("run"))
                messages.success(
                    request,
                    f"Imported {source}: {source.dataset.row_count} items into "
                    f"{source.dataset}, response sets of {runs}.",
                )
                return redirect(source.dataset)
    return render(request, "interop/import.html", {"task": task, "form": form})
