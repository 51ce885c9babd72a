"""A judge that scores turn by turn (Judge.per_turn, JudgeRound.turn): on the review page each
turn's values and reason stand beside the model's answer they are about; in blind mode they stay
out of the HTML until the reviewer has entered every subject, then arrive with the rest."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import JudgeRound, Score
from tests.base import make_user
from tests.factories import (
    make_conversation_dataset,
    make_judge,
    make_judge_run,
    make_multi_turn_run,
    make_task,
)

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def per_turn(db):
    """One two-turn dialogue judged per turn on one subject: turn 1 got 3, turn 2 got 9."""
    task = make_task("mt")
    dataset = make_conversation_dataset(task, [["Plan a trip.", "Make it cheaper."]])
    generation = make_multi_turn_run(dataset, {0: ["Fly to Rome.", "Take the train instead."]})
    judge = make_judge(
        task, name="mt-judge", per_turn=True, subjects=[{"name": "rating", "min": 1, "max": 10}]
    )
    run = make_judge_run(dataset, judge, source_run=generation)
    item = dataset.items.get()
    for turn, value, reason in ((1, 3, "TURN-ONE-REASON"), (2, 9, "TURN-TWO-REASON")):
        JudgeRound.objects.create(
            run=run,
            item=item,
            round=0,
            turn=turn,
            status=JudgeRound.Status.OK,
            values={"rating": value},
            reason=reason,
            raw_reply=f"Rating: [[{value}]]",
        )
    score = Score.objects.create(
        run=run,
        item=item,
        subject="rating",
        status=Score.Status.OK,
        judge_value=6.0,
        final_value=6.0,
        round_values=[6.0],
        turn_values=[3.0, 9.0],
    )
    return run, item, score


def answer_rows(html: str) -> dict[str, str]:
    """turn -> the HTML of the row of the model's answer to it."""
    dialogue = html.split('id="dialogue"', 1)[1].split("</ol>", 1)[0]
    rows = dialogue.split('<li class="chat-row')[1:]
    return {
        re.search(r'data-turn="(\d+)"', row)[1]: row for row in rows if "chat-row-answer" in row
    }


def test_each_turns_verdict_stands_beside_its_answer(per_turn):
    run, item, _ = per_turn
    client = Client()
    client.force_login(make_user("reviewer", "rita"))
    html = client.get(reverse("review:item", args=[run.pk, item.pk])).content.decode()
    rows = answer_rows(html)
    assert "rating: 3" in rows["1"] and "TURN-ONE-REASON" in rows["1"]
    assert "TURN-TWO-REASON" not in rows["1"]
    assert "rating: 9" in rows["2"] and "TURN-TWO-REASON" in rows["2"]
    assert "Take the train instead." in rows["2"]
    # The subject's card gives each turn's value beside the judge's mean of them.
    card = html.split('class="muted score-turns">', 1)[1].split("</span>", 1)[0]
    assert card == "turn 1: 3 · turn 2: 9 (mean)"
    # The score panel names the turn of each reason too.
    panel = html.split('id="judge-says"', 1)[1].split("</section>", 1)[0]
    assert "Turn 1, round 1" in panel and "Turn 2, round 1" in panel


def test_blind_mode_keeps_the_per_turn_verdicts_out_until_every_subject_is_entered(per_turn):
    run, item, score = per_turn
    client = Client()
    client.force_login(make_user("reviewer", "rita"))
    url = reverse("review:item", args=[run.pk, item.pk])
    html = client.get(url, {"blind": "1"}).content.decode()
    for secret in ("TURN-ONE-REASON", "TURN-TWO-REASON", "rating: 9", "turn-verdict"):
        assert secret not in html, secret
    assert "Take the train instead." in html  # the dialogue itself is shown
    fragment = client.post(
        reverse("review:blind", args=[score.pk]), {"value": "5", "blind": "1"}, **HX
    ).content.decode()
    # The verdicts arrive with the rounds, the dialogue swapped in out of band.
    response = fragment.split('id="response" hx-swap-oob="true"', 1)[1]
    assert "TURN-TWO-REASON" in response and 'aria-label="The judge on turn 2"' in response
