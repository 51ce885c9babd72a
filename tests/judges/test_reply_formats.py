"""Rubric replies in the formats judges are asked for (Judge.reply_format), in the shapes real
models write them: the final verdict wins, reasoning is set aside, and every reply that cannot
be read fails with the reason."""

import pytest

from apps.judges.parsing import (
    MISSING_SUBJECT,
    OUT_OF_RANGE,
    UNPARSEABLE,
    JudgeReplyError,
    compile_reply_pattern,
    parse_rubric_reply,
    strip_reasoning,
)

TEN = [{"name": "rating", "min": 1, "max": 10}]
FIVE = [{"name": "score", "min": 1, "max": 5}]
TWO = [{"name": "accuracy", "min": 1, "max": 5}, {"name": "clarity", "min": 1, "max": 5}]
# MT-Bench's own instruction (FastChat, fastchat/llm_judge/data/judge_prompts.jsonl, single-v1).
MT_BENCH_ASK = (
    "After providing your explanation, you must rate the response on a scale of 1 to 10 by "
    'strictly following this format: "[[rating]]", for example: "Rating: [[5]]".'
)

# Judge replies as MT-Bench's judges write them (GPT-4's single-v1 / single-math-v1 shape, and
# the same from reasoning, chatty and Chinese-speaking judges), with the rating a careful
# reader takes. Under the JSON format every one of these fails: that is how MT-Bench scored
# 0 of 80.
MT_BENCH_REPLIES = [
    ("The assistant's answer is helpful, relevant and accurate. It describes the key sights of "
     "Hawaii with vivid detail and a personal tone, which suits a travel blog post. It could "
     "mention more cultural experiences.\n\nRating: [[8]]", 8),
    ("The assistant's answer is incorrect. The reference answer gives 12 as the area of the "
     "triangle, while the assistant computed 6 by halving twice. The method is otherwise "
     "clear.\n\nRating: [[2]]", 2),
    ("Explanation: The response follows the instructions exactly, rewriting the email in a "
     "formal tone.\n\nRating: [[10]]", 10),
    ("The response is mostly correct but misses the edge case n = 0 in the second step "
     "(1, 2, 3 are handled).\n\nRating: **[[6]]**", 6),
    ("The assistant provides a clear, well-structured answer.\n\nRating: [[7.5]]", 7.5),
    ("<think>The user wants me to rate this. The answer gives 3 reasons... maybe [[6]]? "
     "Actually the third reason is wrong, but it is well written. I'd say 7.</think>\n\n"
     "The answer gives three reasons; the third is inaccurate, the rest is well argued.\n\n"
     "Rating: [[7]]", 7),
    ('I will evaluate the response and then rate it by strictly following the format '
     '"[[rating]]", for example: "Rating: [[5]]".\n\nThe poem keeps the requested rhyme scheme '
     "and is moving.\n\nRating: [[9]]", 9),
    ("The code is correct and runs in O(n) time as asked.\n\nRating: [[9]]\n\nLet me know if "
     "you would like me to evaluate other answers (e.g. rating 3 more).", 9),
    ("助手的回答准确地解释了光合作用的过程，但缺少对暗反应的说明。\n\n评分：[[7]]", 7),
    ("The answer is wrong: it says 5 apples instead of 4.\n\nRating: [[1]]", 1),
    ("First impression: Rating: [[4]]. On a closer reading the answer does cover the second "
     "part of the question, which I missed.\n\nFinal rating: [[6]]", 6),
    ("The response is concise and correct.\n\nRating: [8]", 8),
    ("Ｔｈｅ ａｎｓｗｅｒ ｉｓ ｆｉｎｅ．\n\nRating: ［［８］］", 8),
    ("回答准确，但缺少例子。\n\n评分：【【7】】", 7),  # lenticular brackets, which NFKC keeps
    ("**Rating:** [[8]]", 8),
    ("The poem is vivid.\n\nRating: [[7]]\n\n(The format asked for is [[rating]], e.g. [[5]].)", 7),
]  # fmt: skip


