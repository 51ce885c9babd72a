"""Log-likelihood choice scoring (#15.4): options scored through the loopback server's
completions API with scripted log-probabilities, picks checked against values worked by hand
(tests/factories.py CHOICE_LOGPROBS), the refusals before a run exists, and accuracy on the
board through the choice judge that follows a finished run."""

import csv
import io
import json
import subprocess
import sys
import time

import pytest

from apps.datasets.models import Task
from apps.judges.launching import JudgeRunError, create_judge_run
from apps.judges.models import CHOICE_JUDGE, Judge, Score
from apps.leaderboards import boards, exports
from apps.runs.engine.chunk import run_chunk
from apps.runs.engine.launch import launch
from apps.runs.kinds.choices import (
    Asking,
    ChoiceRunError,
    ProbeRefused,
    check_first_item,
    create_choice_run,
    probe_endpoint,
)
from apps.runs.models import AttemptLog, ChoiceSetup, Endpoint, PromptTemplate, Response, Run
from tests.base import ROOT, make_user, subprocess_env, wait_for
from tests.factories import (
    CHOICE_LOGPROBS,
    make_answers_dataset,
    make_choice_dataset,
    make_dataset,
    make_generation_run,
    make_judge,
    set_judging,
)
from tests.runs.conftest import kill_hard
from tests.runs.test_cli import start_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def choice_template(task: Task) -> PromptTemplate:
    return PromptTemplate.objects.create(
        task=task, name="mc", user_message="Q: {{ question }}\nAnswer:"
    )


def run_all(run: Run) -> Run:
    """Every chunk of the run's launch, in this process (no worker)."""
    run.refresh_from_db()
    run_chunk(run.pk, run.launch, 0)
    run.refresh_from_db()
    return run


