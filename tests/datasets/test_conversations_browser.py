"""In Chromium: MT-Bench's question file uploaded as a user would, its turns read as a
conversation, each item shown as a dialogue with its per-turn references."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from apps.datasets.models import Dataset, Task
from tests.base import make_user

QUESTIONS = Path(__file__).resolve().parent.parent / "fixtures" / "mt_bench" / "question.jsonl"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_mt_bench_questions_upload_as_conversations(login, live_server):
    task = Task.objects.create(slug="mt-bench", name="MT-Bench")
    page = login(make_user("reviewer"), f"/tasks/{task.slug}/")
    page.click("#upload-dataset")
    page.set_input_files("input[name=file]", str(QUESTIONS))
    page.click("text=Upload and preview")

    expect(page.locator("select[name=conversation_column]")).to_have_value("turns")
    expect(page.locator("select[name=id_column]")).to_have_value("question_id")
    expect(page.locator("select[name=reference_column]")).to_have_value("reference")
    page.click("#import-button")

    page.wait_for_url(re.compile(r"/datasets/\d+/$"))
    dataset = Dataset.objects.get()
    assert dataset.conversation_column == "turns"
    expect(page.locator("#row-count")).to_have_text("4")
    expect(page.locator("#item-table")).to_contain_text("User: Compose an engaging travel blog")

    page.click("#item-table >> text=101")
    dialogue = page.locator("#conversation .chat-row")
    expect(dialogue).to_have_count(2)
    expect(dialogue.nth(0).locator(".bubble-role")).to_have_text("user")
    expect(dialogue.nth(0)).to_contain_text("turn 1")
    expect(dialogue.nth(0).locator(".turn-reference")).to_contain_text("You are in second place.")
    expect(dialogue.nth(1).locator(".turn-reference")).to_contain_text("Uncertain.")
