"""Judge prompts: default messages, custom templates, sandboxed substitution."""

import pytest

from apps.judges.judge_prompts import (
    PromptError,
    build_mcq_judge_messages,
    build_rubric_messages,
    placeholders,
    render,
)
from apps.judges.parsing import parse_mcq_choice, parse_rubric_reply

SUBJECTS = [{"name": "accuracy", "min": 1, "max": 5}, {"name": "clarity", "min": 0, "max": 1}]


def test_default_rubric_messages_hold_subjects_format_inputs_reference_and_response() -> None:
    messages = build_rubric_messages(
        subjects=SUBJECTS,
        response="Paris is the capital.",
        reference="Paris",
        fields={"question": "Capital of France?", "n": 3},
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "- accuracy: 1 to 5\n- clarity: 0 to 1" in system
    assert (
        '{"reason": "<one or two sentences>", "accuracy": <number from 1 to 5>, '
        '"clarity": <number from 0 to 1>}'
    ) in system
    assert user == (
        "<task>\nquestion: Capital of France?\nn: 3\n</task>\n\n"
        "<reference>\nParis\n</reference>\n\n"
        "<response>\nParis is the capital.\n</response>"
    )


def test_default_rubric_user_message_leaves_out_an_empty_reference_and_shows_only_inputs() -> None:
    messages = build_rubric_messages(
        subjects=SUBJECTS,
        response="ok",
        fields={"question": "Q?", "secret_answer": "hidden"},
        inputs={"question": "Q?"},
    )
    assert messages[1]["content"] == "<task>\nquestion: Q?\n</task>\n\n<response>\nok\n</response>"


def test_custom_rubric_prompts_render_fields_and_judge_variables() -> None:
    messages = build_rubric_messages(
        subjects=SUBJECTS,
        response="R",
        reference="REF",
        fields={"question": "Q", "tags": ["a", "b"]},
        system_prompt="Judge {{ subject_names }}.",
        user_prompt="{{question}} | {{ tags }} | {{ response }} | {{ reference }} | {{ json_format }}",
    )
    assert messages[0] == {"role": "system", "content": "Judge accuracy, clarity."}
    assert messages[1]["content"].startswith('Q | ["a", "b"] | R | REF | {"reason"')


def test_judge_variables_win_over_item_fields_of_the_same_name() -> None:
    messages = build_rubric_messages(
        subjects=SUBJECTS,
        response="the judged response",
        fields={"response": "a column called response"},
        user_prompt="{{ response }}",
    )
    assert messages[1]["content"] == "the judged response"


def test_hostile_response_is_sent_verbatim_never_expanded() -> None:
    hostile = "{{ reference }} {% debug %} {{ settings.SECRET_KEY }} <b>"
    messages = build_rubric_messages(
        subjects=SUBJECTS, response=hostile, reference="REF", user_prompt="[{{ response }}]"
    )
    assert messages[1]["content"] == f"[{hostile}]"


def test_an_unknown_placeholder_names_itself_and_what_exists() -> None:
    with pytest.raises(PromptError) as caught:
        render("{{ question }} {{ answer.upper }}", {"question": "Q", "response": "R"})
    # An expression makes the template Jinja2 (#27.6): the name it lacks, with its line.
    assert str(caught.value) == (
        "The prompt, line 1 uses {{ answer }}, which the item does not have; "
        "available: question, response."
    )


def test_empty_system_prompt_result_is_dropped() -> None:
    messages = build_rubric_messages(
        subjects=SUBJECTS, response="R", system_prompt="{{ empty }}", fields={"empty": ""}
    )
    assert [m["role"] for m in messages] == ["user"]


def test_placeholders_lists_names_once_in_order() -> None:
    assert placeholders("{{ a }}{{b}} {{ a }} {c} {{ d e }}") == ["a", "b", "d e"]


def test_default_mcq_messages_list_labels_and_leave_the_answer_key_out() -> None:
    messages = build_mcq_judge_messages(
        response="I'd say the second one, B.",
        label_type="upper",
        label_count=4,
        fields={"question": "Pick one", "answer": "B"},
        inputs={"question": "Pick one"},
        reference="B",
    )
    system, user = messages[0]["content"], messages[1]["content"]
    assert "The options are labelled A, B, C, D." in system
    assert 'reply "N"' in system
    assert (
        user
        == "<task>\nquestion: Pick one\n</task>\n\n<response>\nI'd say the second one, B.\n</response>"
    )
    assert "<reference>" not in user


def test_custom_mcq_prompt_may_use_labels_count_and_reference() -> None:
    messages = build_mcq_judge_messages(
        response="R",
        label_type="digit",
        label_count=3,
        reference="2",
        system_prompt="",
        user_prompt="{{ labels }} / {{ label_count }} / {{ reference }}",
    )
    assert messages[1]["content"] == "1, 2, 3 / 3 / 2"


def test_a_custom_renderer_is_used_for_both_messages() -> None:
    calls = []

    def shout(template: str, context: dict) -> str:
        calls.append(template)
        return render(template, context).upper()

    messages = build_mcq_judge_messages(
        response="r",
        label_type="lower",
        label_count=2,
        user_prompt="{{ response }}",
        renderer=shout,
    )
    assert messages[1]["content"] == "R"
    assert len(calls) == 2


def test_replies_in_the_requested_formats_parse() -> None:
    rubric_reply = '{"reason": "fine", "accuracy": 4, "clarity": 1}'
    assert parse_rubric_reply(rubric_reply, SUBJECTS).values == {"accuracy": 4.0, "clarity": 1.0}
    assert parse_mcq_choice("A, C", "upper", 4) == frozenset("AC")
    assert parse_mcq_choice("N", "upper", 4) == frozenset()
