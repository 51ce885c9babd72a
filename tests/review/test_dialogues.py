"""Review shows a conversation as a conversation (#27.7): the dialogue as chat bubbles with
their roles, the model's answers marked by turn, a failed turn in its place and later turns
not asked, tool calls and results folded, a per-turn judge's values and reasons beside the
answer they are about, and the A/B queue's two dialogues side by side."""

import re
from html import unescape

import pytest
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.urls import reverse
from playwright.sync_api import expect

from apps.judges.models import Comparison, Judge, JudgeRun, PairwiseSetup
from apps.judges.pairwise import normalise
from apps.review.dialogues import dialogue_of
from apps.review.models import a_on_left
from apps.runs.models import Response, Run
from tests.base import make_user
from tests.factories import (
    judge_item,
    make_conversation_dataset,
    make_generation_run,
    make_judge,
    make_judge_run,
    make_multi_turn_run,
    make_task,
)

HOSTILE = '<script>alert("turn")</script><img src=x onerror=alert(1)>'
WEATHER = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": -3}'},
    {"role": "assistant", "content": "It is -3 °C in Oslo."},
    {"role": "user", "content": "And tomorrow?"},
]


def client_for(role: str, username: str) -> Client:
    client = Client()
    client.force_login(make_user(role, username))
    return client


def rows(html: str, scope: str) -> list[tuple[str, str, str]]:
    """(role shown, turn, text) of each bubble inside the element with id `scope`."""
    part = html.split(f'id="{scope}"', 1)[1].split("</ol>", 1)[0]
    found = []
    for li in part.split('<li class="chat-row')[1:]:
        role = re.search(r'<span class="bubble-role">([^<]*)</span>', li)
        turn = re.search(r'data-turn="(\d+)"', li)
        text = " ".join(unescape(re.sub(r"<[^>]+>", " ", li.split("</p>", 1)[1])).split())
        found.append((role[1] if role else "", turn[1] if turn else "", text))
    return found


@pytest.fixture
def dialogues(db):
    """Three two- or three-turn conversations answered turn by turn: d0 all answered (its last
    answer hostile), d1 failed at turn 2 of 3, d2 answered; a judge run over them."""
    task = make_task("chat")
    dataset = make_conversation_dataset(
        task,
        [
            ["Capital of France?", "How many people live there?"],
            ["Pick a number.", "Double it.", "Halve it."],
            ["Say hi.", "Say bye."],
        ],
    )
    generation = make_multi_turn_run(
        dataset, {0: ["Paris.", HOSTILE], 1: ["7", None], 2: ["hi", "bye"]}, label="chatty"
    )
    judge_run = make_judge_run(dataset, source_run=generation)
    items = {item.key: item for item in dataset.items.all()}
    for key in items:
        judge_item(judge_run, items[key], [{"accuracy": 4, "clarity": 5}])
    return judge_run, items


def test_a_multi_turn_response_reads_as_a_dialogue_turn_by_turn(dialogues):
    judge_run, items = dialogues
    reviewer = client_for("reviewer", "alice")
    page = reviewer.get(reverse("review:item", args=[judge_run.pk, items["d0"].pk]))
    html = page.content.decode()
    assert '<h2>Conversation <span class="muted">' in html
    assert rows(html, "dialogue") == [
        ("user", "1", "Capital of France?"),
        ("model", "1", "Paris."),
        ("user", "2", "How many people live there?"),
        ("model", "2", unescape(HOSTILE)),
    ]
    # Model output is hostile: shown as text, never as markup.
    assert "<script>" not in html.split('id="dialogue"', 1)[1].split("</ol>")[0]
    assert "&lt;script&gt;" in html
    assert html.count("bubble-answer") == 2  # the model's answers, marked as its own
    assert "Other fields" not in html  # the conversation column is the dialogue, not JSON too

    failed = reviewer.get(reverse("review:item", args=[judge_run.pk, items["d1"].pk]))
    assert rows(failed.content.decode(), "dialogue") == [
        ("user", "1", "Pick a number."),
        ("model", "1", "7"),
        ("user", "2", "Double it."),
        ("model", "2", "Turn 2 failed: API error: the server failed (500): boom"),
        ("user", "3", "Halve it."),
        ("model", "3", "Not asked: an earlier turn failed."),
    ]


def test_a_plain_item_still_shows_one_response(db):
    task = make_task("plain")
    dataset = make_conversation_dataset(task, [["Hello?"]])
    dataset.items.update(conversation=[])  # an item with no conversation: a plain prompt
    generation = make_generation_run(dataset, {0: "Hello there."})
    judge_run = make_judge_run(dataset, source_run=generation)
    item = dataset.items.get()
    judge_item(judge_run, item, [{"accuracy": 4, "clarity": 5}])
    html = (
        client_for("viewer", "vic")
        .get(reverse("review:item", args=[judge_run.pk, item.pk]))
        .content.decode()
    )
    assert 'id="dialogue"' not in html and "<h2>Response" in html and "Hello there." in html


