"""A rubric judge in MT-Bench's reply format end to end: real Redis, real workers, the real
openai SDK against the loopback server, replies as MT-Bench's judges write them."""

import pytest
from django.db import transaction

from apps.judges import learning
from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, JudgeRound, Score
from apps.judges.parsing import parse_rubric_reply
from apps.runs.models import ErrorKind, Run
from tests.base import work
from tests.factories import make_answers_dataset, make_judge
from tests.judges.test_judge_pages import create_url, judge_form
from tests.judges.test_reply_formats import MT_BENCH_REPLIES

pytestmark = pytest.mark.django_db

# FastChat's single-v1 prompt (fastchat/llm_judge/data/judge_prompts.jsonl), its {question}
# and {answer} written as this project's placeholders.
SINGLE_V1 = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response "
    "provided by an AI assistant to the user question displayed below. Your evaluation should "
    "consider factors such as the helpfulness, relevance, accuracy, depth, creativity, and "
    "level of detail of the response. Begin your evaluation by providing a short explanation. "
    "Be as objective as possible. After providing your explanation, you must rate the response "
    'on a scale of 1 to 10 by strictly following this format: "[[rating]]", for example: '
    '"Rating: [[5]]".\n\n[Question]\n{{ question }}\n\n[The Start of Assistant\'s Answer]\n'
    "{{ response }}\n[The End of Assistant's Answer]"
)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_mt_bench_judge_scores_its_own_replies(task, endpoint, llm_server):
    # A plain reply, bold, a reasoning judge's <think> draft, a first verdict then a final one.
    chosen = [MT_BENCH_REPLIES[i] for i in (0, 3, 5, 10)]
    replies = [reply for reply, _ in chosen] + ["I cannot rate this answer."]
    dataset = make_answers_dataset(task, len(replies))
    judge = make_judge(
        task,
        name="mt-bench",
        subjects=[{"name": "rating", "min": 1, "max": 10}],
        system_prompt="You are a helpful assistant.",
        user_prompt=SINGLE_V1,
        reply_format="brackets",
    )
    endpoint.supports_structured_output = True  # a JSON schema would contradict the prompt
    endpoint.save()
    llm_server.configure(
        script=[{"match": f"Question {i}?\n", "reply": reply} for i, reply in enumerate(replies)]
    )
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES, run.error
    assert (run.done, run.failed) == (4, 1)
    assert all("response_format" not in e["params"] for e in llm_server.stats()["log"])
    values = dict(
        Score.objects.filter(run=run, status="ok").values_list("item__position", "judge_value")
    )
    assert values == {0: 8, 1: 6, 2: 7, 3: 6}
    rounds = {r.item.position: r for r in JudgeRound.objects.filter(run=run).select_related("item")}
    assert rounds[0].reading == ""
    assert rounds[2].reading == "set aside the reasoning (<think>)"
    assert rounds[3].reading == "took the last of 2 verdicts, '[[6]]' (earlier: [[4]])"
    assert rounds[3].raw_reply == replies[3]  # the raw reply is kept whole
    assert (rounds[4].error_kind, rounds[4].raw_reply) == (
        ErrorKind.UNPARSEABLE,
        "I cannot rate this answer.",
    )
    assert rounds[4].error.startswith("No rating in the MT-Bench format [[N]]")


def test_the_judge_page_shows_the_reply_format(task, reviewer_client):
    judge = make_judge(
        task, subjects=[{"name": "rating", "min": 1, "max": 10}], reply_format="brackets"
    )
    page = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert "Double brackets (MT-Bench)" in page
    assert "<code>Rating: [[8]]</code>" in page
    assert "Explain your evaluation briefly, then give your score in exactly this format: " in page
    assert Judge.objects.get(pk=judge.pk).asks_json is False


# ---- the judge form -------------------------------------------------------------------------------
def _post(client, task, **fields):
    data = judge_form(**fields)
    return client.post(create_url(task), data)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"reply_format": "brackets"}, "This reply format gives one number: list one subject"),
        (
            {"reply_format": "brackets", "subjects_text": "rating 1 10", "ask_confidence": "on"},
            "A confidence is read from JSON replies only",
        ),
        (
            {"reply_format": "regex", "reply_pattern": r"Accuracy: (?P<accuracy>\d)"},
            "The reply pattern needs a named group per subject: add (?P&lt;clarity&gt;…).",
        ),
        ({"reply_format": "regex", "reply_pattern": "(?P<accuracy"}, "does not compile"),
    ],
)
def test_the_form_refuses_a_format_that_cannot_read_the_subjects(
    task, reviewer_client, fields, error
):
    response = _post(reviewer_client, task, **fields)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Judge.objects.filter(task=task, name="quality").exists()


def test_the_form_saves_a_reply_format(task, reviewer_client):
    response = _post(reviewer_client, task, reply_format="brackets", subjects_text="rating 1 10")
    assert response.status_code == 302
    judge = Judge.objects.get(task=task, name="quality")
    assert (judge.reply_format, judge.reply_pattern) == ("brackets", "")
    assert judge.use_structured_output is False  # a JSON schema would contradict the format
    pattern = r"(?i)accuracy\W+(?P<accuracy>\d)\W+clarity\W+(?P<clarity>\d)"
    response = _post(
        reviewer_client, task, name="regex-judge", reply_format="regex", reply_pattern=pattern
    )
    assert response.status_code == 302
    judge = Judge.objects.get(task=task, name="regex-judge")
    assert (judge.reply_format, judge.reply_pattern) == ("regex", pattern)
    page = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert "A regular expression: <code>(?i)accuracy" in page


def test_a_form_without_a_reply_format_reads_json(task, reviewer_client):
    assert _post(reviewer_client, task).status_code == 302
    assert Judge.objects.get(task=task, name="quality").reply_format == "json"


@pytest.mark.parametrize(
    ("fmt", "subjects", "reply"),
    [
        ("json", [{"name": "rating", "min": 1, "max": 10}], '{"reason": "Clear.", "rating": 8}'),
        ("brackets", [{"name": "rating", "min": 1, "max": 10}], "Clear.\n\nRating: [[8]]"),
        ("result", [{"name": "rating", "min": 1, "max": 10}], "Feedback: Clear. [RESULT] 8"),
        ("last_number", [{"name": "rating", "min": 1, "max": 10}], "Clear.\n\n8"),
        ("score", [{"name": "rating", "min": 1, "max": 10}], "Clear.\n\nScore: 8/10"),
        (
            "score",
            [{"name": "rating", "min": 1, "max": 10}, {"name": "tone", "min": 1, "max": 5}],
            "Clear.\n\nrating: 8/10\ntone: 4/5",
        ),
    ],
)
def test_examples_learned_from_reviews_are_written_in_the_judges_format(fmt, subjects, reply):
    values = {"rating": 8.0, "tone": 4.0} if len(subjects) == 2 else {"rating": 8.0}
    written = learning.reply_for(values, "Clear.", False, fmt, subjects)
    assert written == reply
    assert parse_rubric_reply(written, subjects, reply_format=fmt).values == values
