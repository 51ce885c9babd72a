from typing import Any

from django import forms


class ApiError(Exception):
    """An answer other than success: its status, the message the page would show, and a
    form's errors by field when there is a form."""

    def __init__(self, status: int, detail: str, errors: dict[str, list[str]] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.errors = status, detail, errors or {}
        # More the script may need to fix its request (a file's columns, say).
        self.extra: dict[str, Any] = {}

    @classmethod
    def from_form(cls, form: forms.Form) -> "ApiError":
        errors = {field: [str(e) for e in messages] for field, messages in form.errors.items()}
        lines = [
            " ".join(messages) if field == "__all__" else f"{field}: {' '.join(messages)}"
            for field, messages in errors.items()
        ]
        return cls(400, " ".join(lines), errors)
