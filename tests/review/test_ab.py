"""The human A/B queue of a pairwise run (#13.3): sides randomised per item and recorded,
names and the judge hidden until one has chosen, pairs the judge flipped on first; keys
1 / 2 / 3 in Chromium; people's votes move the pairwise board."""

import re

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from apps.judges.models import Comparison, Judge, JudgeRun, PairwiseSetup
from apps.judges.pairwise import normalise
from apps.review.ab import queue
from apps.review.models import Vote, a_on_left
from apps.runs.models import Run
from tests.base import make_user
from tests.factories import make_generation_run, make_judge, make_qa_dataset, make_task

N = 4


def pairwise_run(judged: dict[int, tuple[str, str]]):
    """Two response sets (x, y) over N items, a finished pairwise run whose judge said
    `judged[position]` = (shown in order 0, shown in order 1): ("A", "A") is a flip."""
    task = make_task("duel")
    dataset = make_qa_dataset(task, N)
    x = make_generation_run(dataset, {i: f"x answers {i}" for i in range(N)}, label="x")
    y = make_generation_run(dataset, {i: f"y answers {i}" for i in range(N)}, label="y")
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
    setup = PairwiseSetup.objects.create(run=run)
    setup.responses.set([x, y])
    for item in dataset.items.all():
        for order, shown in enumerate(judged.get(item.position, ("tie", "tie"))):
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
    return run, dataset, x, y


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_flipped_pairs_come_first_and_the_judge_stays_hidden_until_one_chooses() -> None:
    run, dataset, x, y = pairwise_run({2: ("A", "A"), 0: ("A", "B")})
    items = {i.position: i for i in dataset.items.all()}
    assert [u[0] for u in queue(run)] == [items[2].pk, items[0].pk, items[1].pk, items[3].pk]
    alice = client_for(make_user("reviewer", "alice"))
    first = alice.get(reverse("review:ab", args=[run.pk]))
    assert first["Location"] == reverse("review:ab-item", args=[run.pk, items[2].pk, x.pk, y.pk])
    page = alice.get(first["Location"]).content.decode()
    assert "model-name" not in page and 'id="ab-judge"' not in page and 'id="ab-form"' in page
    left_is_x = a_on_left(run.pk, items[2].pk, x.pk, y.pk)
    left_text = f"{'x' if left_is_x else 'y'} answers 2"
    assert page.index(left_text) < page.index('id="ab-right"')
    vote_url = reverse("review:ab-vote", args=[run.pk, items[2].pk, x.pk, y.pk])
    alice.post(vote_url, {"side": "left", "reason": "clearer"})
    vote = Vote.objects.get()
    assert (vote.a_on_left, vote.choice) == (left_is_x, "a" if left_is_x else "b")
    page = alice.get(first["Location"]).content.decode()
    assert 'id="ab-judge"' in page and "model-name" in page and "You chose <strong>left" in page
    again = alice.post(vote_url, {"side": "right"}, follow=True)
    assert "your first choice stands" in again.content.decode() and Vote.objects.count() == 1
    # The next pair skips what alice did; a viewer may look but not choose.
    assert alice.get(reverse("review:ab", args=[run.pk]))["Location"].endswith(
        f"/{items[0].pk}/{x.pk}/{y.pk}/"
    )
    viewer = client_for(make_user("viewer", "val"))
    assert viewer.post(vote_url, {"side": "left"}).status_code == 403
    assert 'id="ab-judge"' in viewer.get(first["Location"]).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_ab_queue_by_keyboard_moves_the_board(login, live_server) -> None:
    # The judge finds no winner (ties everywhere); people prefer x.
    run, dataset, x, y = pairwise_run({})
    page = login(make_user("reviewer", "alice"), f"/review/ab/{run.pk}/")
    for n in range(N):
        page.wait_for_selector("#ab-form")
        item = dataset.items.get(pk=int(re.search(r"/ab/\d+/(\d+)/", page.url)[1]))
        left_is_x = a_on_left(run.pk, item.pk, x.pk, y.pk)
        page.keyboard.press("1" if left_is_x else "2")  # choose x's answer wherever it is
        expect(page.locator("#ab-mine")).to_be_visible()
        expect(page.locator("#ab-judge")).to_contain_text("a tie")
        if n < N - 1:
            page.keyboard.press("j")
            page.wait_for_url(lambda url, seen=page.url: url != seen)
    assert Vote.objects.filter(choice="a").count() == N
    page.goto(f"{live_server.url}/leaderboards/{dataset.task.slug}/pairwise/?source=judge")
    ratings = page.locator("#pairwise-ratings tbody tr")
    expect(ratings.nth(0).locator("td").nth(0)).to_have_text("1")
    expect(ratings.nth(1).locator("td").nth(0)).to_have_text("1")  # judge: tied
    page.goto(f"{live_server.url}/leaderboards/{dataset.task.slug}/pairwise/?source=human")
    expect(page.locator("#source-label")).to_have_text("human battles")
    expect(page.locator("#pairwise-ratings tbody tr").first).to_have_attribute("data-model", "x")
    expect(page.locator("#judge-human")).to_contain_text("0.0% of 4")


@pytest.mark.django_db
def test_the_pairwise_board_against_a_baseline_shows_length_controlled_win_rates() -> None:
    # y wins item 0 in both orders, flips on item 1 (a tie), ties elsewhere; equal lengths.
    _, dataset, x, _ = pairwise_run({0: ("B", "A"), 1: ("A", "A")})
    client = client_for(make_user("viewer"))
    url = reverse("leaderboards:pairwise", args=[dataset.task.slug])
    html = client.get(url, {"baseline": x.pk}).content.decode()
    assert 'id="length-controlled"' in html
    assert f'href="{reverse("leaderboards:methods")}#bradley-terry" id="methods-link"' in html
    table = html[html.index('id="length-controlled"') :]
    row = re.search(r'<tr data-model="y">(.*?)</tr>', table, re.S)[1]
    cells = re.findall(r'<td class="num"[^>]*>([^<]*)</td>', row)
    # 4 battles: 1 win, 3 ties → 62.5%; equal lengths: the same controlled.
    assert cells[:4] == ["4", "62.5%", "62.5%", "0.0"]
