"""MT-Bench end to end (#27.6), from FastChat's own files (tests/fixtures/mt_bench): the
questions (joined with reference_answer/gpt-4.jsonl as the per-turn reference) imported as a
user imports them, two models' two-turn answers, one judge whose template picks MT-Bench's
single-v1 / single-math-v1 / multi-turn prompts by category and turn (the prompts' text taken
unmodified from judge_prompts.jsonl, only their `{placeholders}` written as template names),
`[[N]]` replies from the loopback server, and the board's turn 1, turn 2 and overall columns
pinned to means worked by hand. The two models' answers come from real multi-turn generation
runs (turn 2 asked with the model's own turn-1 answer in context). Real Redis, the real openai
SDK over HTTP; the engine's chunks run in the test's own process (no worker to start)."""

import json
import re
from pathlib import Path

import pytest
from django.db import transaction

from apps.datasets.importing import Mapping, import_dataset
from apps.judges.dialogues import Dialogue
from apps.judges.judge_prompts import build_pairwise_messages, build_rubric_messages
from apps.judges.launching import create_judge_run
from apps.judges.models import Judge, JudgeRound, Score
from apps.leaderboards.boards import Params, build
from apps.runs.engine.chunk import run_chunk
from apps.runs.kinds.generation import create_generation_run
from apps.runs.models import Endpoint, PromptTemplate, Response, Run
from tests.factories import make_judge, make_multi_turn_run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mt_bench"
PROMPTS = {p["name"]: p for p in map(json.loads, (FIXTURES / "judge_prompts.jsonl").open())}
# FastChat's fastchat/llm_judge/common.py: these categories are judged against a reference.
NEED_REF_CATS = ["math", "reasoning", "coding", "arena-hard-200"]
RATING = [{"name": "rating", "min": 1, "max": 10}]

# FastChat's placeholders as this project's template names: turn 1's question is turns[1].
NAMES = {
    "{question}": "{{ turns[1].question }}",
    "{answer}": "{{ turns[1].answer }}",
    "{ref_answer_1}": "{{ turns[1].reference }}",
    "{question_1}": "{{ turns[1].question }}",
    "{answer_1}": "{{ turns[1].answer }}",
    "{question_2}": "{{ turns[2].question }}",
    "{answer_2}": "{{ turns[2].answer }}",
    "{ref_answer_2}": "{{ turns[2].reference }}",
}


def as_template(text: str) -> str:
    for fastchat, ours in NAMES.items():
        text = text.replace(fastchat, ours)
    assert "{{" not in text.replace("{{ turns[", "") and "{%" not in text
    return text


def by_category_and_turn(part: str) -> str:
    """One template for the four single-answer prompts: MT-Bench's choice, as a template."""
    return (
        f"{{% if turn.number == 1 and category in {NEED_REF_CATS} %}}"
        + as_template(PROMPTS["single-math-v1"][part])
        + "{% elif turn.number == 1 %}"
        + as_template(PROMPTS["single-v1"][part])
        + f"{{% elif category in {NEED_REF_CATS} %}}"
        + as_template(PROMPTS["single-math-v1-multi-turn"][part])
        + "{% else %}"
        + as_template(PROMPTS["single-v1-multi-turn"][part])
        + "{% endif %}"
    )


def fastchat_messages(question: dict, answers: list[str], refs: list[str], turn: int) -> list:
    """What FastChat's run_judge_single sends for one (question, turn): its own code's choice
    of prompt and its str.format, written out here."""
    multi = turn == 2
    name = "single-math-v1" if question["category"] in NEED_REF_CATS else "single-v1"
    prompt = PROMPTS[name + ("-multi-turn" if multi else "")]
    kwargs = {}
    if question["category"] in NEED_REF_CATS:
        kwargs["ref_answer_1"] = refs[0]
        if multi:
            kwargs["ref_answer_2"] = refs[1]
    if multi:
        user = prompt["prompt_template"].format(
            question_1=question["turns"][0],
            question_2=question["turns"][1],
            answer_1=answers[0],
            answer_2=answers[1],
            **kwargs,
        )
    else:
        user = prompt["prompt_template"].format(
            question=question["turns"][0], answer=answers[0], **kwargs
        )
    return [
        {"role": "system", "content": prompt["system_prompt"]},
        {"role": "user", "content": user},
    ]


