"""The board says which tokenizer a BLEU judge used (issue #29 point 8)."""

import pytest
from django.urls import reverse

from apps.judges.models import Judge
from apps.leaderboards import boards
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("options", "note"),
    [
        ({}, "BLEU: tokenized by script: 13a; Chinese “zh” (a token per character); Japanese "
         "and Korean character by character (“char”)."),
        ({"tokenize": "intl"}, "BLEU: tokenized sacrebleu's “intl”."),
    ],
)  # fmt: skip
def test_a_bleu_board_names_its_tokenizer(board_data, viewer_client, options, note):
    task, dataset = board_data["task"], board_data["dataset"]
    judge = f.make_judge(
        task,
        name="bleu",
        kind=Judge.Kind.METRIC,
        metric="bleu",
        metric_options=options,
        subjects=[{"name": "bleu", "min": 0, "max": 100}],
    )
    run = f.make_judge_run(dataset, judge, source_run=board_data["gen_a"])
    f.add_scores(run, {"k0": {"bleu": 40}, "k1": {"bleu": 60}})
    [info] = boards.subject_infos(judge)
    assert f"{info.label}: {info.note}." == note
    page = viewer_client.get(
        reverse("leaderboards:task", args=["demo"]), {"judge": judge.pk}
    ).content.decode()
    assert note.replace("'", "&#x27;") in page


def test_other_boards_have_no_tokenizer_note(board_data, viewer_client):
    page = viewer_client.get(reverse("leaderboards:task", args=["demo"])).content.decode()
    assert "subject-note" not in page


def test_the_methods_page_states_the_parsing_and_tokenizer_rules(viewer_client):
    html = viewer_client.get(reverse("leaderboards:methods")).content.decode()
    section = html[html.index('id="parsing"') :]
    for text in (
        "[RESULT] 4",
        "the <strong>last</strong> counts",
        "378 of 378",
        "SQuAD v2 script drops",
        "flexible-extract",
        "character by character",
    ):
        assert text in section, text
