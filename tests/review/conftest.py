import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext


@pytest.fixture
def count_queries():
    def _count(func):
        with CaptureQueriesContext(connection) as ctx:
            result = func()
        return len(ctx.captured_queries), result

    return _count