def questions_with_references() -> list[dict]:
    """question.jsonl joined by question_id with reference_answer/gpt-4.jsonl's `choices`, as
    a user joins them before uploading (FastChat reads the two files side by side)."""
    answers = {
        row["question_id"]: row["choices"]
        for row in map(json.loads, (FIXTURES / "reference_answer_gpt-4.jsonl").open())
    }
    rows = [json.loads(line) for line in (FIXTURES / "question.jsonl").open()]
    return [
        {**row, "gpt4": answers[row["question_id"]]} if row["question_id"] in answers else row
        for row in rows
    ]


# The two models' answers, and the judge's rating of each (question, turn) per model. By hand:
# model-a turn 1 (8 + 9 + 4 + 10) / 4 = 7.75, turn 2 (6 + 7 + 2 + 5) / 4 = 5.0, overall
#   51 / 8 = 6.375; model-b turn 1 (7 + 6 + 9 + 3) / 4 = 6.25, turn 2 (7 + 5 + 8 + 1) / 4 =
#   5.25, overall 46 / 8 = 5.75.
RATINGS = {
    "model-a": {81: (8, 6), 95: (9, 7), 101: (4, 2), 111: (10, 5)},
    "model-b": {81: (7, 7), 95: (6, 5), 101: (9, 8), 111: (3, 1)},
}
# MT-Bench judges' reply shapes (tests/judges/test_reply_formats.py), one per rating slot.
SHAPES = [
    "The assistant's answer is relevant and accurate.\n\nRating: [[{n}]]",
    "Explanation: it follows the instruction.\n\nRating: **[[{n}]]**",
    "<think>Maybe [[1]]? No, re-reading it, it is better.</think>\nSolid.\n\nRating: [[{n}]]",
    "助手的回答基本正确。\n\n评分：[[{n}]]",
]


def answer(model: str, qid: int, turn: int) -> str:
    return f"{model} says: answer {turn} to question {qid}."


def run_here(run: Run) -> None:
    """Every chunk of the run's launch, in this process (its one chunk takes the whole list)."""
    run.refresh_from_db()
    run_chunk(run.pk, run.launch, 0)
    run.refresh_from_db()
    assert run.is_terminal, run.status