@pytest.mark.parametrize(("reply", "rating"), MT_BENCH_REPLIES)
def test_mt_bench_replies_score_in_the_brackets_format(reply: str, rating: float) -> None:
    result = parse_rubric_reply(reply, TEN, reply_format="brackets")
    assert result.values == {"rating": rating}
    assert result.reason  # the explanation is kept


def test_mt_bench_replies_do_not_read_as_json() -> None:
    failed = 0
    for reply, _ in MT_BENCH_REPLIES:
        with pytest.raises(JudgeReplyError):
            parse_rubric_reply(reply, TEN)
        failed += 1
    assert failed == len(MT_BENCH_REPLIES)


def test_mt_bench_reply_records_which_verdict_was_taken() -> None:
    reply = MT_BENCH_REPLIES[10][0]
    result = parse_rubric_reply(reply, TEN, reply_format="brackets")
    assert result.values == {"rating": 6}
    assert result.reading == "took the last of 2 verdicts, '[[6]]' (earlier: [[4]])"
    assert result.repaired  # two verdicts that disagree: worth a person's look


def test_an_echoed_format_example_is_skipped_and_noted() -> None:
    result = parse_rubric_reply(MT_BENCH_REPLIES[6][0], TEN, reply_format="brackets")
    assert result.values == {"rating": 9}
    assert result.reading == "skipped 1 quoted example(s) ([[5]])"
    assert not result.repaired


def test_a_think_block_is_set_aside_and_noted() -> None:
    result = parse_rubric_reply(MT_BENCH_REPLIES[5][0], TEN, reply_format="brackets")
    assert result.reading == "set aside the reasoning (<think>)"
    assert "<think>" not in result.reason


@pytest.mark.parametrize(
    ("reply", "fmt", "subjects", "values"),
    [
        # Prometheus: feedback, then [RESULT] N.
        ("Feedback: The response addresses most criteria but lacks examples. [RESULT] 4", "result", FIVE, {"score": 4}),
        ("Feedback: Clear and correct.\n[RESULT] (5)", "result", FIVE, {"score": 5}),
        ("Feedback: ... the score would be 2 ... on reflection it earns more. [RESULT]: 3", "result", FIVE, {"score": 3}),
        ("[RESULT] 2\n\nFeedback: wrong units. [RESULT] 1", "result", FIVE, {"score": 1}),
        # Score: N/M, with Markdown, words and CJK.
        ("The answer is complete.\n\n**Score:** 4/5", "score", FIVE, {"score": 4}),
        ("Explanation: minor slips.\nScore: **3** / 5", "score", FIVE, {"score": 3}),
        ("I give it a score of 2 out of 5.", "score", FIVE, {"score": 2}),
        ("Overall rating: 5/5 — excellent.", "score", FIVE, {"score": 5}),
        ("回答基本正确。\n总评分：4分", "score", FIVE, {"score": 4}),
        ("Score: 2/5 (draft)\n\nAfter checking the sources again: Score: 3/5", "score", FIVE, {"score": 3}),
        ("Accuracy: 4/5\nClarity: 3/5\n\nThe answer is right but hard to follow.", "score", TWO, {"accuracy": 4, "clarity": 3}),
        ("- **Accuracy**: 5\n- **Clarity**: 4", "score", TWO, {"accuracy": 5, "clarity": 4}),
        ("Draft: accuracy 2, clarity 2.\nFinal: Accuracy: 4, Clarity: 5", "score", TWO, {"accuracy": 4, "clarity": 5}),
        # The last number; "N/M" and "N out of M" read as N.
        ("The response is good, so I give it a 4.", "last_number", FIVE, {"score": 4}),
        ("It covers 3 of the 4 points. Final: 4/5", "last_number", FIVE, {"score": 4}),
        ("It is worth 3 out of 5.", "last_number", FIVE, {"score": 3}),
        ("<think>maybe 2</think>4", "last_number", FIVE, {"score": 4}),
        ("Final answer: **4**/5.", "last_number", FIVE, {"score": 4}),
        ("I'd rate it **4**.", "last_number", FIVE, {"score": 4}),
        ("**[RESULT]** 4", "result", FIVE, {"score": 4}),
        ("反馈：回答准确。[RESULT] 4", "result", FIVE, {"score": 4}),
        # A regular expression with a named group per subject; the last match counts.
        ("ACC=2 CLR=2\nrevised: ACC=4 CLR=3", "regex", TWO, {"accuracy": 4, "clarity": 3}),
    ],
)  # fmt: skip
def test_reply_formats(reply: str, fmt: str, subjects: list, values: dict) -> None:
    pattern = r"ACC=(?P<accuracy>\d) CLR=(?P<clarity>\d)"
    result = parse_rubric_reply(reply, subjects, reply_format=fmt, pattern=pattern)
    assert result.values == values


