"""In Chromium at 1280 and 800 px (issue #11.14): a wide board scrolls inside its own box
instead of squeezing its numbers or widening the page; the chart shows full model names and
keeps each value clear of its CI whisker; the compare pickers show full model names."""

import random

import pytest
from playwright.sync_api import Page

from tests import factories as f
from tests.base import make_user

NAMES = [
    "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo",
    "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "gpt-4o-mini-2024-07-18",
    "Qwen/Qwen2.5-72B-Instruct",
]
SUBJECTS = [{"name": n, "min": 1, "max": 5} for n in ("accuracy", "completeness", "clarity")]
WIDTHS = [1280, 800]


@pytest.fixture
def wide_board(db) -> dict:
    rng = random.Random(7)
    task = f.make_task("demo")
    keys = [str(i) for i in range(40)]
    dataset = f.make_dataset(
        task, [{"key": k, "fields": {"question": k}} for k in keys], name="set"
    )
    judge = f.make_judge(task, name="quality", subjects=SUBJECTS)
    runs = []
    for name in NAMES:
        generation = f.make_generation_run(dataset, {k: "an answer" for k in keys}, label=name)
        run = f.make_judge_run(dataset, judge, source_run=generation)
        f.add_scores(run, {k: {s["name"]: rng.randint(1, 5) for s in SUBJECTS} for k in keys})
        runs.append(run)
    return {"runs": runs}


def one_line(page: Page, selector: str) -> list[str]:
    """Texts of the matching elements that the browser laid out on more than one line."""
    return page.eval_on_selector_all(
        selector,
        """cells => cells.filter(c => {
            const range = document.createRange();
            range.selectNodeContents(c);
            const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
            return tops.size > 1;
        }).map(c => c.textContent.trim())""",
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_board_scrolls_in_its_own_box_and_numbers_stay_on_one_line(
    wide_board, login, live_server, width
):
    page = login(make_user("viewer"))
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/leaderboards/demo/?values=both")
    page.wait_for_selector("#leaderboard")
    page_width = page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= width, "the page itself scrolls sideways"
    box = page.eval_on_selector(
        "#leaderboard", "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth]"
    )
    if width == 800:
        assert box[0] > box[1], "at 800 px the board's own box should scroll"
    assert (
        one_line(page, '#leaderboard td[data-stat="ci"], #leaderboard td[data-stat="mean"]') == []
    )
    assert one_line(page, "#leaderboard thead th") == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_chart_shows_full_names_and_values_clear_of_whiskers(
    wide_board, login, live_server, width
):
    page = login(make_user("viewer"))
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/leaderboards/demo/")
    labels = page.locator("#board-chart .chart-label").all_inner_texts()
    assert sorted(labels) == sorted(NAMES)
    for run in wide_board["runs"]:
        whisker = page.locator(f'#board-chart .chart-ci[data-run="{run.pk}"]').bounding_box()
        value = page.locator(f'#board-chart .chart-value[data-run="{run.pk}"]').bounding_box()
        label = page.locator(f'#board-chart .chart-label[data-run="{run.pk}"]').bounding_box()
        assert whisker and value and label
        assert whisker["x"] + whisker["width"] <= value["x"], run.label
        assert label["x"] + label["width"] <= whisker["x"], run.label


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", WIDTHS)
def test_compare_pickers_show_full_model_names(wide_board, login, live_server, width):
    a, b = wide_board["runs"][0], wide_board["runs"][1]
    page = login(make_user("viewer"))
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/leaderboards/demo/compare/?a={a.pk}&b={b.pk}")
    for name in ("a", "b"):
        shown, needed = page.eval_on_selector(
            f'#compare-form select[name="{name}"]',
            """s => {
                const probe = document.createElement("span");
                probe.style.font = getComputedStyle(s).font;
                probe.style.whiteSpace = "pre";
                probe.textContent = s.options[s.selectedIndex].text;
                document.body.appendChild(probe);
                const needed = probe.getBoundingClientRect().width;
                probe.remove();
                return [s.clientWidth, needed];
            }""",
        )
        assert shown >= needed, (name, shown, needed)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