def test_tool_calls_and_results_are_folded_and_the_answer_closes_the_dialogue(db):
    task = make_task("tools")
    dataset = make_conversation_dataset(task, [WEATHER])
    generation = make_generation_run(dataset, {0: "Colder: -7 °C."})
    judge_run = make_judge_run(dataset, source_run=generation)
    item = dataset.items.get()
    judge_item(judge_run, item, [{"accuracy": 4, "clarity": 5}])
    html = (
        client_for("viewer", "vic")
        .get(reverse("review:item", args=[judge_run.pk, item.pk]))
        .content.decode()
    )
    assert [(role, turn) for role, turn, _ in rows(html, "dialogue")] == [
        ("system", ""),
        ("user", "1"),
        ("assistant", "1"),
        ("tool", "1"),
        ("assistant", "1"),
        ("user", "2"),
        ("model", "2"),
    ]
    dialogue = html.split('id="dialogue"', 1)[1].split("</ol>", 1)[0]
    call = re.search(r'<details class="tool-call">(.*?)</details>', dialogue, re.S)
    assert call and "Calls <code>get_weather</code>" in call[1] and "call_1" in call[1]
    assert "{&quot;city&quot;: &quot;Oslo&quot;}" in call[1]
    result = re.search(r'<details class="tool-result">(.*?)</details>', dialogue, re.S)
    assert result and "Tool result of <code>call_1</code>" in result[1] and "temp_c" in result[1]
    assert "<details open" not in dialogue.split("turn-verdict")[0]  # folded: closed
    assert rows(html, "dialogue")[-1][2].startswith("Colder: -7 °C.")


def test_a_per_turn_verdict_stands_beside_the_answer_it_is_about(db):
    """The judge's values and reason for turn 2 are in turn 2's row, not turn 1's."""
    task = make_task("verdicts")
    dataset = make_conversation_dataset(task, [["First?", "Second?"]])
    generation = make_multi_turn_run(dataset, {0: ["one", "two"]})
    response = Response.objects.select_related("run", "item").get(run=generation)
    verdicts = {
        1: [{"round": 0, "values": [("accuracy", 2)], "reason": "Too short.", "failed": False}],
        2: [{"round": 0, "values": [("accuracy", 5)], "reason": "Exactly.", "failed": False}],
    }
    request = RequestFactory().get("/")
    request.user = make_user("viewer", "vic")
    html = render_to_string(
        "_dialogue.html",
        {"bubbles": dialogue_of(response, verdicts), "dialogue_id": "d", "user": request.user},
        request=request,
    )
    lis = html.split('<li class="chat-row')[1:]
    assert [re.search(r'data-turn="(\d)"', li)[1] for li in lis] == ["1", "1", "2", "2"]
    assert "turn-verdict" not in lis[0] and "turn-verdict" not in lis[2]  # user turns
    assert "accuracy: 2" in lis[1] and "Too short." in lis[1] and "Exactly." not in lis[1]
    assert "accuracy: 5" in lis[3] and "Exactly." in lis[3]
    assert 'aria-label="The judge on turn 2"' in lis[3]


def pairwise_over_dialogues():
    task = make_task("duet")
    dataset = make_conversation_dataset(task, [["Name a colour.", "Name another."]])
    x = make_multi_turn_run(dataset, {0: ["red", "blue"]}, label="x")
    y = make_multi_turn_run(dataset, {0: ["green", "teal"]}, label="y")
    judge = make_judge(task, Judge.Kind.PAIRWISE, name="which", subjects=[])
    run = JudgeRun.create_with(
        judge,
        task=task,
        kind=Run.Kind.PAIRWISE,
        dataset=dataset,
        label="x vs y",
        status=Run.Status.COMPLETED,
        launch=1,
    )
    PairwiseSetup.objects.create(run=run).responses.set([x, y])
    item = dataset.items.get()
    for order, shown in enumerate(("A", "B")):
        Comparison.objects.create(
            run=run,
            item=item,
            a_run=x,
            b_run=y,
            order=order,
            status="ok",
            shown=shown,
            verdict=normalise(shown, order),
            launch=1,
        )
    return run, item, x, y


