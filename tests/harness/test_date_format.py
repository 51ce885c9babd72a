"""#11.15: one way to write a moment on every page (2026-11-23 09:26), not three."""

import re
from datetime import UTC, datetime
from pathlib import Path

from django.template import Context, Template

ROOT = Path(__file__).resolve().parents[2]
MOMENT = datetime(2026, 11, 23, 9, 26, 5, tzinfo=UTC)
# A time of day inside one run's attempt timeline, to the second (retries, Retry-After).
TIME_ONLY = {"templates/runs/response_detail.html": ['|date:"H:i:s"']}


def test_templates_name_the_one_format_instead_of_spelling_their_own():
    found = {}
    for path in sorted((ROOT / "templates").rglob("*.html")):
        name = str(path.relative_to(ROOT))
        uses = re.findall(r'\|(?:date|time):"[^"]*"', path.read_text())
        own = [use for use in uses if "_FORMAT" not in use and use not in TIME_ONLY.get(name, [])]
        if own:
            found[name] = own
    assert found == {}, found


def test_the_format_reads_year_month_day_hour_minute(settings):
    settings.TIME_ZONE = "UTC"
    rendered = Template('{{ t }}|{{ t|date:"DATETIME_FORMAT" }}|{{ t|date }}|{{ t|time }}').render(
        Context({"t": MOMENT})
    )
    assert rendered == "2026-11-23 09:26|2026-11-23 09:26|2026-11-23|09:26"