# JSON replies: reasoning set aside, the last complete verdict wins (issue #29 point 7).
@pytest.mark.parametrize(
    ("reply", "values", "reading"),
    [
        ('<think>Draft: {"accuracy": 1, "clarity": 1}. Hmm, too harsh.</think>\n{"accuracy": 4, "clarity": 5}',
         (4, 5), "set aside the reasoning (<think>)"),
        ('Draft: {"accuracy": 2, "clarity": 2}\nFinal: {"accuracy": 4, "clarity": 4}',
         (4, 4), 'took the last of 2 verdicts, \'{"accuracy": 4, "clarity": 4}\' (earlier: {"accuracy": 2, "clarity": 2})'),
        ('The format is {"accuracy": 3, "clarity": 3}.\n```json\n{"reason": "ok", "accuracy": 5, "clarity": 4}\n```\nHope this helps!',
         (5, 4), 'took the last of 2 verdicts, \'{"reason": "ok", "accuracy": 5, "clarity": 4}\' (earlier: {"accuracy": 3, "clarity": 3})'),
        ('reasoning the server left unopened {"accuracy": 1, "clarity": 1}</think>\n{"accuracy": 3, "clarity": 2}',
         (3, 2), "set aside the reasoning (<think>)"),
        ("<reasoning>weighing it</reasoning>{'reason': \"The model's answer isn't complete\", 'accuracy': 3, 'clarity': 4}",
         (3, 4), "set aside the reasoning (<reasoning>)"),
        ("{'reason': 'The answer doesn't cite a source', 'accuracy': 3, 'clarity': 5}", (3, 5), ""),
        ('{"accuracy": 4, "clarity": 4}', (4, 4), ""),
    ],
)  # fmt: skip
def test_json_final_verdict_wins(reply: str, values: tuple, reading: str) -> None:
    result = parse_rubric_reply(reply, TWO)
    assert result.values == {"accuracy": values[0], "clarity": values[1]}
    assert result.reading == reading


def test_a_clean_json_reply_after_reasoning_is_not_marked_repaired() -> None:
    result = parse_rubric_reply('<think>x</think>\n{"accuracy": 4, "clarity": 5}', TWO)
    assert not result.repaired


