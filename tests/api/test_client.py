"""#30.8: the Python client generated from the schema (clients/python, openapi-python-client)
against the running app (pytest-django's live server over HTTP, a real worker process, the
loopback LLM server): upload, start, wait, board, export, as a script would."""

import csv
import io
import sys

import pytest

from apps.accounts.models import ApiToken
from apps.judges.models import Judge
from apps.runs.models import PromptTemplate
from tests.base import ROOT, make_user, work
from tests.factories import make_judge, make_task, set_judging

sys.path.insert(0, str(ROOT / "clients" / "python"))

from evalsite_client import AuthenticatedClient
from evalsite_client.api.datasets import upload_dataset
from evalsite_client.api.leaderboards import leaderboard, leaderboard_export
from evalsite_client.api.runs import run_detail, start_generation
from evalsite_client.models import (
    BoardOut,
    DatasetOut,
    GenerationIn,
    LeaderboardExportFormat,
    RunOut,
    UploadDatasetMultiPartBodyParams,
)
from evalsite_client.types import File

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CSV = "id,question,answer\n" + "".join(f"q{i},What is {i} + {i}?,{2 * i}\n" for i in range(3))


def test_the_generated_client_uploads_runs_and_reads_the_board(live_server, endpoint, llm_server):
    task = make_task("qa")
    PromptTemplate.objects.create(task=task, name="qa", user_message="Q: {{ question }}")
    # The task's default judge scores the generation run by itself (one worker pass).
    judge = make_judge(task, Judge.Kind.METRIC, name="exact", metric="exact_match")
    set_judging(task, default_judge=judge)
    _, token = ApiToken.issue(make_user("reviewer"), "client")
    client = AuthenticatedClient(base_url=live_server.url, token=token, timeout=60)

    upload = UploadDatasetMultiPartBodyParams(
        file=File(payload=io.BytesIO(CSV.encode()), file_name="arith.csv", mime_type="text/csv"),
        id_column="id",
        input_columns=["question"],
        reference_column="answer",
    )
    dataset = upload_dataset.sync("qa", client=client, body=upload)
    assert isinstance(dataset, DatasetOut), dataset
    assert (dataset.name, dataset.row_count, dataset.status) == ("arith", 3, "ready")

    body = GenerationIn(task="qa", dataset=dataset.id, endpoint="local", template="qa")
    started = start_generation.sync(client=client, body=body)
    assert isinstance(started, RunOut), started
    work()
    run = run_detail.sync(started.id, client=client)
    assert isinstance(run, RunOut)
    assert (run.status, run.done, run.total) == ("completed", 3, 3)

    board = leaderboard.sync("qa", client=client, judge="exact")
    assert isinstance(board, BoardOut), board
    assert [row.judged_run_id for row in board.rows] == [run.id]
    assert board.rows[0].subjects.additional_properties["exact_match"].judge.n == 3

    text = leaderboard_export.sync("qa", client=client, format_=LeaderboardExportFormat.CSV)
    assert isinstance(text, str)
    rows = list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"))))
    assert [row["judged_run_id"] for row in rows] == [str(run.id)]
