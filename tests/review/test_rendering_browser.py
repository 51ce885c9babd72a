"""Model output as people read it, in real Chromium: Markdown, code, tables, math, a chat,
right-to-left and CJK text and a 20,000-character answer on the review page, as each role at
1280 and 800 px; hostile Markdown inert on every page that shows it (no script runs, no request
leaves the site); the Raw / Rendered choice kept per user.

Set EVALSITE_SHOTS=/some/dir to keep a screenshot of each page looked at.
"""

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from apps.judges.models import Judge, Score
from tests.base import make_user
from tests.factories import (
    judge_item,
    make_generation_run,
    make_item,
    make_judge_run,
    make_review_dataset,
    make_task,
)
from tests.model_output import CHAT, CJK, CODE, HOLD_OUT, HOSTILE, LATEX, RTL, TABLE, long_answer

ANSWER = f"{HOLD_OUT}\n\n{long_answer(20_000 - len(HOLD_OUT) - 2)}"
REASON = "**Mostly right**: the `mean` is correct, but $\\sigma$ is missing.\n\n- cites the table"


def hold_out():
    task = make_task()
    dataset = make_review_dataset(task)
    good = make_item(dataset, 0, question=f"{CODE}\n\n{RTL}\n\n{CJK}", answer=ANSWER)
    good.reference = f"{TABLE}\n\n{LATEX}"
    good.fields["conversation"] = CHAT
    good.save()
    evil = "\n\n".join(HOSTILE)
    bad = make_item(dataset, 1, question=evil, answer=evil, reference=evil)
    judge = Judge.objects.create(
        task=task, name="rubric", kind=Judge.Kind.RUBRIC, n_iter=1,
        subjects=[{"name": "accuracy", "min": 1, "max": 5}, {"name": "clarity", "min": 1, "max": 5}],
    )  # fmt: skip
    run = make_judge_run(dataset, judge=judge)
    judge_item(run, good, [{"accuracy": 4, "clarity": 3}], reasons=[REASON])
    judge_item(run, bad, [{"accuracy": 1, "clarity": 1}], reasons=[evil])
    generation = make_generation_run(dataset, {0: ANSWER, 1: evil})
    return run, generation, good, bad


def watch(page: Page, live_server) -> dict[str, list[str]]:
    """Every request the page makes and every dialog it opens."""
    seen: dict[str, list[str]] = {"requests": [], "dialogs": []}
    page.on("request", lambda request: seen["requests"].append(request.url))
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))
    page.add_init_script("window.__xss = 0;")
    return seen


def assert_stayed_home(page: Page, live_server, seen: dict[str, list[str]], where: str) -> None:
    assert page.evaluate("window.__xss") == 0, where
    assert seen["dialogs"] == [], where
    outside = [url for url in seen["requests"] if not url.startswith(live_server.url)]
    assert outside == [], (where, outside)
    assert (
        page.locator("main img, main svg, main iframe, main style, main script:not([src])").count()
        == 0
    )
    hrefs = page.locator("main a[href]").evaluate_all("els => els.map(e => e.href)")
    assert all(h.startswith((live_server.url, "https://", "http://", "mailto:")) for h in hrefs)