def test_picks_and_scores_match_the_hand_computed_values(
    task, endpoint, choice_template, llm_server, settings, reviewer_client
):
    settings.PRICE_TABLE = {"test-model": [1.5, 6.0]}
    llm_server.configure(word_logprobs=CHOICE_LOGPROBS)
    dataset = make_choice_dataset(task)
    # A rule-based multiple-choice default judge reads the raw pick like any answer.
    default = make_judge(task, Judge.Kind.MCQ_RULE, name="mc-rule", label_count=3)
    set_judging(task, default_judge=default)
    run = create_choice_run(dataset, endpoint, choice_template, logging_mode="all")
    setup = ChoiceSetup.objects.get(run=run)
    assert (setup.option_columns, setup.label_type) == (["A", "B", "C"], "upper")
    run = run_all(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 2, 0)

    c1 = Response.objects.get(run=run, item__key="c1")
    assert (c1.text, c1.details["pick"], c1.details["pick_norm"]) == ("A", "A", "B")
    options = {o["label"]: o for o in c1.details["options"]}
    assert [options[k]["logprob"] for k in "ABC"] == [-2.0, -2.5, -3.0]
    assert [options[k]["tokens"] for k in "ABC"] == [1, 2, 1]
    assert [options[k]["chars"] for k in "ABC"] == [6, 14, 6]
    assert options["B"]["logprob_per_char"] == pytest.approx(-2.5 / 14)
    assert options["A"]["logprob_per_char"] == pytest.approx(-1 / 3)
    c2 = Response.objects.get(run=run, item__key="c2")
    assert (c2.text, c2.details["pick"], c2.details["pick_norm"]) == ("A", "A", "A")
    assert [o["logprob"] for o in c2.details["options"]] == [-0.5, -2.5, -4.0]
    assert c2.details["context_chars"] == len("Q: Which planet is red?\nAnswer:")

    # One request per item with the three prompts, echo + logprobs and nothing generated; the
    # probe before the run sent the first item's request exactly so.
    sent = [e for e in llm_server.stats()["log"] if e.get("api") == "completions"]
    probe, *items = sent
    assert len(items) == 2
    assert (probe["prompt"], probe["params"]) == (items[0]["prompt"], items[0]["params"])
    assert probe["prompt"][1] == "Q: Which gas do plants take in?\nAnswer: Carbon dioxide"
    c2_request = next(e for e in items if "red?" in e["prompt"][0])
    assert c2_request["prompt"] == [
        "Q: Which planet is red?\nAnswer: Mars",
        "Q: Which planet is red?\nAnswer: Venus",
        "Q: Which planet is red?\nAnswer: Jupiter",
    ]
    assert c2_request["params"] == {"echo": True, "logprobs": 1, "max_tokens": 0}
    # Tokens and cost as the server counted them: "Q:", " Which", " planet", " is", " red?",
    # "\nAnswer:" and the option's one word, three times.
    assert c2.prompt_tokens == 21 and run.prompt_tokens == c1.prompt_tokens + 21
    assert c2.cost == pytest.approx(21 * 1.5 / 1_000_000)
    assert run.cost == pytest.approx((c1.prompt_tokens + 21) * 1.5 / 1_000_000)
    log = AttemptLog.objects.get(run=run, item__key="c2")
    assert log.ok and [m["role"] for m in log.request_messages] == ["prompt"] * 3

    # Exports: the raw pick is the response, the normalised one beside it; JSONL has all.
    exported = "".join(exports.results_csv(run)).lstrip("\ufeff")
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert [(r["key"], r["response"], r["pick_norm"]) for r in rows] == [
        ("c1", "A", "B"),
        ("c2", "A", "A"),
    ]
    first = json.loads(next(iter(exports.results_jsonl(run))))
    assert [o["logprob"] for o in first["details"]["options"]] == [-2.0, -2.5, -3.0]

    # The choice judge followed by itself; the board shows both accuracies.
    judge = Judge.objects.get(task=task, name=CHOICE_JUDGE)
    judge_run = Run.objects.get(kind=Run.Kind.JUDGE, judged_with__judge=judge, source_run=run)
    run_all(judge_run)
    values = {
        (s.item.key, s.subject): s.judge_value
        for s in Score.objects.filter(run=judge_run).select_related("item")
    }
    assert values == {
        ("c1", "accuracy"): 0.0,
        ("c1", "accuracy_norm"): 100.0,
        ("c2", "accuracy"): 100.0,
        ("c2", "accuracy_norm"): 100.0,
    }
    board = boards.build(task, boards.Params.from_query({"judge": str(judge.pk)}))
    assert [s.name for s in board.subjects] == ["accuracy", "accuracy_norm"]
    (row,) = board.rows
    assert row.label == run.label
    assert row.cells["judge"]["accuracy"].mean == 50.0
    assert row.cells["judge"]["accuracy_norm"].mean == 100.0

    default_run = Run.objects.get(kind=Run.Kind.JUDGE, judged_with__judge=default, source_run=run)
    run_all(default_run)
    assert dict(Score.objects.filter(run=default_run).values_list("item__key", "judge_value")) == {
        "c1": 0.0,
        "c2": 100.0,
    }
    # A choice judge scores nothing but choice-scoring runs: its page offers only those.
    answers = make_answers_dataset(task, 1)
    page = reviewer_client.get(judge.get_absolute_url()).content.decode()
    assert f'value="run:{run.pk}"' in page and 'value="column:' not in page
    page = reviewer_client.get(default.get_absolute_url()).content.decode()
    assert f'value="run:{run.pk}"' in page and f'value="column:{answers.pk}:' in page
    with pytest.raises(JudgeRunError, match="scores choice-scoring runs only"):
        create_judge_run(judge, source_run=make_generation_run(dataset, {0: "A", 1: "A"}))


def test_a_chat_only_endpoint_is_refused_before_any_run(
    task, endpoint, choice_template, llm_server
):
    llm_server.configure(completions="absent")
    dataset = make_choice_dataset(task)
    with pytest.raises(ChoiceRunError) as refused:
        create_choice_run(dataset, endpoint, choice_template)
    message = str(refused.value)
    assert message.startswith("Endpoint local cannot score choices by log-likelihood: ")
    assert f"no completions API at {llm_server.base_url} (404)" in message
    assert not Run.objects.exists() and not ChoiceSetup.objects.exists()


