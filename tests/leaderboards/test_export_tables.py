"""#30.7: every export also as Excel and Parquet, through pandas: the CSV's rows and columns,
typed (numbers, booleans, timestamps), and a model's formula text shown, never run, in Excel."""

import csv
import io
from datetime import datetime

import openpyxl
import pandas as pd
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.accounts.models import ApiToken
from apps.review.models import Review
from tests.api.conftest import TokenClient
from tests.base import make_user
from tests.factories import (
    add_scores,
    make_answers_dataset,
    make_generation_run,
    make_judge,
    make_judge_run,
    make_task,
)

pytestmark = pytest.mark.django_db

FORMULA = "=HYPERLINK(1)"


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def csv_rows(text: bytes) -> list[dict[str, str]]:
    """The CSV as strings, its formula quote taken off (as the tables take it off)."""
    rows = list(csv.DictReader(io.StringIO(text.decode().lstrip("\ufeff"))))
    return [{k: v[1:] if v.startswith("'=") else v for k, v in row.items()} for row in rows]


def as_text(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)


def same_rows(table: pd.DataFrame, rows: list[dict[str, str]]) -> None:
    assert list(table.columns) == list(rows[0])
    assert len(table) == len(rows)
    for record, row in zip(table.to_dict("records"), rows, strict=True):
        for name, text in row.items():
            value = record[name]
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if number and not pd.isna(value):  # Excel keeps 1.0 as 1
                assert value == pytest.approx(float(text)), name
            elif isinstance(value, datetime):  # Excel: UTC wall time to the millisecond
                stamp = pd.Timestamp(text)
                if pd.Timestamp(value).tzinfo is None:
                    stamp = stamp.tz_convert("UTC").tz_localize(None)
                assert abs(pd.Timestamp(value) - stamp) < pd.Timedelta(milliseconds=1), name
            else:
                assert as_text(value) == text, name


@pytest.fixture
def viewer():
    return TokenClient(ApiToken.issue(user := make_user("viewer"), "script")[1], user)


@pytest.fixture
def judged():
    task = make_task("qa")
    dataset = make_answers_dataset(task, 4, response=lambda i: FORMULA if i == 1 else f"a {i}")
    judge = make_judge(task, name="exact", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    x = make_generation_run(dataset, {i: FORMULA if i == 1 else f"x{i}" for i in range(4)})
    y = make_generation_run(dataset, {i: f"y{i}" for i in range(4)}, label="model-b")
    runs = []
    for source, values in ((x, [5, 4, 3, 5]), (y, [2, 1, 3, 2])):
        run = make_judge_run(dataset, judge, source_run=source)
        add_scores(run, {f"q{i}": {"accuracy": v} for i, v in enumerate(values)})
        runs.append(run)
    reviewer = make_user("reviewer", "rita")
    score = runs[0].scores.get(item__key="q1")
    Review.objects.create(score=score, user=reviewer, value=2, reason=FORMULA, seconds=12.5)
    other = make_user("reviewer", "omar")
    Review.objects.create(score=score, user=other, value=3, reason="close", seconds=4.0)
    return runs[0]


def test_each_export_as_xlsx_and_parquet_has_the_csvs_rows_typed(viewer, judged):
    page = Client()
    page.force_login(viewer.user)

    def get(url: str, **query: str):
        if url.startswith("/api/"):
            return viewer.client.get(url, query, headers=viewer.headers)
        return page.get(url, query)

    exports = {
        "board": ("/api/v1/leaderboards/qa/export/", {}),
        "pairs": ("/api/v1/leaderboards/qa/export/", {"pairs": "1"}),
        "results": (f"/api/v1/runs/{judged.pk}/export/", {}),
        "reviews": (reverse("leaderboards:run-reviews", args=[judged.pk]), {}),
        "page board": (reverse("leaderboards:task-export", args=["qa"]), {}),
    }
    for name, (url, query) in exports.items():
        rows = csv_rows(body(get(url, **query, format="csv")))
        assert rows, name
        xlsx, parquet = get(url, **query, format="xlsx"), get(url, **query, format="parquet")
        assert xlsx["Content-Type"].startswith("application/vnd.openxmlformats"), name
        assert parquet["Content-Type"] == "application/vnd.apache.parquet", name
        assert xlsx["Content-Disposition"].endswith('.xlsx"'), name
        same_rows(pd.read_parquet(io.BytesIO(body(parquet))), rows)
        same_rows(pd.read_excel(io.BytesIO(body(xlsx)), engine="openpyxl", dtype=object), rows)

    def parquet(url: str, **query: str) -> pd.DataFrame:
        return pd.read_parquet(io.BytesIO(body(get(url, **query, format="parquet"))))

    results = parquet(f"/api/v1/runs/{judged.pk}/export/")
    assert str(results["position"].dtype) == "Int64"
    reviews = parquet(reverse("leaderboards:run-reviews", args=[judged.pk]))
    assert isinstance(reviews["reviewed_at"].dtype, pd.DatetimeTZDtype)
    assert (str(reviews["seconds"].dtype), reviews["reason"][0]) == ("Float64", FORMULA)
    board = parquet("/api/v1/leaderboards/qa/export/")
    assert str(board["rank"].dtype) == "Int64" and str(board["overall.judge"].dtype) == "Float64"


def test_formula_text_is_text_in_excel(viewer, judged):
    xlsx = body(viewer.get(f"/runs/{judged.pk}/export/", {"format": "xlsx"}))
    sheet = openpyxl.load_workbook(io.BytesIO(xlsx)).active
    cells = [c for row in sheet.iter_rows() for c in row if c.value == FORMULA]
    assert cells, "the model's formula text is in the workbook"
    assert all((c.data_type, c.quotePrefix) == ("s", True) for c in cells)
    assert not any(c.data_type == "f" for row in sheet.iter_rows() for c in row)


def test_the_agreement_export_as_parquet_and_xlsx(judged, capsysbinary):
    call_command("agreement", "qa", "--format", "csv")
    rows = csv_rows(capsysbinary.readouterr().out)
    assert rows
    for fmt, read in (("parquet", pd.read_parquet), ("xlsx", pd.read_excel)):
        call_command("agreement", "qa", "--format", fmt)
        same_rows(read(io.BytesIO(capsysbinary.readouterr().out)), rows)
