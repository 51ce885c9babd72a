"""Chat templates and multi-turn runs on the pages (#27.2, #27.3): the template editor writes a
list of messages or the item's conversation, the start form asks turn by turn or says why not,
and an item's page shows its turns."""

import re

import pytest
from django.urls import reverse

from apps.runs.forms import chat_text, parse_chat_text
from apps.runs.models import PromptTemplate, Run
from tests.factories import make_conversation_dataset, make_multi_turn_run

pytestmark = pytest.mark.django_db

FORM = {"fewshot_k": 0, "fewshot_seed": 0}


def test_the_editor_writes_chat_messages_as_marked_text_and_reads_them_back():
    text = "[system]\nBe {{ tone }}.\n\n[user]\nQ: 1 + 1?\n[assistant]\n2\n\n[conversation]\n"
    messages = parse_chat_text(text)
    assert messages == [
        {"role": "system", "content": "Be {{ tone }}."},
        {"role": "user", "content": "Q: 1 + 1?"},
        {"role": "assistant", "content": "2"},
        {"role": "conversation"},
    ]
    assert parse_chat_text(chat_text(messages)) == messages


def test_a_conversation_template_is_saved_shown_and_edited(reviewer_client, task):
    dataset = make_conversation_dataset(task, [["Hi?", "And then?"]])
    response = reviewer_client.post(
        reverse("runs:template-create") + "?task=qa",
        {**FORM, "name": "mt", "shape": "conversation", "system_message": "Be brief."},
    )
    assert response.status_code == 302
    template = PromptTemplate.objects.get()
    assert template.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "conversation"},
    ]
    assert template.user_message == "" and template.sends_conversation
    page = reviewer_client.get(f"{template.get_absolute_url()}?dataset={dataset.pk}")
    text = page.content.decode()
    assert "<h3>The item's conversation</h3>" in text and "And then?" in text  # the preview
    edit = reviewer_client.get(reverse("runs:template-edit", args=[template.pk])).content.decode()
    assert re.search(r'<input type="radio" name="shape" value="conversation"[^>]* checked', edit)


def test_chat_messages_are_saved_and_a_bad_list_is_refused_naming_the_line(reviewer_client, task):
    url = reverse("runs:template-create") + "?task=qa"
    response = reviewer_client.post(
        url,
        {**FORM, "name": "bad", "shape": "chat", "chat_messages": "Hello\n[user]\nQ?"},
    )
    assert response.status_code == 200 and not PromptTemplate.objects.exists()
    assert "Line 1: start each message with a line of its own" in response.content.decode()
    response = reviewer_client.post(
        url, {**FORM, "name": "bad", "shape": "chat", "chat_messages": "[user]\n{% if %}"}
    )
    assert "Message 1 (user) line 1" in response.content.decode()
    chat = "[system]\nGrade.\n[user]\nQ: 1 + 1?\n[assistant]\n2\n[user]\nQ: {{ question }}"
    response = reviewer_client.post(
        url, {**FORM, "name": "few", "shape": "chat", "chat_messages": chat}
    )
    assert response.status_code == 302
    assert [m["role"] for m in PromptTemplate.objects.get().messages] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


def test_a_plain_template_still_needs_its_user_message(reviewer_client, task):
    response = reviewer_client.post(
        reverse("runs:template-create") + "?task=qa", {**FORM, "name": "empty"}
    )
    assert response.status_code == 200 and not PromptTemplate.objects.exists()
    assert "Write the user message" in response.content.decode()


def test_the_start_form_says_why_a_run_cannot_ask_turn_by_turn(
    reviewer_client, task, dataset, endpoint, template
):
    post = {
        "task": "qa",
        "dataset": dataset.pk,
        "endpoint": endpoint.pk,
        "template": template.pk,
        "logging_mode": "failed",
        "chunk_size": 200,
        "multi_turn": "on",
    }
    response = reviewer_client.post(reverse("runs:generation-start"), post)
    assert response.status_code == 200 and not Run.objects.exists()
    assert "has no conversation column" in response.content.decode()
    dialogues = make_conversation_dataset(task, [["Hi?", "And then?"]])
    chat = PromptTemplate.objects.create(task=task, name="mt", messages=[{"role": "conversation"}])
    response = reviewer_client.post(
        reverse("runs:generation-start"), {**post, "dataset": dialogues.pk, "template": chat.pk}
    )
    run = Run.objects.get()
    assert response["Location"] == run.get_absolute_url() and run.multi_turn
    assert "multi-turn" in reviewer_client.get(run.get_absolute_url()).content.decode()


def test_an_items_page_shows_each_turn_with_its_answer_or_error(reviewer_client, task):
    dataset = make_conversation_dataset(task, [["Hi?", "And <b>then</b>?"]])
    run = make_multi_turn_run(dataset, {"d0": ["Hello <script>x</script>", None]})
    item = dataset.items.get()
    page = reviewer_client.get(reverse("runs:response-detail", args=[run.pk, item.pk]))
    text = page.content.decode()
    assert 'id="turn-0-1"' in text and 'id="turn-0-2"' in text
    assert "Turn 2 of 2: the server failed (500): boom" in text
    assert "<script>x</script>" not in text and "<b>then</b>" not in text  # model output escaped