def generate_two_turns(task, dataset, rows: list[dict], llm_server) -> dict[str, Run]:
    """Each model answers the questions as MT-Bench's gen_model_answer asks them: turn 1, then
    turn 2 with the model's own turn-1 answer in context (a multi-turn generation run over the
    item's conversation). The loopback server answers each (model, turn) with `answer`."""
    template = PromptTemplate.objects.create(
        task=task, name="mt-bench-answer", messages=[{"role": "conversation"}]
    )
    llm_server.configure(
        script=[
            {
                "regex": f"^{re.escape(asked)}$",
                "model": model,
                "reply": answer(model, row["question_id"], number),
            }
            for model in RATINGS
            for row in rows
            for number, asked in enumerate(row["turns"], 1)
        ]
    )
    generations = {}
    for model in RATINGS:
        model_endpoint = Endpoint.objects.create(
            name=model,
            base_url=llm_server.base_url,
            model=model,
            concurrency_limit=4,
            timeout_seconds=30,
            max_retries=1,
        )
        with transaction.atomic():
            generations[model] = create_generation_run(
                dataset, model_endpoint, template, label=model, multi_turn=True
            )
        run_here(generations[model])
        run = generations[model]
        assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 4, 0), run.error
    # Turn 2 was asked with the model's own turn-1 answer in place, nothing else.
    log = llm_server.stats()["log"]
    sent = {(entry["model"], json.dumps(entry["messages"], ensure_ascii=False)) for entry in log}
    assert len(log) == len(sent) == 16  # 4 questions × 2 turns × 2 models, each asked once
    for model in RATINGS:
        for row in rows:
            first, second = row["turns"]
            turn_2 = [
                {"role": "user", "content": first},
                {"role": "assistant", "content": answer(model, row["question_id"], 1)},
                {"role": "user", "content": second},
            ]
            assert (model, json.dumps(turn_2, ensure_ascii=False)) in sent
            response = Response.objects.get(
                run=generations[model], item__key=str(row["question_id"])
            )
            assert response.turn_answers() == [
                answer(model, row["question_id"], 1),
                answer(model, row["question_id"], 2),
            ]
    llm_server.reset()
    return generations


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_mt_bench_end_to_end(task, endpoint, llm_server, viewer_client):
    rows = questions_with_references()
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    mapping = Mapping("question_id", ["category", "turns"], "gpt4", conversation_column="turns")
    dataset = import_dataset(task, "mt-bench", data, mapping, file_name="mt_bench.jsonl")
    assert dataset.items.get(key="111").turn_references == ["Площадь равна 3.", "5pi"]
    generations = generate_two_turns(task, dataset, rows, llm_server)
    judge = make_judge(
        task,
        name="mt-bench-single",
        subjects=RATING,
        system_prompt=by_category_and_turn("system_prompt"),
        user_prompt=by_category_and_turn("prompt_template"),
        reply_format="brackets",
        per_turn=True,
    )
    # Turn 2's prompt holds turn 1's answer too: its rule comes first.
    script = []
    for turn in (2, 1):
        for model, ratings in RATINGS.items():
            for i, (qid, pair) in enumerate(ratings.items()):
                reply = SHAPES[(i + turn) % len(SHAPES)].format(n=pair[turn - 1])
                script.append({"match": answer(model, qid, turn), "reply": reply})
    llm_server.configure(script=script)
    with transaction.atomic():
        runs = [
            create_judge_run(judge, endpoint=endpoint, source_run=generation)
            for generation in generations.values()
        ]
    for run in runs:
        run_here(run)

    # Every request is exactly what FastChat would send for that question and turn.
    sent = [entry["messages"] for entry in llm_server.stats()["log"]]
    assert len(sent) == 16  # 4 questions × 2 turns × 2 models, each asked once
    expected = []
    for model in RATINGS:
        for question in rows:
            qid = question["question_id"]
            refs = [t for t in (question.get("gpt4") or [{"turns": ["", ""]}])[0]["turns"]]
            answers = [answer(model, qid, 1), answer(model, qid, 2)]
            for turn in (1, 2):
                expected.append(fastchat_messages(question, answers, [str(r) for r in refs], turn))
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, expected))

    for run, model in zip(runs, RATINGS, strict=True):
        run.refresh_from_db()
        assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 4, 0), run.error
        scores = {
            int(s.item.key): (s.turn_values, s.judge_value)
            for s in Score.objects.filter(run=run).select_related("item")
        }
        assert scores == {
            qid: (list(pair), (pair[0] + pair[1]) / 2) for qid, pair in RATINGS[model].items()
        }
        assert JudgeRound.objects.filter(run=run, status="ok").count() == 8
        assert set(JudgeRound.objects.filter(run=run).values_list("turn", flat=True)) == {1, 2}

    board = build(task, Params(judge_id=judge.pk))
    table = board.turn_table
    assert table is not None and table.turns == 2
    got = {row.label: ([c.mean for c in row.turns], row.overall) for row in table.rows}
    assert got == {"model-a": ([7.75, 5.0], 6.375), "model-b": ([6.25, 5.25], 5.75)}
    assert [row.label for row in board.rows] == ["model-a", "model-b"]  # by overall

    page = viewer_client.get(f"/leaderboards/{task.slug}/?judge={judge.pk}").content.decode()
    assert 'id="turn-table"' in page
    assert '<td class="num" data-turn="1" title="n=4, answered=4">7.75</td>' in page
    assert '<td class="num" data-turn="2" title="n=4, answered=4">5.25</td>' in page
    assert '<td class="num" data-turn="overall">6.38</td>' in page  # 6.375 shown to 2 places
    export = f"/leaderboards/{task.slug}/export/?judge={judge.pk}&format="
    jsonl = viewer_client.get(export + "jsonl")
    records = [json.loads(line) for line in jsonl.content.splitlines()]
    assert {r["model"]: r["turns"] for r in records} == {
        "model-a": [7.75, 5.0],
        "model-b": [6.25, 5.25],
    }
    csv_text = viewer_client.get(export + "csv").content.decode("utf-8-sig")
    header, first = csv_text.splitlines()[:2]
    assert header.split(",")[header.split(",").index("rating.turn_1")] == "rating.turn_1"
    assert first.split(",")[header.split(",").index("rating.turn_2")] == "5.0"


