"""Prompt templates: a sandbox over item fields, seeded few-shot, versions."""

import pytest

from apps.runs.models import PromptTemplate
from apps.runs.prompts import ItemData, PromptError, PromptRenderer, compile_template
from tests.factories import make_qa_dataset


def item(i: int = 1, **fields) -> ItemData:
    fields = fields or {"question": f"q{i}", "meta": {"lang": "en"}, "choices": ["A", "B"]}
    return ItemData(id=i, dataset_id=1, key=f"k{i}", position=i, fields=fields, reference="ref")


def render(user: str, system: str = "", it: ItemData | None = None, **template_fields) -> list:
    template = PromptTemplate(
        task_id=1, name="t", system_message=system, user_message=user, **template_fields
    )
    return PromptRenderer(template).render(it or item()).messages


def test_fields_render_by_name_through_item_and_nested():
    messages = render(
        "{{ question }}|{{ item.question }}|{{ meta.lang }}|{{ choices.1 }}|{{ key }}|{{ reference }}",
        system="sys {{ question|upper }}",
    )
    assert messages == [
        {"role": "system", "content": "sys Q1"},
        {"role": "user", "content": "q1|q1|en|B|k1|ref"},
    ]


def test_list_and_object_fields_read_as_json_as_on_pages_and_in_judge_prompts():
    """#28.6: a list field was comma-joined without brackets in generation prompts, JSON in
    judge prompts and on pages; one rendering (`as_text`) everywhere now."""
    from apps.datasets.values import as_text

    fields = {"choices": ["Paris, France", "Lyon"], "meta": {"lang": "日本語"}}
    [message] = render("{{ choices }} | {{ meta }}", it=item(**fields))
    assert message["content"] == '["Paris, France", "Lyon"] | {"lang": "日本語"}'
    assert message["content"] == f"{as_text(fields['choices'])} | {as_text(fields['meta'])}"


def test_no_html_escaping_in_prompts():
    assert render("{{ question }}", it=item(question="<b>&'\"</b>"))[0]["content"] == "<b>&'\"</b>"


@pytest.mark.parametrize(
    "source",
    [
        "{{ settings.SECRET_KEY }}",
        "{{ item.keys }}",
        "{{ item.items }}",
        "{{ item.clear }}{{ item.question }}",
        "{{ choices.pop }}{{ choices.append }}",
        "{{ meta.get }}",
        "{{ request.user }}",
        "{{ view }}{{ csrf_token }}{{ perms }}",
    ],
)
def test_templates_read_item_fields_and_nothing_else(settings, source):
    it = item()
    text = render(source, it=it)[0]["content"]
    assert settings.SECRET_KEY not in text
    assert "function" not in text and "method" not in text and "dict_" not in text
    assert text in ("", "q1")
    # Nothing was changed through a method call either.
    assert it.fields["choices"] == ["A", "B"] and it.fields["meta"] == {"lang": "en"}


@pytest.mark.parametrize(
    "source",
    [
        "{{ item.__class__ }}",
        "{{ question.__class__.__mro__ }}",
        "{{ item._data }}",
        "{% debug %}",
        "{% load static %}",
        "{% include 'base.html' %}",
        "{% extends 'base.html' %}",
        "{% url 'runs:list' %}",
        "{% csrf_token %}",
        "{{ question|pprint }}",
    ],
)
def test_dangerous_syntax_is_refused_with_a_clear_error(source):
    with pytest.raises(PromptError) as excinfo:
        compile_template(source, "User message")
    # The message and the line are named (Django's own words sometimes name the line).
    assert str(excinfo.value).startswith("User message") and "line 1" in str(excinfo.value)


def test_unknown_variables_are_reported_in_preview(task):
    template = PromptTemplate(task=task, name="t", user_message="{{ question }} {{ context }}")
    rendered = PromptRenderer(template).render(item(), preview=True)
    assert rendered.missing == ["context"]
    assert rendered.messages[0]["content"] == "q1 "  # rendered empty, marks removed


@pytest.mark.django_db
def test_fewshot_is_seeded_deterministic_and_never_the_item_itself(task):
    dataset = make_qa_dataset(task, 12)
    template = PromptTemplate.objects.create(
        task=task,
        name="fs",
        user_message="{{ examples }}\n---\n{{ question }}",
        fewshot_k=3,
        fewshot_seed=7,
        fewshot_format="Q: {{ question }} A: {{ reference }}",
    )
    items = [ItemData.from_values(r) for r in dataset.items.values(*ItemData.VALUES)]
    first = PromptRenderer.for_template(template, dataset.pk)
    second = PromptRenderer.for_template(template, dataset.pk)  # another "process"
    draws = {}
    for it in items:
        a, b = first.render(it), second.render(it)
        assert a.messages == b.messages
        assert len(a.examples) == 3
        assert it.id not in {ex.id for ex in a.examples}
        assert a.messages[0]["content"].endswith(f"---\n{it.fields['question']}")
        assert f"Q: {it.fields['question']} A:" not in a.messages[0]["content"]
        draws[it.key] = tuple(ex.key for ex in a.examples)
    assert len(set(draws.values())) > 1  # drawn per item, not one fixed set

    template.fewshot_seed = 8
    other = PromptRenderer.for_template(template, dataset.pk)
    assert any(tuple(ex.key for ex in other.render(it).examples) != draws[it.key] for it in items)


