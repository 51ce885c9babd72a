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
    assert str(excinfo.value).startswith("User message:")


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