@pytest.mark.django_db
def test_the_ab_queue_shows_two_whole_dialogues_side_by_side():
    run, item, x, y = pairwise_over_dialogues()
    url = reverse("review:ab-item", args=[run.pk, item.pk, x.pk, y.pk])
    html = client_for("reviewer", "alice").get(url).content.decode()
    left, right = ("x", "y") if a_on_left(run.pk, item.pk, x.pk, y.pk) else ("y", "x")
    answers = {"x": ["red", "blue"], "y": ["green", "teal"]}
    for side, model in (("ab-left-dialogue", left), ("ab-right-dialogue", right)):
        assert rows(html, side) == [
            ("user", "1", "Name a colour."),
            ("model", "1", answers[model][0]),
            ("user", "2", "Name another."),
            ("model", "2", answers[model][1]),
        ]
    assert "model-name" not in html  # still blind until one chooses
    task_part = html.split('id="ab-inputs"', 1)[1].split("</section>", 1)[0]
    assert "Name a colour." not in task_part  # the dialogues show the turns, not the JSON


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 800])
def test_in_chromium_the_two_dialogues_sit_side_by_side(login, width):
    run, item, x, y = pairwise_over_dialogues()
    page = login(make_user("reviewer", "alice"), f"/review/ab/{run.pk}/{item.pk}/{x.pk}/{y.pk}/")
    page.set_viewport_size({"width": width, "height": 900})
    left = page.locator("#ab-left-dialogue")
    right = page.locator("#ab-right-dialogue")
    expect(left.locator(".bubble-answer")).to_have_count(2)
    expect(right.locator(".bubble-answer")).to_have_count(2)
    a, b = left.bounding_box(), right.bounding_box()
    assert a and b and a["x"] + a["width"] <= b["x"] and abs(a["y"] - b["y"]) < 2, (a, b)
    # A user's turn and the model's answer to it read as two sides of a chat.
    user = left.locator(".bubble-user").first.bounding_box()
    model = left.locator(".bubble-answer").first.bounding_box()
    assert user and model and model["y"] > user["y"]
    assert model["x"] + model["width"] >= user["x"] + user["width"] - 1  # answers on the right


def test_a_memory_script_reads_as_the_dialogue_it_was(db):
    """A run that wrote its own turns (#27.4, #27.5): each turn's line and the model's answer,
    a failed turn's error in its answer's place."""
    from apps.runs.models import Turn

    task = make_task("ltm")
    dataset = make_conversation_dataset(task, [["unused"], ["unused"]])
    dataset.items.update(conversation=[])  # script items are plain rows
    run = Run.objects.create(
        task=task,
        kind=Run.Kind.SCRIPT,
        dataset=dataset,
        label="rememberer",
        status=Run.Status.COMPLETED,
        multi_turn=True,
        launch=1,
    )
    first, second = dataset.items.order_by("position")
    lines = [
        ("My cat is Miso.", "Noted."),
        ("Filler about tides.", HOSTILE),
        ("Cat's name?", "Miso"),
    ]
    for number, (asked, text) in enumerate(lines, 1):
        Turn.objects.create(run=run, item=first, number=number, asked=asked, text=text, launch=1)
    Turn.objects.create(
        run=run, item=second, number=1, asked="My cat is Miso.", text="Ok", launch=1
    )
    Turn.objects.create(
        run=run,
        item=second,
        number=2,
        asked="Cat's name?",
        error_kind="api_error",
        error="the server failed (500): boom",
        launch=1,
    )
    Response.objects.create(run=run, item=first, status="ok", text="Miso", launch=1)
    Response.objects.create(
        run=run,
        item=second,
        status="failed",
        launch=1,
        error="Turn 2 (question): the server failed (500): boom",
    )
    judge_run = make_judge_run(dataset, source_run=run)
    judge_item(judge_run, first, [{"accuracy": 5, "clarity": 5}])
    reviewer = client_for("reviewer", "rita")
    html = reviewer.get(reverse("review:item", args=[judge_run.pk, first.pk])).content.decode()
    assert rows(html, "dialogue") == [
        ("user", "1", "My cat is Miso."),
        ("model", "1", "Noted."),
        ("user", "2", "Filler about tides."),
        ("model", "2", unescape(HOSTILE)),
        ("user", "3", "Cat's name?"),
        ("model", "3", "Miso"),
    ]
    assert "<script>" not in html.split('id="dialogue"', 1)[1].split("</ol>")[0]
    response = Response.objects.get(run=run, item=second)
    assert [(b.role, b.turn, b.content, b.failed) for b in dialogue_of(response)] == [
        ("user", 1, "My cat is Miso.", ""),
        ("assistant", 1, "Ok", ""),
        ("user", 2, "Cat's name?", ""),
        ("assistant", 2, "", "API error: the server failed (500): boom"),
    ]
