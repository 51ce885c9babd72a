"""Judge runs end to end: real Redis, RQ's jobs run in this process (tests.base.work_here: these
tests are about what the jobs do; tests/runs has the worker processes), the real openai SDK
against the loopback LLM server with replies scripted per item (and per round, with `times`)."""

import json

import pytest
from django.db import transaction

from apps.judges.launching import JudgeRunError, create_judge_run, retry_all_failed, retry_items
from apps.judges.models import (
    ArchivedRound,
    Judge,
    JudgeRound,
    RetryScope,
    Score,
    ScoreEvent,
    StaleScore,
)
from apps.runs.engine.launch import launch
from apps.runs.models import AttemptLog, ErrorKind, LoggingMode, Response, Run
from tests.base import work_here
from tests.factories import (
    SUBJECTS,
    make_answers_dataset,
    make_generation_run,
    make_judge,
    rubric_reply,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def about(i: int) -> str:
    """A substring of the judge prompt that names item i's response and nothing else."""
    return f"number {i}\n</response>"


def rounds_of(run: Run, position: int) -> list[JudgeRound]:
    return list(JudgeRound.objects.filter(run=run, item__position=position).order_by("round"))


def scores_of(run: Run, position: int) -> dict[str, Score]:
    return {s.subject: s for s in Score.objects.filter(run=run, item__position=position)}


def start(judge: Judge, **kwargs) -> Run:
    with transaction.atomic():
        return create_judge_run(judge, **kwargs)


# ---- a rubric run over a dataset column ----------------------------------------------------------
def test_rubric_rounds_are_kept_and_aggregated(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 5)
    judge = make_judge(task, n_iter=3, aggregation=Judge.Aggregation.MEAN)
    llm_server.configure(
        default_reply=rubric_reply(4, 4),
        script=[
            {"match": about(1), "reply": rubric_reply(2, 5, "weak"), "times": 1},
            {"match": about(1), "reply": rubric_reply(3, 5, "so-so"), "times": 1},
            {"match": about(1), "reply": "```json\n" + rubric_reply(5, 5, "good") + "\n```"},
        ],
    )
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert (run.done, run.failed, run.total) == (5, 0, 5)
    assert llm_server.stats()["requests"] == 15
    assert run.prompt_tokens > 0 and run.completion_tokens > 0

    rounds = rounds_of(run, 1)
    assert [r.round for r in rounds] == [0, 1, 2]
    assert sorted(r.values["accuracy"] for r in rounds) == [2, 3, 5]
    assert sorted(r.reason for r in rounds) == ["good", "so-so", "weak"]
    assert any(r.raw_reply.startswith("```json") for r in rounds)
    assert all(r.prompt_tokens > 0 and r.status == JudgeRound.Status.OK for r in rounds)
    scores = scores_of(run, 1)
    assert scores["accuracy"].judge_value == pytest.approx(10 / 3)
    assert scores["accuracy"].final_value == pytest.approx(10 / 3)
    assert sorted(scores["accuracy"].round_values) == [2, 3, 5]
    assert scores["accuracy"].spread == 3
    assert scores["clarity"].judge_value == 5 and scores["clarity"].spread == 0
    other = scores_of(run, 0)
    assert other["accuracy"].judge_value == 4 and other["accuracy"].status == Score.Status.OK

    # The judge saw the item's input and the response, and not other columns' answers.
    sent = llm_server.stats()["log"][0]["messages"]
    text = "\n".join(m["content"] for m in sent)
    assert "Question" in text and "answer number" in text
    assert "accuracy: 1 to 5" in text


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        # rounds per item: item 0 → 2, 4, 4; item 1 → 1, 2, 3 (a three-way tie); item 2 → 5, 5, 5
        ("mean", [10 / 3, 2, 5]),
        ("sum", [10, 6, 15]),
        ("min", [2, 1, 5]),
        ("max", [4, 3, 5]),
        ("mode", [4, 1, 5]),
    ],
)
def test_every_aggregation_over_real_rounds(task, endpoint, llm_server, method, expected):
    dataset = make_answers_dataset(task, 3)
    judge = make_judge(task, n_iter=3, aggregation=method, subjects=[SUBJECTS[0]])
    replies = {0: [2, 4, 4], 1: [1, 2, 3], 2: [5, 5, 5]}
    llm_server.configure(
        script=[
            {"match": about(i), "reply": json.dumps({"accuracy": value}), "times": 1}
            for i, values in replies.items()
            for value in values
        ]
    )
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    for position, value in enumerate(expected):
        score = scores_of(run, position)["accuracy"]
        assert score.judge_value == pytest.approx(value), (method, position)
        assert sorted(score.round_values) == sorted(replies[position])
        assert score.spread == max(replies[position]) - min(replies[position])


