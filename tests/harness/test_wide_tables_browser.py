"""Wide tables show where they are cut (#28.6): a long token breaks inside its cell, a table
wider than the page fades at the side that hides columns, and its first column stays put."""

import re

import pytest
from playwright.sync_api import expect

from tests.base import make_user
from tests.factories import make_generation_run, make_qa_dataset, make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _wrap_state(page) -> dict:
    return page.eval_on_selector(
        "#responses .table-wrap",
        """wrap => ({overflow: wrap.scrollWidth - wrap.clientWidth,
                     classes: [...wrap.classList].sort(),
                     sticky: getComputedStyle(wrap.querySelector('td')).position})""",
    )


def test_a_long_token_breaks_and_a_cut_table_says_so(login, live_server) -> None:
    run = make_generation_run(make_qa_dataset(make_task(), 3), {0: "x" * 2000, 1: "fine"})
    page = login(make_user("viewer"), run.get_absolute_url())
    page.set_viewport_size({"width": 1280, "height": 800})
    page.reload()
    wide = _wrap_state(page)
    assert wide["overflow"] <= 1 and wide["classes"] == ["table-wrap"], wide

    page.set_viewport_size({"width": 420, "height": 800})
    expect(page.locator("#responses .table-wrap")).to_have_class(re.compile("more-right"))
    cut = _wrap_state(page)
    assert cut["overflow"] > 1 and cut["sticky"] == "sticky", cut
    page.eval_on_selector("#responses .table-wrap", "wrap => { wrap.scrollLeft = 99999; }")
    expect(page.locator("#responses .table-wrap")).to_have_class(re.compile("more-left"))
    assert _wrap_state(page)["classes"] == ["more-left", "table-wrap"]
