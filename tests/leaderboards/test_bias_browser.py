"""The walk #31 asks for, in Chromium: an admin sets the review policy to a random 10 %
sample, reviews it, sees the judge-corrected board move away from the judge, and opens the
judge's bias report from its page."""

import re

import pytest
from playwright.sync_api import expect

from apps.review.models import ReviewPolicy
from apps.review.sample import sample_mask
from apps.runs.models import Endpoint, Run
from tests import factories as f
from tests.base import make_user

N = 30


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_review_a_random_sample_see_the_board_move_and_the_judges_bias(login, live_server):
    task = f.make_task("walk")
    rows = [
        {"key": f"k{i}", "fields": {"question": f"q{i}"}, "tags": ["odd" if i % 2 else "even"]}
        for i in range(N)
    ]
    dataset = f.make_dataset(task, rows, columns=["question"], name="set")
    openai = Endpoint.objects.create(name="gpt", model="gpt-x", family="openai")
    meta = Endpoint.objects.create(name="llama", model="llama-x", family="llama")
    judge = f.make_judge(task, name="grader", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    people = [1.0 + i % 4 for i in range(N)]  # what people will say: 1–4
    runs = {}
    for label, endpoint, words, shift in (("gpt", openai, 60, 1), ("llama", meta, 8, 0)):
        texts = {i: "word " * (words + 3 * (i % 7)) for i in range(N)}
        generation = f.make_generation_run(dataset, texts, label=label)
        Run.objects.filter(pk=generation.pk).update(endpoint=endpoint)
        run = runs[label] = f.make_judge_run(dataset, judge, source_run=generation)
        Run.objects.filter(pk=run.pk).update(endpoint=openai)  # the judge is an openai model
        # The judge gives gpt (its own family, the long answers) a point more than people do.
        f.add_scores(run, {f"k{i}": {"accuracy": people[i] + shift} for i in range(N)})

    # An admin sets the policy (admins only) and reviews the sample.
    page = login(make_user("admin", "ada"), f"/review/task/{task.slug}/policy/")
    page.fill("#id_sample_percent", "10")
    page.fill("#id_sample_seed", "3")
    page.click("#policy-form button[type=submit]")
    expect(page.locator("#id_sample_percent")).to_have_value("10")
    assert ReviewPolicy.objects.get(task=task).sample_percent == 10

    page.goto(f"{live_server.url}/leaderboards/{task.slug}/")
    expect(page.locator("#corrected")).to_contain_text("No item of the sample has been reviewed")

    items = list(dataset.items.order_by("position"))
    sampled = sample_mask([item.key for item in items], 10, 3)
    assert sampled.sum() == 3
    for label, run in runs.items():
        for item in (item for item, chosen in zip(items, sampled, strict=True) if chosen):
            page.goto(f"{live_server.url}/review/run/{run.pk}/item/{item.pk}/")
            score = f.score(run, item.key, "accuracy")
            card = page.locator(f"#score-{score.pk}")
            expect(card).to_have_class(re.compile("is-focused"))
            if label == "llama":
                page.keyboard.press("c")
                expect(card.locator(".state")).to_have_text("Confirmed")
            else:
                page.keyboard.press(str(int(people[item.position])))
                page.keyboard.type("one point too kind")
                page.keyboard.press("Enter")
                expect(card.locator(".state")).to_have_text("Overridden")

    page.goto(f"{live_server.url}/leaderboards/{task.slug}/")
    gpt = page.locator(f'#corrected-table tr[data-run="{runs["gpt"].pk}"]')
    cell = '[data-stat="{}"][data-name="accuracy"]'.format
    expect(gpt.locator(cell("labelled"))).to_have_text(re.compile(r"^\s*3\s+of 3\s*$"))
    corrected = float(gpt.locator(cell("corrected")).inner_text())
    judge_only = float(gpt.locator(cell("judge")).inner_text())
    truth = sum(people) / N
    assert judge_only == pytest.approx(truth + 1, abs=0.01)
    assert abs(corrected - truth) < abs(judge_only - truth)  # the correction moved it back

    page.goto(f"{live_server.url}{judge.get_absolute_url()}")
    page.click("#bias-link")
    page.wait_for_url(re.compile(rf"/leaderboards/judges/{judge.pk}/bias/"))
    excess = page.locator('#self-preference tr[data-compared="excess"] [data-stat="excess"]')
    expect(excess).to_have_text("1.000")  # judge − human: +1 for its family, 0 for the other
    expect(page.locator('#verbosity tr[data-sample="reviewed"]')).to_be_visible()
    expect(page.locator('#tag-agreement tr[data-tag="even"]')).to_be_visible()
