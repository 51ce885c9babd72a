from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.datasets.models import Task


def index(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboards/index.html", {"tasks": Task.objects.all()})