@pytest.mark.parametrize(
    ("reply", "fmt", "subjects", "kind", "message"),
    [
        ("The answer is fine.", "brackets", TEN, UNPARSEABLE,
         "No rating in the MT-Bench format [[N]] (e.g. “Rating: [[8]]”) in the reply ('The answer is fine.')."),
        ("See [1] and [2] for details.", "brackets", TEN, UNPARSEABLE,
         "No rating in the MT-Bench format [[N]] (e.g. “Rating: [[8]]”) in the reply ('See [1] and [2] for details.')."),
        ('Rating: "[[rating]]"', "brackets", TEN, UNPARSEABLE,
         "No rating in the MT-Bench format [[N]] (e.g. “Rating: [[8]]”) in the reply ('Rating: \"[[rating]]\"')."),
        ("Rating: [[11]]", "brackets", TEN, OUT_OF_RANGE, "'rating' = 11 is outside 1–10."),
        ("Rating: [[0]]", "brackets", TEN, OUT_OF_RANGE, "'rating' = 0 is outside 1–10."),
        ("<think>It deserves [[8]], let me double-check the", "brackets", TEN, UNPARSEABLE,
         "The reply ends inside an unclosed <think> block: it has no verdict after its reasoning."),
        ("<think>It deserves [[8]].</think>", "brackets", TEN, UNPARSEABLE,
         "The reply is only reasoning (<think>…): no verdict after it."),
        ("<think>[[8]]</think> I cannot rate this.", "brackets", TEN, UNPARSEABLE,
         "No rating in the MT-Bench format [[N]] (e.g. “Rating: [[8]]”) in the reply after its reasoning ('I cannot rate this.')."),
        ("Feedback: good.", "result", FIVE, UNPARSEABLE, "No “[RESULT] N” verdict in the reply ('Feedback: good.')."),
        ("Score: 8/10", "score", FIVE, OUT_OF_RANGE,
         "'score' is given out of 10 ('Score: 8/10'), but its range is 1–5."),
        ("Accuracy: 4/5 and that is all.", "score", TWO, UNPARSEABLE,
         "No “Score: N” verdict in the reply ('Accuracy: 4/5 and that is all.')."),
        ("No digits here.", "last_number", FIVE, UNPARSEABLE, "No number in the reply ('No digits here.')."),
        ("ACC=4 only", "regex", TWO, UNPARSEABLE, "The reply pattern matches nowhere in the reply ('ACC=4 only')."),
        ('{"accuracy": 4}', "json", TWO, MISSING_SUBJECT, "Subject 'clarity' is missing from the reply (got: accuracy)."),
        ("", "brackets", TEN, UNPARSEABLE, "The reply is empty."),
    ],
)  # fmt: skip
def test_replies_that_cannot_be_read_fail_with_the_reason(
    reply: str, fmt: str, subjects: list, kind: str, message: str
) -> None:
    pattern = r"ACC=(?P<accuracy>\d) CLR=(?P<clarity>\d)"
    with pytest.raises(JudgeReplyError) as caught:
        parse_rubric_reply(reply, subjects, reply_format=fmt, pattern=pattern)
    assert (caught.value.kind, caught.value.message) == (kind, message)


def test_single_value_formats_need_one_subject() -> None:
    with pytest.raises(ValueError, match="gives one value"):
        parse_rubric_reply("Rating: [[8]]", TWO, reply_format="brackets")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "needs a pattern"),
        ("(?P<accuracy>\\d", "does not compile"),
        ("Accuracy: (?P<accuracy>\\d)", "add (?P<clarity>…)"),
    ],
)
def test_a_bad_reply_pattern_is_refused(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=__import__("re").escape(message)):
        compile_reply_pattern(pattern, TWO)


def test_a_subject_name_with_spaces_has_an_identifier_group() -> None:
    subjects = [{"name": "Task fit", "min": 0, "max": 1}]
    result = parse_rubric_reply(
        "fit=1 reason=on topic",
        subjects,
        reply_format="regex",
        pattern=r"fit=(?P<task_fit>\d) reason=(?P<reason>.*)",
    )
    assert (result.values, result.reason) == ({"Task fit": 1}, "on topic")


def test_a_think_tag_quoted_further_on_is_left_alone() -> None:
    reply = '{"reason": "It printed <think> literally", "accuracy": 2, "clarity": 3}'
    assert strip_reasoning(reply) == (reply, "")
    assert parse_rubric_reply(reply, TWO).values == {"accuracy": 2, "clarity": 3}
