"""In Chromium at 1280 and 800 px (issue #11.14): a button's words stay on one line ("New /
task", "Upload / dataset" and "Retry / this / item" wrapped inside their buttons)."""

import pytest
from playwright.sync_api import Page

from tests import factories as f
from tests.base import make_user

WIDTHS = [1280, 800]


@pytest.fixture
def pages(db) -> list[str]:
    task = f.make_task("button-check")
    dataset = f.make_items(task, 4, name="questions")
    judge = f.make_judge(task, name="quality", subjects=[{"name": "accuracy", "min": 1, "max": 5}])
    generation = f.make_generation_run(dataset, {}, label="some model")
    run = f.make_judge_run(dataset, judge, source_run=generation)
    f.add_scores(run, {"k0": {"accuracy": None}, "k1": {"accuracy": 3}})
    first = dataset.items.get(key="k0")
    return [
        "/tasks/",
        task.get_absolute_url(),
        dataset.get_absolute_url(),
        generation.get_absolute_url(),
        run.get_absolute_url(),
        f"/judges/runs/{run.pk}/failed/",
        f"/review/run/{run.pk}/",
        f"/review/run/{run.pk}/item/{first.pk}/",
        "/runs/endpoints/",
    ]


def wrapped_buttons(page: Page) -> list[str]:
    """Visible buttons whose label the browser laid out on more than one line."""
    return page.eval_on_selector_all(
        "button, .button, input[type=submit]",
        """els => els.filter(el => el.offsetParent !== null).filter(el => {
            const style = getComputedStyle(el);
            const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2;
            const inner = el.clientHeight - parseFloat(style.paddingTop)
                - parseFloat(style.paddingBottom);
            return inner > line * 1.5;
        }).map(el => el.textContent.trim().replace(/\\s+/g, " "))""",
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", WIDTHS)
def test_no_button_wraps_its_label(pages, login, live_server, width):
    page = login(make_user("admin"))
    page.set_viewport_size({"width": width, "height": 900})
    wrapped = {}
    checked = 0
    for path in pages:
        page.goto(f"{live_server.url}{path}")
        checked += page.locator("button:visible, .button:visible").count()
        if found := wrapped_buttons(page):
            wrapped[path] = found
    assert checked > 20, checked  # the pages did show their buttons
    assert wrapped == {}, wrapped


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_runs_numbers_fit_its_card_at_800_px(pages, login, live_server):
    """The one-row numbers table ran past the card at 800 px (Finished cut off)."""
    page = login(make_user("viewer"))
    page.set_viewport_size({"width": 800, "height": 900})
    for path in pages[3:5]:  # a generation run and a judge run
        page.goto(f"{live_server.url}{path}")
        overflow = page.eval_on_selector(
            "#run-numbers",
            """el => el.getBoundingClientRect().right
                    - el.closest('.card').getBoundingClientRect().right""",
        )
        assert overflow <= 0, (path, overflow)
        assert page.locator("#run-numbers").inner_text().count("\n") > 10  # every number shown