@pytest.mark.django_db
def test_fewshot_goes_before_the_user_message_when_not_placed(task):
    dataset = make_qa_dataset(task, 2)
    template = PromptTemplate.objects.create(
        task=task, name="fs", user_message="Now: {{ question }}", fewshot_k=5
    )
    it = ItemData.from_values(dataset.items.values(*ItemData.VALUES).get(position=0))
    rendered = PromptRenderer.for_template(template, dataset.pk).render(it)
    # Only one other item exists: k is capped by the pool, and never the item itself.
    assert [ex.key for ex in rendered.examples] == ["q1"]
    assert (
        rendered.messages[-1]["content"]
        == "question: What is 1 + 1?\nAnswer: 2\n\nNow: What is 0 + 0?"
    )


@pytest.mark.django_db
def test_each_edit_makes_a_new_version_and_old_ones_stay(task, reviewer_user):
    first = PromptTemplate.objects.create(task=task, name="qa", user_message="v1 {{ question }}")
    edited = PromptTemplate.objects.get(pk=first.pk)
    edited.user_message = "v2 {{ question }}"
    second = edited.save_as_new_version(reviewer_user)
    assert (second.version, second.pk != first.pk) == (2, True)
    first.refresh_from_db()
    assert first.user_message == "v1 {{ question }}"
    assert list(PromptTemplate.objects.latest_versions().values_list("version", flat=True)) == [2]


# ---- chat templates (#27.2) ------------------------------------------------------------------
CHAT = [{"role": "user", "content": "Hi?"}, {"role": "user", "content": "Again?"}]


def chat(messages: list, it: ItemData | None = None, **kwargs) -> list:
    template = PromptTemplate(task_id=1, name="c", messages=messages)
    return PromptRenderer(template).render(it or item(), **kwargs).messages


def test_a_chat_template_is_a_list_of_messages_with_few_shot_assistant_turns():
    messages = chat(
        [
            {"role": "system", "content": "You grade {{ meta.lang }} answers."},
            {"role": "user", "content": "Q: 1 + 1?"},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": "Q: {{ question }}?"},
        ]
    )
    assert messages == [
        {"role": "system", "content": "You grade en answers."},
        {"role": "user", "content": "Q: 1 + 1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "Q: q1?"},
    ]


def test_the_items_conversation_with_an_optional_system_message():
    it = ItemData(id=2, dataset_id=1, key="d2", position=0, fields={"c": "x"}, conversation=CHAT)
    template = [
        {"role": "system", "content": "{% if c == 'x' %}Be kind.{% endif %}"},
        {"role": "conversation"},
    ]
    assert chat(template, it) == [{"role": "system", "content": "Be kind."}, *CHAT]
    # An empty system message (its condition false) is not sent.
    other = ItemData(id=3, dataset_id=1, key="d3", position=1, fields={"c": "y"}, conversation=CHAT)
    assert chat(template, other) == CHAT
    # Turn by turn: up to the turn asked, the earlier answers in place.
    assert chat(template, it, turn=2, answers=["Hello."]) == [
        {"role": "system", "content": "Be kind."},
        CHAT[0],
        {"role": "assistant", "content": "Hello."},
        CHAT[1],
    ]
    # A plain item has no conversation to send: the error names it.
    with pytest.raises(PromptError, match="Item k1 has no conversation"):
        chat(template)


def test_a_template_that_fails_to_render_names_the_item_the_message_and_the_line():
    template = [
        {"role": "system", "content": "Grade."},
        {"role": "user", "content": "Q: {{ question }}\nNumber: {{ question|divisibleby:2 }}"},
    ]
    with pytest.raises(PromptError) as excinfo:
        chat(template)
    assert str(excinfo.value).startswith("Rendering failed on item k1: Message 2 (user) line 2: ")
    with pytest.raises(PromptError) as excinfo:
        render("ok\n{{ question|divisibleby:2 }}")
    assert str(excinfo.value).startswith("Rendering failed on item k1: User message line 2: ")
    with pytest.raises(PromptError, match=r"^Message 1 \(user\) line 3: "):
        chat([{"role": "user", "content": "a\nb\n{% if %}"}])


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "A chat template is a non-empty list of messages."),
        ([{"role": "bot", "content": "x"}], "Message 1: role 'bot' is not one of"),
        ([{"role": "user", "content": " "}], "Message 1 (user) is empty."),
        ([{"role": "conversation"}] * 2, "The item's conversation can be sent once"),
        ([{"role": "system", "content": "s"}], "needs a user message or the item's conversation"),
    ],
)
def test_bad_chat_templates_are_refused_in_plain_words(messages, problem):
    from apps.runs.prompts import check_messages

    assert problem in " ".join(check_messages(messages))
