from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.runs.models import Run


def index(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.judging().select_related("task", "judge")
    return render(request, "review/index.html", {"runs": runs})
