"""#30.6: Schemathesis against the API's own schema, in process (Django's WSGI handler), with
every built-in check: no server error, status codes, media types and bodies as the schema
declares them, invalid input refused. Examples are bounded and derandomised (the same cases
each run, so never flaky); path parameters point at a task, runs and a dataset that exist, so
the calls reach the boards and runs instead of stopping at 404."""

from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.config import SchemathesisConfig

from apps.accounts.models import ApiToken
from apps.api.api import api
from apps.judges.models import Judge
from tests.base import make_user
from tests.factories import add_scores, make_generation_run, make_judge, make_judge_run
from tests.review.test_ab import pairwise_run

pytestmark = pytest.mark.django_db

# Input the schema allows may still be refused with 400 for what no schema can say (a file
# that is a PNG, an endpoint name that does not exist): the page's form refuses it too. 422,
# ninja's answer to input that does not fit the schema, is never acceptable for valid input.
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "3xx", 400, 401, 403, 404, 409]
            }
        }
    }
)
SCHEMA = schemathesis.openapi.from_dict(api.get_openapi_schema(), config=CONFIG)
SCHEMA.app = WSGIHandler()
EXAMPLES = 10  # generated per call (positive and negative), derandomised


@pytest.fixture
def _keep_connection():
    """As Django's test client does: the test's transaction outlives each request."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def world(_keep_connection) -> dict[str, Any]:
    """A task with a judged board and a pairwise board; an admin's token (every call open)."""
    run, dataset, x, _ = pairwise_run({0: ("A", "B"), 1: ("B", "B")})
    judge = make_judge(dataset.task, Judge.Kind.METRIC, name="exact")
    judged = make_judge_run(dataset, judge, source_run=x)
    add_scores(judged, {item.key: {"exact_match": 100} for item in dataset.items.all()})
    failed = make_generation_run(dataset, {0: None, 1: "y"}, label="flaky")
    _, token = ApiToken.issue(make_user("admin", "fuzzer"), "schemathesis")
    return {
        "token": token,
        "slug": dataset.task.slug,
        "runs": [run.pk, judged.pk, failed.pk, x.pk],
        "dataset": dataset.pk,
    }


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_the_api_keeps_its_schema(case, world):
    if "slug" in case.path_parameters:
        case.path_parameters["slug"] = world["slug"]
    if isinstance(pk := case.path_parameters.get("pk"), int):
        ids = [world["dataset"]] if "/datasets/" in case.path else world["runs"]
        # Mostly objects that exist; some ids that do not (404 is in the schema too).
        case.path_parameters["pk"] = ids[pk % len(ids)] if pk % 5 else pk
    case.call_and_validate(headers={"Authorization": f"Bearer {world['token']}"})