# ---- the template names, against MT-Bench's own renderings ---------------------------------
def test_conversation_renders_as_mt_bench_multi_turn_prompts():
    q, a, r = ["Q one?", "Q two?"], ["A one.", "A two."], ["R one.", "R two."]
    transcript = [
        {"role": "user", "content": q[0]},
        {"role": "assistant", "content": a[0]},
        {"role": "user", "content": q[1]},
        {"role": "assistant", "content": a[1]},
    ]
    dialogue = Dialogue.of(transcript, r)
    fields = dict(question_1=q[0], question_2=q[1], answer_1=a[0], answer_2=a[1])
    refs = dict(ref_answer_1=r[0], ref_answer_2=r[1])

    def user(template: str, turn: int | None = None) -> str:
        messages = build_rubric_messages(
            subjects=RATING,
            response=a[1],
            dialogue=dialogue,
            turn=turn,
            user_prompt=template,
            reply_format="brackets",
        )
        return messages[-1]["content"]

    general = PROMPTS["single-v1-multi-turn"]["prompt_template"]
    assert user("{{ conversation }}") == general.format(**fields)
    math = PROMPTS["single-math-v1-multi-turn"]["prompt_template"]
    assert user("{{ reference_conversation }}\n\n\n{{ conversation }}") == math.format(
        **fields, **refs
    )
    # Judging turn 1 on its own: the dialogue up to it, its answer as the response.
    assert user("{{ conversation }}", turn=1) == (
        "<|The Start of Assistant A's Conversation with User|>\n\n### User:\nQ one?\n\n"
        "### Assistant A:\nA one.\n\n<|The End of Assistant A's Conversation with User|>"
    )
    assert user("{{ response }} / {{ reference }} / {{ turn.number }}", turn=1) == (
        "A one. / R one. / 1"
    )
    assert user("{% for t in turns %}{{ t.number }}:{{ t.answer }} {% endfor %}") == (
        "1:A one. 2:A two. "
    )
    # The pairwise multi-turn prompt compares whole dialogues.
    other = Dialogue.of(
        [m if m["role"] == "user" else {**m, "content": "B " + m["content"]} for m in transcript],
        r,
    )
    pairwise = PROMPTS["pair-v2-multi-turn"]["prompt_template"]
    messages = build_pairwise_messages(
        response_a=a[1],
        response_b="B " + a[1],
        dialogue_a=dialogue,
        dialogue_b=other,
        user_prompt="{{ conversation_a }}\n\n\n{{ conversation_b }}",
    )
    assert messages[-1]["content"] == pairwise.format(
        question_1=q[0],
        question_2=q[1],
        answer_a_1=a[0],
        answer_a_2=a[1],
        answer_b_1="B " + a[0],
        answer_b_2="B " + a[1],
    )
    default = build_pairwise_messages(
        response_a=a[1], response_b="B " + a[1], dialogue_a=dialogue, dialogue_b=other
    )[-1]["content"]
    assert "### Assistant A:\nA one." in default and "### Assistant B:\nB A two." in default


