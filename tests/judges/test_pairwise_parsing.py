"""Reading a pairwise judge's verdict (#13.1): JSON first, then MT-Bench's [[A]]/[[B]]/[[C]],
then a labelled line; anything else fails with a message saying what was expected."""

import pytest

from apps.judges.parsing import JudgeReplyError, PairwiseResult, parse_pairwise_reply


@pytest.mark.parametrize(
    ("reply", "verdict", "repaired"),
    [
        ('{"verdict": "A", "reason": "clearer"}', "A", False),
        ('```json\n{"Winner": "answer b", "explanation": "x"}\n```', "B", False),
        ("{'better': 'tie', 'reason': 'same',}", "tie", False),  # repaired JSON is still JSON
        ('{"verdict": "equal"}', "tie", False),
        ("Assistant A rambles; [[B]] is the better one.", "B", True),
        ("First I thought [[A]] but on reflection [[C]]", "tie", True),
        ("Both are fine.\nFinal verdict: Answer A", "A", True),
        ("Winner - (B)", "B", True),
        ("verdict: DRAW", "tie", True),
    ],
)
def test_verdicts_are_read_tolerantly(reply: str, verdict: str, repaired: bool) -> None:
    found = parse_pairwise_reply(reply)
    assert (found.verdict, found.repaired) == (verdict, repaired)


def test_the_reason_comes_along() -> None:
    assert parse_pairwise_reply('{"verdict": "B", "reasoning": "cites the source"}') == (
        PairwiseResult("B", "cites the source")
    )


@pytest.mark.parametrize(
    "reply",
    ["", "I like the second one", '{"score": 4}', '{"verdict": "maybe"}', "A is good, B too"],
)
def test_no_verdict_is_a_clear_failure(reply: str) -> None:
    with pytest.raises(JudgeReplyError, match="No verdict in the reply") as caught:
        parse_pairwise_reply(reply)
    assert caught.value.kind == "unparseable"