def test_mode_ties_go_to_the_smallest_value(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 2)
    judge = make_judge(task, n_iter=4, aggregation="mode", subjects=[SUBJECTS[0]])
    replies = {0: [5, 3, 5, 3], 1: [2, 4, 4, 2]}
    llm_server.configure(
        script=[
            {"match": about(i), "reply": json.dumps({"accuracy": v}), "times": 1}
            for i, values in replies.items()
            for v in values
        ]
    )
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    assert scores_of(run, 0)["accuracy"].judge_value == 3
    assert scores_of(run, 1)["accuracy"].judge_value == 2


# ---- failures ---------------------------------------------------------------------------------
def test_every_failure_kind_ends_as_a_failed_item_with_its_log(task, endpoint, llm_server):
    endpoint.timeout_seconds = 1
    endpoint.max_retries = 1
    endpoint.save()
    # Items: 0 fine, 1 API error, 2 timeout, 3 unparseable, 4 missing subject, 5 out of range,
    # 6 a prompt that cannot be built, 7 nothing to judge (no response in the column).
    dataset = make_answers_dataset(
        task, 8, response=lambda i: None if i == 7 else f"answer number {i}"
    )
    item6 = dataset.items.get(position=6)
    del item6.fields["question"]
    item6.save()
    judge = make_judge(
        task, user_prompt="Question: {{ question }}\n<response>\n{{ response }}\n</response>"
    )
    llm_server.configure(
        default_reply=rubric_reply(4, 4),
        hang_seconds=30,
        script=[
            {"match": about(1), "status": 500},
            {"match": about(2), "hang": True},
            {"match": about(3), "reply": "Both are fine, I would say <b>four</b>."},
            {"match": about(4), "reply": '{"accuracy": 4, "reason": "no clarity"}'},
            {"match": about(5), "reply": '{"accuracy": 9, "clarity": 3}'},
        ],
    )
    run = start(
        judge, endpoint=endpoint, dataset=dataset, source_column="response", logging_mode="failed"
    )
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES, run.error
    assert (run.done, run.failed) == (1, 7)

    expected = {
        1: (ErrorKind.API_ERROR, "the server failed (500)"),
        2: (ErrorKind.TIMEOUT, "no answer within 1 s"),
        3: (ErrorKind.UNPARSEABLE, ""),
        4: (ErrorKind.MISSING_SUBJECT, "clarity"),
        5: (ErrorKind.OUT_OF_RANGE, "accuracy"),
        6: (ErrorKind.TEMPLATE, "{{ question }}"),
        7: (ErrorKind.INTERNAL, "Nothing to judge"),
    }
    for position, (kind, words) in expected.items():
        scores = scores_of(run, position)
        assert set(scores) == {"accuracy", "clarity"}
        for score in scores.values():
            assert score.status == Score.Status.FAILED, position
            assert score.error_kind == kind, (position, score.error)
            assert words in score.error, (position, score.error)
            assert score.judge_value is None and score.final_value is None
        (judge_round,) = rounds_of(run, position)
        assert judge_round.status == JudgeRound.Status.FAILED
        assert judge_round.error_kind == kind
        logs = AttemptLog.objects.filter(run=run, item__position=position)
        assert logs.exists(), position
        assert all(not log.ok for log in logs)
        assert logs.last().error_kind == kind
    assert scores_of(run, 0)["accuracy"].status == Score.Status.OK

    # The reply that could not be scored is kept as the judge wrote it, and logged as failed.
    assert rounds_of(run, 3)[0].raw_reply == "Both are fine, I would say <b>four</b>."
    log = AttemptLog.objects.get(run=run, item__position=3)
    assert log.request_messages[-1]["content"].endswith("answer number 3\n</response>")
    assert "four" in log.raw_reply
    # The API error was retried (max_retries 1) before the item failed, every attempt logged.
    assert AttemptLog.objects.filter(run=run, item__position=1).count() == 2
    assert AttemptLog.objects.filter(run=run, item__position=1, traceback__contains="500").exists()
    # Items that cannot be judged cost no request.
    sent = "\n".join(m["content"] for entry in llm_server.stats()["log"] for m in entry["messages"])
    assert about(7) not in sent and "number 6" not in sent
    # Nothing was logged for the good item (logging mode: failed attempts only).
    assert not AttemptLog.objects.filter(run=run, item__position=0).exists()