@pytest.mark.parametrize(
    ("mode", "cause"),
    [
        ("zero", "item c1: Every option's log-probability is 0"),
        ("null", "returned no log-probabilities for the prompt"),
    ],
)
def test_missing_or_all_zero_logprobs_are_refused(
    task, endpoint, choice_template, llm_server, mode, cause
):
    """llama.cpp#27174 scored every choice 0: such a server is refused, never scored."""
    llm_server.configure(completions=mode)
    with pytest.raises(ChoiceRunError, match=cause):
        create_choice_run(make_choice_dataset(task), endpoint, choice_template)
    assert not Run.objects.exists()


def test_items_fail_one_by_one_with_the_cause(task, endpoint, choice_template, llm_server):
    """An empty option, and zero log-probabilities that start mid-run: failed, never 0."""
    rows = [
        {"key": "ok", "fields": {"question": "red?", "A": "Mars", "B": "Venus"}, "reference": "A"},
        {"key": "gap", "fields": {"question": "gas?", "A": "Oxygen", "B": ""}, "reference": "A"},
        {"key": "late", "fields": {"question": "hot?", "A": "Sun", "B": "Moon"}, "reference": "A"},
    ]
    dataset = make_dataset(task, rows, columns=["question", "A", "B"])
    run = create_choice_run(dataset, endpoint, choice_template)
    llm_server.configure(
        script=[{"match": "hot?", "status": 400}], word_logprobs={"Mars": -1, "Venus": -2}
    )
    run = run_all(run)
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED_WITH_FAILURES, 1, 2)
    gap = Response.objects.get(run=run, item__key="gap")
    assert gap.error == "Bad item data: The item has no value in option column “B”."
    late = Response.objects.get(run=run, item__key="late")
    assert late.error.startswith("the request was refused (400)")

    llm_server.configure(script=[], completions="zero")
    launch(run, Run.Mode.RETRY_FAILED)
    run = run_all(run)
    late.refresh_from_db()
    assert late.status == Response.Status.FAILED
    assert late.error.startswith("Every option's log-probability is 0")
    assert Response.objects.get(run=run, item__key="ok").text == "A"


def test_option_columns_and_labels(task, endpoint, choice_template, llm_server):
    """One column holding a list of options, digit labels; unknown columns are refused."""
    rows = [
        {"key": "l1", "fields": {"question": "red?", "opts": ["Venus", "Mars"]}, "reference": "2"}
    ]
    dataset = make_dataset(task, rows, columns=["question", "opts"])
    with pytest.raises(ChoiceRunError, match="has no columns named A, B, C"):
        create_choice_run(dataset, endpoint, choice_template)
    with pytest.raises(ChoiceRunError, match="has no column 'nope'"):
        create_choice_run(dataset, endpoint, choice_template, option_columns=["nope"])
    llm_server.configure(word_logprobs={"Mars": -0.5, "Venus": -1.0})
    run = create_choice_run(
        dataset, endpoint, choice_template, option_columns=["opts"], label_type="digit"
    )
    run = run_all(run)
    response = Response.objects.get(run=run)
    assert (response.text, response.details["pick_norm"]) == ("2", "2")
    assert [o["label"] for o in response.details["options"]] == ["1", "2"]


def test_the_endpoint_probe_needs_no_run(task, endpoint, choice_template, llm_server):
    first = check_first_item(make_choice_dataset(task), choice_template, ["A", "B", "C"], "upper")
    assert probe_endpoint(endpoint, first) == (Asking(), "")
    llm_server.configure(completions="absent")
    with pytest.raises(ProbeRefused, match=r"\(404\)"):
        probe_endpoint(Endpoint.objects.get(pk=endpoint.pk), first)


