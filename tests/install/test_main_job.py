"""The main job, through the users' running install, as a person does it with the web pages
(forms read off the pages, defaults kept): Test connection, a generation run and an LLM rubric
judge run over the demo dataset against the loopback OpenAI-compatible server, an override
with a reason, the leaderboard and a CSV export.

On the main before the runtime requirements were fixed, Test connection answered HTTP 500
and both runs failed within a second: the SDK's aiohttp transport was only in the test venv."""

import csv
import io
import re

from tests.install.conftest import ADMIN, Install
from tests.install.web import WebSession, counters, wait_for_run
from tests.llm_server import LLMServer

KEY = "sk-install-stage-0123456789abcdef"
JUDGE_REPLY = '{"correctness": 4, "reason": "Right letter, no working shown."}'
DEMO_ITEMS = 12


def test_the_main_job_works_from_the_users_install(install: Install, llm_server: LLMServer):
    llm_server.configure(
        require_key=KEY,
        default_reply="The answer is B.",
        script=[{"scope": "any", "match": "correctness", "reply": JUDGE_REPLY}],
    )
    web = WebSession(install.url)
    web.login(*ADMIN)

    # An endpoint with its key, and Test connection.
    form = web.get("/runs/endpoints/new/").form()
    endpoints = web.submit(
        form, name="loopback", base_url=llm_server.base_url, model="test-model", new_api_key=KEY
    )
    assert KEY not in endpoints.text
    tested = web.submit(endpoints.form("/test/"))
    assert "loopback: Connected: test-model answered “The answer is B.”" in tested.text_only()

    # A prompt template and a generation run over the demo dataset.
    form = web.get("/runs/prompts/new/?task=demo-mcq").form()
    web.submit(
        form,
        name="letter-only",
        system_message="Answer with the letter of the right option.",
        user_message="{{ question }}\nA. {{ A }}\nB. {{ B }}\nC. {{ C }}\nD. {{ D }}",
    )
    form = web.get("/runs/new/generation/?task=demo-mcq").form("/start/")
    form.choose("dataset", "general-knowledge-mcq")
    form.choose("endpoint", "loopback")
    form.choose("template", "letter-only")
    started = web.submit(form, label="loopback-gen")
    generation = wait_for_run(web, started.url)
    assert 'data-status="completed"' in generation.text, generation.text_only()
    assert counters(generation) == (DEMO_ITEMS, 0, DEMO_ITEMS)
    assert generation.text_only().count("The answer is B.") == DEMO_ITEMS
    sent = llm_server.stats()["log"]
    prompts = [entry for entry in sent if "Which planet is known as the Red Planet?" in str(entry)]
    assert prompts, sent[:2]

    # An LLM rubric judge over those responses.
    form = web.get("/judges/new/?task=demo-mcq").form()
    form.choose("kind", "LLM rubric")
    judge = web.submit(form, name="correctness-judge", subjects_text="correctness 1 5")
    form = judge.form("/start/")
    form.choose("responses", "loopback-gen")
    form.choose("endpoint", "loopback")
    judged = wait_for_run(web, web.submit(form).url)
    assert 'data-status="completed"' in judged.text, judged.text_only()
    assert counters(judged) == (DEMO_ITEMS, 0, DEMO_ITEMS)
    judge_run_id = re.search(r"/runs/(\d+)/$", judged.url).group(1)

    # An override with a reason, kept in the item's history.
    review = web.get(f"/review/run/{judge_run_id}/")
    first_item = review.links(rf"/review/run/{judge_run_id}/item/\d+/$")[0]
    item = web.get(first_item)
    assert "Which planet is known as the Red Planet?" in item.text_only()
    reason = "Picks B without reading the options"
    overridden = web.submit(item.form("/override/"), value="2", reason=reason)
    history = overridden.text_only()
    assert "correctness: overridden." in history
    assert re.search(rf"admin Override 4 2 {reason}", history), history

    # The leaderboard: judge-only beside human-corrected for the generation run.
    board = web.get("/leaderboards/demo-mcq/")
    picker = board.get_form("judge")
    picker.choose("judge", "correctness-judge")
    board = web.search(picker)
    row = re.search(r"loopback-gen .*?(?=\s\d+ model_|\sJudge-only)", board.text_only())
    assert row, board.text_only()
    # 11 items at 4 and the overridden one at 2: judge 4.00, human 46/12 = 3.83, n 12, 1 overridden.
    assert re.search(r"\b4\.00 3\.83 \[[\d.]+, [\d.]+\] 3\.83 100\.0% 12 0 1\b", row.group(0)), (
        row.group(0)
    )

    # The run's CSV export, parsed.
    export = web.get(f"/leaderboards/runs/{judge_run_id}/export/?format=csv")
    assert export.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(export.text.lstrip("\ufeff"))))
    assert len(rows) == DEMO_ITEMS
    by_key = {row["key"]: row for row in rows}
    assert by_key["q01"]["correctness.judge"] == "4.0"
    assert by_key["q01"]["correctness.final"] == "2.0"
    assert by_key["q01"]["correctness.override_reason"] == reason
    assert by_key["q01"]["correctness.reviewer"] == "admin"
    assert {row["correctness.final"] for key, row in by_key.items() if key != "q01"} == {"4.0"}
    assert {row["response"] for row in rows} == {"The answer is B."}
    assert KEY not in export.text