def test_logging_mode_all_keeps_good_attempts_too(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 2)
    llm_server.configure(default_reply=rubric_reply(3, 3))
    run = start(
        make_judge(task, n_iter=2),
        endpoint=endpoint,
        dataset=dataset,
        source_column="response",
        logging_mode=LoggingMode.ALL,
    )
    work_here()
    logs = AttemptLog.objects.filter(run=run)
    assert logs.count() == 4 and all(log.ok for log in logs)
    assert sorted(logs.values_list("round", flat=True)) == [0, 0, 1, 1]


def test_a_refused_key_stops_the_run_with_a_plain_message(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 6)
    llm_server.configure(require_key="sk-another-key", default_reply=rubric_reply(3, 3))
    run = start(make_judge(task), endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("Stopped: the API key was refused (401)")
    assert "sk-test-judge" not in run.error
    assert not Score.objects.filter(run=run).exists()  # not scored, and not failed items either
    # Only the few requests in flight when the refusal came were sent.
    assert llm_server.stats()["requests"] <= endpoint.concurrency_limit


def test_logging_mode_none_keeps_rounds_but_no_attempts(task):
    dataset = make_answers_dataset(
        task, 3, reference=lambda i: "B", response=lambda i: ["B", "C", "?"][i]
    )
    run = start(
        make_judge(task, Judge.Kind.MCQ_RULE),
        dataset=dataset,
        source_column="response",
        logging_mode=LoggingMode.NONE,
    )
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (2, 1)
    assert not AttemptLog.objects.filter(run=run).exists()
    failed = rounds_of(run, 2)[0]
    assert failed.error_kind == ErrorKind.UNPARSEABLE and failed.raw_reply == "?"


# ---- structured output --------------------------------------------------------------------------
def test_structured_output_is_asked_for_only_where_supported(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 2)
    judge = make_judge(task)
    llm_server.configure(default_reply=rubric_reply(4, 5))

    endpoint.supports_structured_output = True
    endpoint.save()
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    log = llm_server.stats()["log"]
    assert len(log) == 2
    for entry in log:
        schema = entry["params"]["response_format"]
        assert schema["type"] == "json_schema"
        properties = schema["json_schema"]["schema"]["properties"]
        assert {"accuracy", "clarity", "reason"} <= set(properties)
    assert Score.objects.filter(run=run, status="ok").count() == 4

    # The endpoint without structured output gets a plain request; the reply is read tolerantly.
    llm_server.reset()
    llm_server.configure(default_reply="Scores:\n" + rubric_reply(2, 3) + "\nThanks!")
    endpoint.supports_structured_output = False
    endpoint.save()
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    assert all("response_format" not in e["params"] for e in llm_server.stats()["log"])
    assert set(Score.objects.filter(run=run).values_list("judge_value", flat=True)) == {2, 3}

    # A judge that opts out is never sent a schema, even where the endpoint supports it.
    llm_server.reset()
    llm_server.configure(default_reply=rubric_reply(2, 3))
    endpoint.supports_structured_output = True
    endpoint.save()
    judge.use_structured_output = False
    judge = judge.save_as_new_version(None)  # the judge's v1 was used: edits make v2
    start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    assert all("response_format" not in e["params"] for e in llm_server.stats()["log"])


# ---- multiple choice and metrics ---------------------------------------------------------------
MCQ_CASES = [
    # (judge's reply / the response, answer key, score)
    ("B", "B", 100),
    ("A, C", "A,C", 100),
    ("A.", "A", 100),
    ("(B)", "B", 100),
    ("Answer: AC", "AC", 100),
    ("答案是B", "B", 100),
    ("N", "N", 100),
    ("A, C", "A", 0),
    ("B", "C", 0),
]


def test_llm_multiple_choice_judge_reads_every_reply_form(task, endpoint, llm_server):
    dataset = make_answers_dataset(
        task, len(MCQ_CASES), reference=lambda i: MCQ_CASES[i][1], response=lambda i: f"number {i}"
    )
    judge = make_judge(task, Judge.Kind.MCQ)
    llm_server.configure(
        script=[
            {"match": f"number {i}\n</response>", "reply": r}
            for i, (r, _, _) in enumerate(MCQ_CASES)
        ]
    )
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    for position, (reply, _, expected) in enumerate(MCQ_CASES):
        score = scores_of(run, position)["score"]
        assert score.judge_value == expected, (reply, score.judge_value)
        assert rounds_of(run, position)[0].raw_reply == reply
    # The judge is told the labels and is not shown the answer key.
    first = llm_server.stats()["log"][0]["messages"]
    assert "A, B, C, D" in first[0]["content"]
    assert "<reference>" not in "\n".join(m["content"] for m in first)


def test_rule_based_judges_make_no_request(task, llm_server):
    cases = [
        ("The answer is (B).", "B", 100),
        ("I pick A and C", "A,C", 100),
        ("答案是B", "B", 100),
        ("None of them.", "N", 100),
        ("Option D", "B", 0),
        ("I cannot decide.", "B", None),  # no label at all: unparseable, a failed item
        ("(A)", "not a key!", None),  # a bad answer key: bad item data
    ]
    dataset = make_answers_dataset(
        task, len(cases), reference=lambda i: cases[i][1], response=lambda i: cases[i][0]
    )
    mcq = start(make_judge(task, Judge.Kind.MCQ_RULE), dataset=dataset, source_column="response")
    words = make_answers_dataset(
        task,
        4,
        name="words",
        reference=lambda i: ["Paris", "the cat sat", '["4", "four"]', "x"][i],
        response=lambda i: ["paris.", "The cat sat down", "Four", "y"][i],
    )
    exact = start(
        make_judge(task, Judge.Kind.METRIC, name="em"), dataset=words, source_column="response"
    )
    f1 = start(
        make_judge(
            task,
            Judge.Kind.METRIC,
            name="f1",
            metric="token_f1",
            subjects=[{"name": "f1", "min": 0, "max": 100}],
        ),
        dataset=words,
        source_column="response",
    )
    work_here()
    assert llm_server.stats()["requests"] == 0
    for run in (mcq, exact, f1):
        run.refresh_from_db()
        assert run.endpoint_id is None
        assert run.status in (Run.Status.COMPLETED, Run.Status.COMPLETED_WITH_FAILURES), run.error
    for position, (_, _, expected) in enumerate(cases):
        score = scores_of(mcq, position)["score"]
        assert score.judge_value == expected, position
    assert scores_of(mcq, 5)["score"].error_kind == ErrorKind.UNPARSEABLE
    assert scores_of(mcq, 6)["score"].error_kind == ErrorKind.INTERNAL
    assert scores_of(mcq, 6)["score"].error.startswith("Bad item data: Answer key 'not a key!'")
    # Rule evaluations are logged like attempts (failed ones in the default logging mode).
    assert AttemptLog.objects.filter(run=mcq, ok=False).count() == 2
    assert [scores_of(exact, p)["exact_match"].judge_value for p in range(4)] == [100, 0, 100, 0]
    # "the" is dropped (ignore_articles): cat sat down vs cat sat → P 2/3, R 1, F1 0.8
    assert scores_of(f1, 1)["f1"].judge_value == pytest.approx(80)
    assert scores_of(f1, 0)["f1"].judge_value == 100


# ---- responses from a generation run -------------------------------------------------------------
def test_generation_run_responses_are_judged_and_missing_ones_fail(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 4, response=lambda i: f"column answer {i}")
    source = make_generation_run(
        dataset, {0: "answer number 0", 1: "answer number 1", 2: None}, label="model-x"
    )
    llm_server.configure(default_reply=rubric_reply(5, 4))
    run = start(make_judge(task), endpoint=endpoint, source_run=source)
    work_here()
    run.refresh_from_db()
    assert run.dataset_id == dataset.pk and run.source_run_id == source.pk
    assert (run.done, run.failed) == (2, 2)
    assert scores_of(run, 0)["accuracy"].judge_value == 5
    failed = scores_of(run, 2)["accuracy"]
    assert failed.error_kind == ErrorKind.NO_RESPONSE
    assert failed.error.startswith("Nothing to judge:") and "failed" in failed.error
    missing = scores_of(run, 3)["accuracy"]
    assert missing.error_kind == ErrorKind.NO_RESPONSE and "has no response" in missing.error
    sent = "\n".join(m["content"] for e in llm_server.stats()["log"] for m in e["messages"])
    assert "answer number 0" in sent and "column answer" not in sent
    assert llm_server.stats()["requests"] == 2


def test_retry_failed_leaves_items_without_a_response_until_the_generation_answers(
    task, endpoint, llm_server
):
    dataset = make_answers_dataset(task, 4)
    source = make_generation_run(dataset, {0: "answer number 0", 1: None, 2: None})
    llm_server.configure(default_reply=rubric_reply(5, 4))
    run = start(make_judge(task), endpoint=endpoint, source_run=source)
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (1, 3)
    # Judging them again cannot help: "retry failed" has nothing to do and counts them failed.
    assert retry_all_failed(run) == 0
    assert Score.objects.filter(run=run, subject="accuracy").retryable(run).count() == 0
    run.refresh_from_db()
    assert (run.done, run.failed) == (1, 3)
    # The generation run answers item 1 (its own retry): now that item is worth judging.
    Response.objects.filter(run=source, item__position=1).update(
        status=Response.Status.OK, text="answer number 1", error_kind="", error=""
    )
    assert Score.objects.filter(run=run, subject="accuracy").retryable(run).count() == 1
    assert retry_all_failed(run) == 1
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (2, 2)
    assert scores_of(run, 1)["accuracy"].judge_value == 5
    assert {scores_of(run, p)["accuracy"].error_kind for p in (2, 3)} == {ErrorKind.NO_RESPONSE}


def test_a_run_that_cannot_be_made_says_why(task, endpoint):
    dataset = make_answers_dataset(task, 1)
    judge = make_judge(task)
    with pytest.raises(JudgeRunError, match="choose the endpoint"):
        create_judge_run(judge, dataset=dataset, source_column="response")
    with pytest.raises(JudgeRunError, match="no column 'nope'"):
        create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="nope")
    other = make_answers_dataset(type(task).objects.create(slug="other", name="O"), 1)
    with pytest.raises(JudgeRunError, match="another task"):
        create_judge_run(judge, endpoint=endpoint, dataset=other, source_column="response")
    judge.subjects = []
    judge.save()
    with pytest.raises(JudgeRunError, match="at least one subject"):
        create_judge_run(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    assert not Run.objects.filter(kind="judge").exists()


# ---- reruns -------------------------------------------------------------------------------------
def test_retry_failed_redoes_only_the_failed_rounds(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 4)
    judge = make_judge(task, n_iter=3)
    llm_server.configure(
        default_reply=rubric_reply(4, 4),
        script=[
            {"match": about(1), "reply": "no idea", "times": 1},
            {"match": about(2), "status": 400, "times": 1},
        ],
    )
    run = start(judge, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert (run.done, run.failed) == (2, 2)
    before = {
        (r.item_id, r.round): (r.pk, r.created_at, r.raw_reply, r.status)
        for r in JudgeRound.objects.filter(run=run)
    }
    failed_rounds = {key for key, value in before.items() if value[3] == "failed"}
    assert len(failed_rounds) == 2
    assert sorted(scores_of(run, 1)["accuracy"].round_values, key=str).count(None) == 1

    llm_server.reset()
    llm_server.configure(default_reply=rubric_reply(2, 2))
    with transaction.atomic():
        assert launch(run, Run.Mode.RETRY_FAILED) == 2
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and (run.done, run.failed) == (4, 0)
    assert llm_server.stats()["requests"] == 2  # one failed round for each failed item
    for r in JudgeRound.objects.filter(run=run):
        key = (r.item_id, r.round)
        if key in failed_rounds:
            assert r.status == "ok" and r.values == {"accuracy": 2, "clarity": 2}
            assert r.launch == run.launch
        else:
            assert (r.pk, r.created_at, r.raw_reply, r.status) == before[key]
    score = scores_of(run, 1)["accuracy"]
    assert score.judge_value == pytest.approx(10 / 3) and score.spread == 2
    # The failed rounds are kept in history.
    archived = ArchivedRound.objects.filter(run=run)
    assert {(a.item_id, a.round) for a in archived} == failed_rounds
    assert {a.error_kind for a in archived} == {"unparseable", "api_error"}


def test_retry_one_item_leaves_other_failures_alone(task, endpoint, llm_server):
    dataset = make_answers_dataset(task, 3)
    llm_server.configure(default_reply="garbage")
    run = start(make_judge(task), endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.failed == 3
    llm_server.configure(default_reply=rubric_reply(3, 3))
    item = dataset.items.get(position=1)
    assert retry_items(run, [item.pk]) == 1
    assert RetryScope.objects.get(run=run, launch=run.launch).item_ids == [item.pk]
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED_WITH_FAILURES
    assert (run.done, run.failed) == (1, 2)
    assert scores_of(run, 1)["accuracy"].status == "ok"
    assert scores_of(run, 0)["accuracy"].status == "failed"


def test_overrides_survive_a_rejudge(task, endpoint, llm_server, reviewer_user):
    dataset = make_answers_dataset(task, 2)
    llm_server.configure(default_reply=rubric_reply(4, 4))
    run = start(make_judge(task), endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    score = scores_of(run, 0)["accuracy"]
    score.override(1, reviewer_user, "The answer is wrong.")
    confirmed = scores_of(run, 0)["clarity"]
    events = ScoreEvent.objects.count()

    llm_server.configure(default_reply=rubric_reply(2, 5))
    with transaction.atomic():
        assert launch(run, Run.Mode.OVERWRITE) == 2
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    score.refresh_from_db()
    assert score.judge_value == 2  # the judge's new value is kept...
    assert score.override_value == 1 and score.final_value == 1  # ...the person's stays final
    assert score.override_by == reviewer_user and score.override_reason == "The answer is wrong."
    confirmed.refresh_from_db()
    assert confirmed.judge_value == 5 and confirmed.final_value == 5
    assert scores_of(run, 1)["accuracy"].final_value == 2
    assert ScoreEvent.objects.count() == events
    # Overwrite keeps history: the replaced rounds are archived with their old values.
    assert ArchivedRound.objects.filter(run=run).count() == 2
    assert {a.values["accuracy"] for a in ArchivedRound.objects.filter(run=run)} == {4}


def test_a_finished_judge_run_builds_its_leaderboard_summary_in_the_worker(
    task, endpoint, llm_server
):
    from apps.leaderboards.models import RunSummary

    dataset = make_answers_dataset(task, 2)
    llm_server.configure(default_reply=rubric_reply(4, 3))
    run = start(make_judge(task), endpoint=endpoint, dataset=dataset, source_column="response")
    assert not RunSummary.objects.filter(run=run).exists()
    work_here()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert RunSummary.objects.filter(run=run).exists()  # built by a job, not by a page view


def test_a_rejudge_withdraws_confirmations_of_changed_values_and_stales_open_pages(
    task, endpoint, llm_server, reviewer_user
):
    dataset = make_answers_dataset(task, 1)
    llm_server.configure(default_reply=rubric_reply(4, 4))
    run = start(make_judge(task), endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    accuracy, clarity = scores_of(run, 0)["accuracy"], scores_of(run, 0)["clarity"]
    accuracy.confirm(reviewer_user)
    clarity.confirm(reviewer_user)
    seen_revision = clarity.revision

    llm_server.configure(default_reply=rubric_reply(2, 4))  # accuracy changes, clarity does not
    with transaction.atomic():
        assert launch(run, Run.Mode.OVERWRITE) == 1
    work_here()
    accuracy.refresh_from_db()
    clarity.refresh_from_db()
    assert accuracy.judge_value == 2 and accuracy.confirmed_at is None
    event = accuracy.events.last()
    assert event.kind == ScoreEvent.Kind.REJUDGE and (event.old_value, event.new_value) == (4, 2)
    assert clarity.confirmed_by == reviewer_user  # the value it agreed with still stands
    assert clarity.events.last().kind == ScoreEvent.Kind.CONFIRM
    # A page rendered before the re-judge cannot confirm the new value unseen.
    with pytest.raises(StaleScore):
        clarity.confirm(reviewer_user, expected_revision=seen_revision)


def test_leaderboard_reads_the_scores(task, reviewer_user):
    from apps.leaderboards import boards

    dataset = make_answers_dataset(task, 4, reference=lambda i: f"answer number {i}")
    good = make_generation_run(dataset, {i: f"answer number {i}" for i in range(4)}, label="good")
    half = make_generation_run(
        dataset, {0: "answer number 0", 1: "answer number 1", 2: "nope", 3: None}, label="half"
    )
    judge = make_judge(task, Judge.Kind.METRIC, name="em")
    runs = [start(judge, source_run=source) for source in (good, half)]
    work_here()
    Score.objects.get(run=runs[1], item__position=2).override(100, reviewer_user, "Close enough.")
    board = boards.build(task, boards.Params.from_query({}))
    assert board.judge == judge and [s.name for s in board.subjects] == ["exact_match"]
    rows = {row.label: row for row in board.rows}
    assert set(rows) == {"good", "half"}
    assert rows["good"].cells["judge"]["exact_match"].mean == 100
    cell = rows["half"].cells["judge"]["exact_match"]
    # Strict (the board's default): the failed item counts as 0 of 100.
    assert (cell.mean, cell.n, cell.failed) == (50.0, 4, 1)
    assert (cell.answered_mean, cell.answered) == (pytest.approx(200 / 3), 3)
    human = rows["half"].cells["human"]["exact_match"]
    assert (human.mean, human.answered_mean, human.overridden) == (75.0, 100.0, 1)