# ---- the command line: real command processes and a real worker ---------------------------------
@pytest.mark.slow
def test_cli_scores_choices_and_the_board_shows_both_accuracies(
    task, endpoint, choice_template, llm_server, workers
):

    llm_server.configure(word_logprobs=CHOICE_LOGPROBS)
    dataset = make_choice_dataset(task)
    workers()
    result = start_run(
        "choice",
        *("--dataset", str(dataset.pk), "--endpoint", "local", "--template", "mc"),
        *("--label", "ll-model", "--wait", "--poll", "0.3"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = Run.objects.get(kind=Run.Kind.CHOICE)
    assert result.stdout.splitlines()[0] == f"Started run #{run.pk} (ll-model): 2 items."
    assert f"run #{run.pk} completed: 2 done, 0 failed of 2" in result.stdout
    assert list(Response.objects.filter(run=run).order_by("item__position").values_list(
        "text", "details__pick_norm")) == [("A", "B"), ("A", "A")]  # fmt: skip
    # The worker judges it by itself; the board, as the leaderboard command prints it.
    deadline = time.monotonic() + 60
    while not Run.objects.filter(
        kind=Run.Kind.JUDGE, source_run=run, status=Run.Status.COMPLETED
    ).exists():
        assert time.monotonic() < deadline, "the choice judge did not finish"
        time.sleep(0.3)
    board = subprocess.run(
        [sys.executable, "manage.py", "leaderboard", task.slug, "--judge", CHOICE_JUDGE,
         "--format", "csv"],
        cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    (row,) = list(csv.DictReader(io.StringIO(board.stdout.lstrip("\ufeff"))))
    assert row["model"] == "ll-model"
    assert float(row["accuracy.human.mean"]) == 50.0
    assert float(row["accuracy_norm.human.mean"]) == 100.0
    assert row["judge"] == f"{CHOICE_JUDGE} v1"


def test_cli_refuses_a_chat_only_endpoint_and_leaves_no_run(
    task, endpoint, choice_template, llm_server
):
    llm_server.configure(completions="absent")
    dataset = make_choice_dataset(task)
    result = start_run(
        "choice", *("--dataset", str(dataset.pk), "--endpoint", "local", "--template", "mc")
    )
    assert result.returncode != 0
    assert "Endpoint local cannot score choices by log-likelihood" in result.stderr
    assert "no completions API" in result.stderr
    assert not Run.objects.exists()


@pytest.mark.slow
def test_a_killed_worker_loses_no_pick_and_the_run_finishes(
    task, endpoint, choice_template, llm_server, workers
):
    """SIGKILL the worker mid-run: another worker finishes the run, every item has exactly one
    Response, and the picks written before the kill are kept as they were."""
    rows = [
        {
            "key": f"k{i}",
            "fields": {"question": f"Planet {i}?", "A": "Mars", "B": "Venus", "C": "Jupiter"},
            "reference": "A",
        }
        for i in range(40)
    ]
    dataset = make_dataset(task, rows, columns=["question", "A", "B", "C"])
    endpoint.concurrency_limit = 2
    endpoint.save()
    llm_server.configure(word_logprobs=CHOICE_LOGPROBS, latency=0.2)
    run = create_choice_run(dataset, endpoint, choice_template, chunk_size=10)
    first = workers()
    wait_for(lambda: Run.objects.get(pk=run.pk).done >= 6, what="some picks")
    kill_hard(first)
    before = {
        r["item_id"]: (r["pk"], r["text"], r["updated_at"])
        for r in Response.objects.filter(run=run).values("pk", "item_id", "text", "updated_at")
    }
    assert 6 <= len(before) < 40
    workers()
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED, 120, "the run to end"
    )
    run.refresh_from_db()
    assert (run.done, run.failed) == (40, 0)
    after = Response.objects.filter(run=run)
    assert after.count() == 40 and set(after.values_list("text", flat=True)) == {"A"}
    kept = {
        r["item_id"]: (r["pk"], r["text"], r["updated_at"])
        for r in after.filter(item_id__in=before).values("pk", "item_id", "text", "updated_at")
    }
    assert kept == before
    # Tokens add up over the responses the run kept (each item's one request).
    assert run.prompt_tokens >= sum(after.values_list("prompt_tokens", flat=True)) > 0


def test_only_reviewers_and_admins_start_choice_runs(task, endpoint, choice_template, client):
    dataset = make_choice_dataset(task)
    client.force_login(make_user("viewer"))
    assert client.get(f"/runs/new/choice/?dataset={dataset.pk}").status_code == 403
    posted = client.post(
        "/runs/new/choice/start/",
        {"task": task.slug, "dataset": dataset.pk, "endpoint": endpoint.pk},
    )
    assert posted.status_code == 403 and not Run.objects.exists()
    client.force_login(make_user("reviewer"))
    page = client.get(f"/runs/new/choice/?dataset={dataset.pk}").content.decode()
    assert 'id="choice-form"' in page and 'name="option_columns"' in page
