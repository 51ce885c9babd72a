"""Fixtures for drafting: the runs app's task and endpoint on the loopback LLM server."""

from tests.runs.conftest import endpoint, task

__all__ = ["endpoint", "task"]
