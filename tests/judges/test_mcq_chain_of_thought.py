"""Chain-of-thought multiple-choice answers (issue #29 point 4): the final stated answer wins,
never a letter that is only mentioned; an answer that names two options on purpose reads as
both. The corpus (tests/judges/cot_answers.py) is written by hand in the styles models use."""

import pytest

from apps.judges.parsing import JudgeReplyError, parse_mcq_choice
from tests.judges.cot_answers import STYLES, answers


def read(text: str) -> frozenset[str] | None:
    try:
        return parse_mcq_choice(text, "upper", 4)
    except JudgeReplyError:
        return None


def test_chain_of_thought_answers_read_as_a_careful_reader_would() -> None:
    rows = answers()
    assert len(rows) >= 300 and len(STYLES) >= 50
    wrong = [
        (text, sorted(read(text) or []), sorted(want)) for text, want in rows if read(text) != want
    ]
    agree = len(rows) - len(wrong)
    # Measured on this corpus: 241 of 378 (63.8 %) before this reading order, 378 of 378 after.
    print(
        f"\nchain-of-thought MCQ: {agree} of {len(rows)} read as written ({agree / len(rows):.1%})"
    )
    assert not wrong, wrong[:10]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The example: "B" is only mentioned.
        ("Paris is the capital, so A. London is B, which is wrong.", "A"),
        ("Final answer: \\boxed{C}", "C"),
        ("The options A and B fail. $\\boxed{\\text{D}}$", "D"),
        ("A和B都不对，答案是B。", "B"),
        ("选项A错误，选项 C 正确", "C"),
        ("A is wrong; C is correct.", "C"),
        ("Both A and C are correct.", "AC"),
        ("A and C", "AC"),
        ("We can rule out A and B.\n\n**D**", "D"),
        ("Initially A, but on reflection the answer is D.", "D"),
    ],
)
def test_the_final_stated_answer_wins(text: str, expected: str) -> None:
    assert read(text) == frozenset(expected)


@pytest.mark.parametrize(
    "text",
    [
        "So a good answer would mention the capital.",  # the article, not option A
        "It is a trick question: nothing fits.",
    ],
)
def test_prose_after_a_conclusion_word_is_not_a_pick(text: str) -> None:
    assert read(text) is None
