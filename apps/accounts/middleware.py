from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}


class ReadOnlyViewerMiddleware:
    """Refuse every unsafe request from a user below the reviewer role.

    Views check roles themselves; this is the net under them, so that a view added
    later without a check still cannot let a viewer change anything.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.method in SAFE_METHODS or getattr(view_func, "viewer_may_post", False):
            return None
        user = request.user
        if user.is_authenticated and not user.can_edit:
            raise PermissionDenied("Viewers cannot change anything.")
        return None