def test_a_template_that_fails_names_the_line():
    from apps.judges.judge_prompts import PromptError

    dialogue = Dialogue.of(
        [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    )
    with pytest.raises(PromptError, match=r"line 2: there is no turn 2: turns are numbered 1 to 1"):
        build_rubric_messages(
            subjects=RATING, response="A", dialogue=dialogue, user_prompt="x\n{{ turns[2].answer }}"
        )
    with pytest.raises(
        PromptError,
        match=r"line 1 uses \{\{ categry \}\}, which the item does not have; available: ",
    ):
        build_rubric_messages(
            subjects=RATING,
            response="A",
            dialogue=dialogue,
            user_prompt="{% if categry %}{% endif %}",
        )
    with pytest.raises(PromptError, match=r"line 3: .*'endif'"):
        build_rubric_messages(subjects=RATING, response="A", user_prompt="a\nb\n{% if x %}")
    # The sandbox: no attribute starting with _, nothing that changes data.
    with pytest.raises(PromptError, match="unsafe"):
        build_rubric_messages(subjects=RATING, response="A", user_prompt="{{ response.__class__ }}")


def test_placeholder_templates_render_as_they_did():
    """Only `{{ name }}` placeholders: substituted once, never expanded, field names with
    spaces allowed, a missing name refused naming it (the judges' first language)."""
    messages = build_rubric_messages(
        subjects=RATING,
        response="It says {{ reference }} and {% if %}",
        reference="R",
        fields={"my field": "F"},
        user_prompt="{{ my field }}: {{ response }} ({{ reference }})",
    )
    assert messages[-1]["content"] == "F: It says {{ reference }} and {% if %} (R)"
    from apps.judges.judge_prompts import PromptError

    with pytest.raises(PromptError, match=r"uses \{\{ nope \}\}, which the item does not have"):
        build_rubric_messages(subjects=RATING, response="x", user_prompt="{{ nope }}")


def test_the_judge_form_takes_a_template_that_picks_by_category(task, reviewer_client):
    from tests.judges.test_judge_pages import create_url, judge_form

    data = judge_form(
        name="mt-bench",
        subjects_text="rating 1 10",
        reply_format="brackets",
        per_turn="on",
        system_prompt=by_category_and_turn("system_prompt"),
        user_prompt=by_category_and_turn("prompt_template"),
    )
    response = reviewer_client.post(create_url(task), data)
    assert response.status_code == 302, response.content.decode()[-2000:]
    judge = Judge.objects.get(task=task, name="mt-bench")
    assert judge.per_turn and judge.user_prompt == by_category_and_turn("prompt_template")
    page = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert 'id="judge-per-turn"' in page and "each turn judged on its own" in page
    bad = judge_form(
        name="bad",
        subjects_text="rating 1 10",
        user_prompt="{{ turns[1].answer }}\n{% if category %}",
    )
    page = reviewer_client.post(create_url(task), bad).content.decode()
    assert "The prompt, line 2: Unexpected end of template." in page


# ---- per-turn judging: failures and retries -------------------------------------------------
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_failed_turn_fails_its_item_and_retry_asks_only_that_turn(task, endpoint, llm_server):
    from apps.runs.engine.launch import launch
    from tests.factories import make_conversation_dataset, make_generation_run

    dataset = make_conversation_dataset(task, [["Q0 one?", "Q0 two?"], ["Q1 one?", "Q1 two?"]])
    generation = make_multi_turn_run(
        dataset, {"d0": ["d0 says one.", "d0 says two."], "d1": ["d1 says one.", "d1 says two."]}
    )
    judge = make_judge(
        task,
        name="per-turn",
        subjects=RATING,
        user_prompt="Turn {{ turn.number }}: {{ turn.question }}\nAnswer: {{ response }}",
        reply_format="brackets",
        per_turn=True,
    )
    ratings = {"d0 says one.": 6, "d0 says two.": None, "d1 says one.": 9, "d1 says two.": 7}
    llm_server.configure(
        script=[
            {"match": f"Answer: {text}", "reply": f"Rating: [[{n}]]" if n else "Hm."}
            for text, n in ratings.items()
        ]
    )
    with transaction.atomic():
        run = create_judge_run(judge, endpoint=endpoint, source_run=generation)
    run_here(run)
    run.refresh_from_db()
    assert (run.done, run.failed) == (1, 1)
    failed = Score.objects.get(run=run, item__key="d0")
    assert failed.status == "failed" and failed.turn_values == [6, None]
    assert failed.error.endswith("(turn 2 of 2)"), failed.error
    assert Score.objects.get(run=run, item__key="d1").turn_values == [9, 7]
    assert Score.objects.get(run=run, item__key="d1").judge_value == 8

    llm_server.reset()
    llm_server.configure(script=[{"match": "Answer: d0 says two.", "reply": "Rating: [[3]]"}])
    with transaction.atomic():
        assert launch(run, Run.Mode.RETRY_FAILED) == 1
    run_here(run)
    asked = [entry["messages"][-1]["content"] for entry in llm_server.stats()["log"]]
    assert asked == ["Turn 2: Q0 two?\nAnswer: d0 says two."]  # turn 1's rating was kept
    score = Score.objects.get(run=run, item__key="d0")
    assert (score.status, score.turn_values, score.judge_value) == ("ok", [6, 3], 4.5)

    # Per turn over a single-turn run's answers: no answer to turn 1 to judge, said so.
    single = make_generation_run(dataset, {"d0": "Only the last turn answered."}, label="one")
    with transaction.atomic():
        other = create_judge_run(judge, endpoint=endpoint, source_run=single)
    run_here(other)
    score = Score.objects.get(run=other, item__key="d0")
    assert score.error_kind == "no_response"
    assert "turn 1 of the conversation has no answer to judge" in score.error
