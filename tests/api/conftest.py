"""Fixtures for the API: a token per role and a client that sends one."""

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import ApiToken
from apps.runs.models import Endpoint
from tests.base import make_user


class TokenClient:
    """A test client that calls the API with `Authorization: Bearer <token>` and no session."""

    def __init__(self, raw: str, user: Any) -> None:
        self.raw, self.user = raw, user
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {raw}"}

    def get(self, path: str, data: Any = None) -> Any:
        return self.client.get(f"/api/v1{path}", data, headers=self.headers)

    def post(self, path: str, body: Any = None) -> Any:
        return self.client.post(
            f"/api/v1{path}", body or {}, content_type="application/json", headers=self.headers
        )

    def upload(self, path: str, data: dict[str, Any]) -> Any:
        return self.client.post(f"/api/v1{path}", data, headers=self.headers)


@pytest.fixture
def token_client(db) -> Callable[..., TokenClient]:
    """token_client(role, name=None): a user of that role with a new token, as a client."""

    def _make(role: str, name: str | None = None) -> TokenClient:
        user = make_user(role, name)
        _, raw = ApiToken.issue(user, f"{role} script")
        return TokenClient(raw, user)

    return _make


@pytest.fixture
def endpoint(db, llm_server) -> Endpoint:
    return Endpoint.objects.create(
        name="local",
        base_url=llm_server.base_url,
        model="test-model",
        concurrency_limit=4,
        timeout_seconds=5,
        max_retries=1,
        api_key_secret="sk-test-API-7c1d2e",
    )