def shot(page: Page, name: str, full_page: bool = True) -> None:
    folder = os.environ.get("EVALSITE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)


def in_view(page: Page, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    height = page.viewport_size["height"] if page.viewport_size else 900
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ["admin", "reviewer", "viewer"])
def test_the_hold_out_reads_well_as_each_role(login, live_server, page, role):
    run, _generation, good, _bad = hold_out()
    seen = watch(page, live_server)
    login(make_user(role, f"{role}-1"))
    url = f"{live_server.url}/review/run/{run.pk}/item/{good.pk}/"
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        response = page.locator("#response")
        expect(response.locator(".fold-label")).to_contain_text("Show all 20,000 characters")
        # Rendered, not source: headings, lists, code coloured by class, a table, MathML.
        expect(response.locator("h1")).to_have_text("Plan of the answer")
        assert response.locator(".highlight span.k, .highlight span.kd").count() >= 5
        assert response.locator("table th").count() == 3
        assert response.locator("math").count() >= 4
        assert page.locator("#reference table, #reference math").count() >= 2
        page.locator("#inputs details").evaluate("d => { d.open = true; }")
        expect(page.locator("#inputs .chat-message")).to_have_count(3)
        rtl = page.locator("#inputs p", has_text="مرحبا")
        assert rtl.evaluate("p => getComputedStyle(p).direction") == "rtl"
        expect(page.locator("#judge-says strong")).to_have_text("Mostly right")
        shot(page, f"review-{role}-{width}")

        # Opened in place, the whole answer is there; the score panel stays in view while
        # it scrolls at 1280 px, and comes after it at 800 px.
        response.locator(".fold-label").click()
        expect(response.locator(".fold-less")).to_be_visible()
        # Read to the end: its last line at the bottom of the window.
        response.get_by_text("THE END OF THE ANSWER").evaluate(
            "e => e.scrollIntoView({block: 'end'})"
        )
        assert page.evaluate("window.scrollY") > 5000
        panel = "#subjects .judge-value"
        if width >= 1000:
            assert in_view(page, panel), "the judge's value scrolled away with the answer"
            assert in_view(page, "#judge-says")
            if role != "viewer":
                assert in_view(page, "#subjects .override-form button[type=submit]")
        else:
            answer_box, panel_box = (
                response.bounding_box(),
                page.locator("#subjects").bounding_box(),
            )
            assert (
                answer_box
                and panel_box
                and panel_box["y"] >= answer_box["y"] + answer_box["height"]
            )
        shot(page, f"review-{role}-{width}-scrolled", full_page=False)
    assert_stayed_home(page, live_server, seen, "hold-out")

    if role == "reviewer":
        # The keys still work with the panel sticky: c confirms the focused subject.
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(url)
        page.locator("body").press("c")
        first = Score.objects.filter(run=run, item=good).order_by("pk").first()
        expect(page.locator(f"#score-{first.pk} .state")).to_have_text("Confirmed")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_hostile_markdown_stays_inert_on_every_page_that_shows_it(login, live_server, page):
    run, generation, _good, bad = hold_out()
    seen = watch(page, live_server)
    login(make_user("reviewer", "alice"))
    pages = {
        "review item": f"/review/run/{run.pk}/item/{bad.pk}/",
        "response": f"/runs/{generation.pk}/items/{bad.pk}/",
        "dataset item": f"/datasets/{run.dataset_id}/items/1/",
    }
    for mode in ("Rendered", "Raw, whitespace shown"):
        for where, path in pages.items():
            page.goto(f"{live_server.url}{path}")
            page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
            for label in page.locator(".fold-label").all():
                label.click()
            page.wait_for_load_state("networkidle")
            text = page.locator("main").inner_text()
            assert "window.__xss = 11" in text and "onerror" in text, where
            # An image is a link the reader may follow: nothing was fetched.
            if mode == "Rendered":
                expect(page.locator("main a.md-image").first).to_contain_text("[image: pixel]")
            assert_stayed_home(page, live_server, seen, f"{where} ({mode})")
            shot(page, f"hostile-{where.replace(' ', '-')}-{mode.split(',')[0].lower()}")
        page.locator("#text-view-switch button", has_text=mode.split(",")[0]).first.click()
        page.wait_for_load_state("networkidle")
        page.locator("#text-view-switch button", has_text="Raw, whitespace shown").click()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_raw_shows_the_exact_characters_and_the_choice_persists(login, live_server, page):
    run, generation, good, _bad = hold_out()
    user = make_user("viewer", "vera")
    login(user, f"/review/run/{run.pk}/item/{good.pk}/")
    page.locator("#text-view-switch button", has_text="Raw").first.click()
    expect(page.locator("#text-view-switch button.is-on")).to_have_text("Raw")
    raw = page.locator("#response pre.raw")
    assert raw.evaluate("pre => pre.textContent") == ANSWER
    # Whitespace on demand: marked by CSS, the characters themselves unchanged.
    page.locator("#text-view-switch button", has_text="whitespace").click()
    assert page.locator("#response .ws-space").count() > 1000
    assert page.locator("#response pre.raw").evaluate("pre => pre.textContent") == ANSWER
    # Stored for the user, not the page: another page, another session, the same choice.
    user.refresh_from_db()
    assert user.text_view == "whitespace"
    page.goto(f"{live_server.url}/runs/{generation.pk}/items/{good.pk}/")
    expect(page.locator("#response-text pre.raw")).to_have_count(1)
    page.locator("#text-view-switch button", has_text="Rendered").click()
    expect(page.locator("#response-text .md h1")).to_have_text("Plan of the answer")
