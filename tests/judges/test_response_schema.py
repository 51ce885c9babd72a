"""A generation run's response schema (#29.12, third point; Dynabench's verify_response): each
response must be JSON with the given keys and types; one that is not is marked invalid with the
reason on the run's pages, and judges fail its item, so strict boards count it at 0."""

import json
from typing import Any

import pytest
from django.db import transaction
from django.urls import reverse

from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, Score
from apps.leaderboards import boards
from apps.runs.models import ErrorKind
from apps.runs.response_schema import check, clean_schema, judged_text
from tests import factories as f
from tests.base import work

# Dynabench's nli TaskIO asks for an id, a prediction and its probabilities.
SCHEMA = {"keys": {"id": "string", "label": "string", "prob": "object"}, "answer": "label"}


def dynabench_verify_response(response: Any) -> None:
    """The seed's verify_response, written out as Dynabench's developer guide shows it (the
    types made explicit): assertions on the parsed JSON object."""
    assert isinstance(response, dict)
    assert "id" in response and isinstance(response["id"], str)
    assert "label" in response and isinstance(response["label"], str)
    assert "prob" in response and isinstance(response["prob"], dict), "prob must be in response"


RESPONSES = [
    '{"id": "q0", "label": "entailment", "prob": {"entailment": 0.9}}',
    '```json\n{"id": "q1", "label": "neutral", "prob": {}, "extra": 1}\n```',
    '{"id": "q2", "label": "neutral"}',
    '{"id": "q3", "label": 2, "prob": {}}',
    "entailment",
    '["entailment"]',
    '{"id": "q6", "label": "contradiction", "prob": [0.1, 0.9]}',
    '{"id": 7, "label": "neutral", "prob": {}}',
    "",
]


def dynabench_accepts(text: str) -> bool:
    body = text.strip().removeprefix("```json").removesuffix("```")
    try:
        dynabench_verify_response(json.loads(body))
    except (AssertionError, ValueError):
        return False
    return True


@pytest.mark.parametrize("text", RESPONSES)
def test_valid_exactly_when_dynabenchs_verify_response_passes(text):
    problem, _ = check(text, SCHEMA)
    assert (problem == "") == dynabench_accepts(text), problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"id": "q2", "label": "neutral"}', "missing key 'prob'"),
        ('{"id": "q3", "label": 2, "prob": {}}', "key 'label' must be string, not integer"),
        ('["entailment"]', "not a JSON object but array"),
        ("entailment", "not JSON (Expecting value at character 0)"),
        ('{"id": "q", "label": "x", "prob": true}', "key 'prob' must be object, not boolean"),
    ],
)
def test_the_reason_names_the_key_and_the_type(text, problem):
    assert check(text, SCHEMA) == (problem, None)


def test_judges_score_the_answer_key():
    assert judged_text(RESPONSES[0], SCHEMA) == ("entailment", "")
    assert judged_text("free text", {}) == ("free text", "")
    text, why = judged_text(RESPONSES[2], SCHEMA)
    assert text is None
    assert why == (
        "The response is invalid: missing key 'prob' (the run asks for JSON with id (string), "
        "label (string), prob (object); judges score “label”)."
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"keys": {"pred": "str"}}, "Key 'pred' has type 'str'"),
        ({"keys": {}}, '"keys" must map'),
        ({"keys": {"pred": "string"}, "answer": "label"}, '"answer" must be one of the keys'),
        ({"fields": {}}, "Unknown entry 'fields'"),
        (["pred"], "Give a JSON object"),
    ],
)
def test_a_bad_schema_is_refused_with_the_reason(schema, message):
    with pytest.raises(ValueError, match=message):
        clean_schema(schema)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_invalid_response_fails_its_item_and_counts_as_0_on_a_strict_board(viewer_client):
    task = f.make_task("nli")
    gold = ["entailment", "neutral", "neutral", "contradiction"]
    dataset = f.make_dataset(
        task,
        [
            {"key": f"q{i}", "fields": {"premise": f"p{i}"}, "reference": g}
            for i, g in enumerate(gold)
        ],
    )
    texts = [
        '{"id": "q0", "label": "entailment", "prob": {}}',  # right
        '{"id": "q1", "label": "neutral", "prob": {}}',  # right
        '{"id": "q2", "label": "neutral"}',  # right label, but no prob: invalid
        '{"id": "q3", "label": "neutral", "prob": {}}',  # wrong
    ]
    gen = f.make_generation_run(dataset, dict(enumerate(texts)), label="nli-model")
    gen.response_schema = clean_schema(SCHEMA)
    gen.save(update_fields=["response_schema"])
    judge = f.make_judge(task, Judge.Kind.METRIC, name="label", metric="exact_match")
    with transaction.atomic():
        run = create_judge_run(judge, source_run=gen)
    work(timeout=300)  # generous: a worker starts slowly on a loaded machine
    scores = {s.item.key: s for s in Score.objects.filter(run=run).select_related("item")}
    assert [scores[f"q{i}"].judge_value for i in (0, 1, 3)] == [100, 100, 0]
    invalid = scores["q2"]
    assert (invalid.status, invalid.error_kind) == (Score.Status.FAILED, ErrorKind.NO_RESPONSE)
    assert "missing key 'prob'" in invalid.error

    board = boards.build(task, boards.Params(judge_id=judge.pk))
    [row] = board.rows
    assert row.cells["judge"]["exact_match"].mean == pytest.approx(50.0)  # (100+100+0+0)/4
    board = boards.build(task, boards.Params(judge_id=judge.pk, scoring="answered"))
    assert board.rows[0].cells["judge"]["exact_match"].mean == pytest.approx(200 / 3)

    page = viewer_client.get(gen.get_absolute_url()).content.decode()
    # PostgreSQL's jsonb keeps the schema's keys in its own order: each is named, in some order.
    assert "label (string)" in page and "prob (object)" in page
    assert page.count("response-invalid") == 1 and "Invalid: missing key" in page
    item = dataset.items.get(key="q2")
    detail = viewer_client.get(reverse("runs:response-detail", args=[gen.pk, item.pk]))
    assert "Invalid: missing key &#x27;prob&#x27;" in detail.content.decode()
