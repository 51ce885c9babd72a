"""The release gate (#30.4): `manage.py gate` exits 1 on a scripted regression, 0 on noise of the
margin's size, 2 on five items (with the items needed at 80 % power), and its JUnit XML is read
by a JUnit parser."""

import io
import math
from pathlib import Path

import junitparser
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from apps.judges.models import Score
from apps.leaderboards.gate import REGRESSED, compare, markdown, side
from apps.runs.models import Endpoint, Run
from tests import factories as f
from tests.base import make_user

pytestmark = pytest.mark.django_db

SUBJECTS = [{"name": "accuracy", "min": 1, "max": 5}, {"name": "clarity", "min": 1, "max": 5}]


def models(n: int, baseline, candidate, subjects=SUBJECTS) -> tuple[Run, Run]:
    """Two judged models of one judge on n items: baseline(i) and candidate(i) give item i's
    first subject (accuracy); the second (clarity) is 4 for both everywhere."""
    task = f.make_task("gate")
    dataset = f.make_items(task, n)
    judge = f.make_judge(task, name="quality", subjects=subjects)
    f.set_judging(task, default_judge=judge)
    runs = []
    for label, value in (("model-a", baseline), ("model-b", candidate)):
        run = f.make_judge_run(dataset, judge, label=label)
        first, second = (s["name"] for s in subjects)
        f.add_scores(run, {f"k{i}": {first: value(i), second: 4} for i in range(n)})
        runs.append(run)
    return runs[0], runs[1]


def gate(*options: str) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("gate", "--task", "gate", *options, stdout=out, stderr=io.StringIO())
    return int(ended.value.code), out.getvalue()


def test_a_scripted_regression_exits_1_naming_the_subject_and_its_items(tmp_path: Path) -> None:
    dropped = set(range(0, 40, 2))  # 20 of 40 items fall from 4 to 2
    models(40, lambda i: 4, lambda i: 2 if i in dropped else 4)
    junit_file = tmp_path / "gate.xml"
    code, out = gate(
        "--baseline", "model-a", "--candidate", "model-b", "--margin", "0.25",
        "--junit", str(junit_file),
    )  # fmt: skip
    assert code == 1, out
    assert out.startswith("## evalsite gate: regressed (exit 1)\n")
    assert "Regression: model-b is worse than model-a beyond the margin on accuracy." in out
    assert "### Items that regressed on accuracy (20)" in out
    for i in dropped:
        assert f"| k{i} | 4 | 2 |" in out
    # The JUnit file, read by a JUnit parser: accuracy failed, clarity passed.
    suite = next(iter(junitparser.JUnitXml.fromfile(str(junit_file))))
    assert (suite.tests, suite.failures, suite.skipped, suite.errors) == (2, 1, 0, 0)
    cases = {case.name.split(":")[0]: case for case in suite}
    (failure,) = cases["accuracy"].result
    assert isinstance(failure, junitparser.Failure) and failure.type == "regression"
    assert failure.message.startswith("regressed: 40 items; change -1 ")
    assert sorted(failure.text.splitlines()) == sorted(f"k{i}: 4 -> 2" for i in dropped)
    assert cases["clarity"].is_passed


def test_noise_the_size_of_the_margin_exits_0(tmp_path: Path) -> None:
    noise = np.random.default_rng(30).normal(0.0, 0.5, 60)
    models(60, lambda i: 3.0, lambda i: 3.0 + float(noise[i]))
    code, out = gate(
        "--baseline", "model-a", "--candidate", "model-b", "--subject", "accuracy",
        "--margin", "0.5", "--junit", str(tmp_path / "gate.xml"),
    )  # fmt: skip
    assert code == 0, out
    assert "No significant regression of model-b against model-a beyond the margin." in out
    suite = next(iter(junitparser.JUnitXml.fromfile(str(tmp_path / "gate.xml"))))
    assert (suite.tests, suite.failures, suite.skipped) == (1, 0, 0)


def test_five_items_exit_2_with_the_items_needed_at_80_percent_power(tmp_path: Path) -> None:
    candidate = [3, 2, 4, 2.5, 3]
    models(5, lambda i: 3, lambda i: candidate[i])
    code, out = gate(
        "--baseline", "model-a", "--candidate", "model-b", "--subject", "accuracy",
        "--margin", "0.5", "--junit", str(tmp_path / "gate.xml"),
    )  # fmt: skip
    assert code == 2, out
    # Changes 0, −1, 1, −0.5, 0: sd √0.55; ((z0.975 + z0.80) · sd / margin)² = 17.27 → 18 items.
    by_hand = math.ceil(((1.959964 + 0.841621) * math.sqrt(0.55) / 0.5) ** 2)
    assert by_hand == 18
    assert (
        "Not enough items to tell on accuracy: 18 paired items are needed to see a regression "
        "of the margin at 80% power." in out
    )
    suite = next(iter(junitparser.JUnitXml.fromfile(str(tmp_path / "gate.xml"))))
    assert (suite.tests, suite.failures, suite.skipped) == (1, 0, 1)
    (skipped,) = next(iter(suite)).result
    assert isinstance(skipped, junitparser.Skipped)
    assert skipped.message.startswith("not enough items: 18 needed; 5 items")


# Errors per answer, 0 to 10, lower is better; clarity as before.
LOWER = [{"name": "errors", "min": 0, "max": 10, "higher_is_better": False}, SUBJECTS[1]]


def test_a_lower_is_better_subject_regresses_when_it_rises_and_holds_when_it_falls(
    tmp_path: Path,
) -> None:
    risen = set(range(0, 40, 2))  # 20 of 40 answers go from 1 error to 3
    models(40, lambda i: 1, lambda i: 3 if i in risen else 1, LOWER)
    code, out = gate(
        "--baseline", "model-a", "--candidate", "model-b", "--subject", "errors",
        "--margin", "0.25", "--junit", str(tmp_path / "gate.xml"),
    )  # fmt: skip
    assert code == 1, out
    assert "Regression: model-b is worse than model-a beyond the margin on errors." in out
    assert "### Items that regressed on errors (20)" in out
    for i in risen:
        assert f"| k{i} | 1 | 3 |" in out
    suite = next(iter(junitparser.JUnitXml.fromfile(str(tmp_path / "gate.xml"))))
    (failure,) = next(iter(suite)).result
    # The change is told "better" positive: errors up by 1 on average is a change of −1.
    assert isinstance(failure, junitparser.Failure)
    assert failure.message.startswith("regressed: 40 items; change -1 ")
    # The same models the other way round: errors fall, which no margin calls a regression.
    code, out = gate(
        "--baseline", "model-b", "--candidate", "model-a", "--subject", "errors",
        "--margin", "0.25",
    )  # fmt: skip
    assert code == 0, out
    assert "No significant regression of model-a against model-b beyond the margin." in out


def test_a_failed_item_counts_at_a_lower_is_better_subjects_worst_value() -> None:
    baseline, candidate = models(30, lambda i: 2, lambda i: 2, LOWER)
    Score.objects.filter(run=candidate, item__key="k7", subject="errors").update(
        status="failed", judge_value=None, final_value=None
    )
    (errors,) = compare(baseline, candidate, "errors", margin=0.0).subjects
    # Strictly scored, k7's errors are the scale's worst, 10: a change of −(10 − 2) = −8.
    assert errors.n == 30 and errors.mean_change == pytest.approx(-8 / 30)
    assert [(item.key, item.baseline, item.candidate, item.change) for item in errors.worse] == [
        ("k7", 2.0, 10.0, -8.0)
    ]


def test_the_gate_pairs_items_and_uses_human_values_and_strict_scoring() -> None:
    reviewer = make_user("reviewer")
    baseline, candidate = models(30, lambda i: 4, lambda i: 4)
    # A reviewer lowers ten of the candidate's values; a failed item counts at the worst (1).
    for i in range(10):
        f.score(candidate, f"k{i}", "accuracy").override(2.0, user=reviewer, reason="wrong")
    Score.objects.filter(run=candidate, item__key="k29", subject="accuracy").update(
        status="failed", judge_value=None, final_value=None
    )
    result = compare(baseline, candidate, "accuracy", margin=0.0)
    (accuracy,) = result.subjects
    assert accuracy.n == 30
    assert accuracy.mean_change == pytest.approx((10 * -2 + -3) / 30)
    assert accuracy.verdict == REGRESSED
    assert [item.key for item in accuracy.worse] == ["k29", *(f"k{i}" for i in range(10))]
    assert "| k29 | 4 | 1 |" in markdown(result)


def test_model_output_in_a_label_cannot_break_the_summary() -> None:
    baseline, candidate = models(5, lambda i: 3, lambda i: 3)
    Run.objects.filter(pk=candidate.pk).update(label="<script>x</script> | pwned")
    candidate.refresh_from_db()
    text = markdown(compare(baseline, candidate))
    assert "<script>" not in text and "&lt;script&gt;x&lt;/script&gt; \\| pwned" in text


def test_an_unjudged_run_gets_its_judge_run_and_the_gate_waits_for_it(llm_server) -> None:
    task = f.make_task("gate")
    dataset = f.make_qa_dataset(task, 3)
    judge = f.make_judge(task, name="quality", subjects=SUBJECTS)
    endpoint = Endpoint.objects.create(name="loop", base_url=llm_server.base_url, model="m")
    f.set_judging(task, default_judge=judge, default_judge_endpoint=endpoint)
    answers = f.make_generation_run(dataset, {0: "0", 1: "2", 2: "4"}, label="model-a")
    found = side(task, str(answers.pk), judge)
    assert found.judged is not None and found.judged.source_run_id == answers.pk
    assert not found.ready and found.waiting_for.startswith(f"judge run #{found.judged.pk}")
    # Asked again, the same judge run: the gate waits for it rather than starting another.
    assert side(task, "model-a", judge).judged == found.judged
    with pytest.raises(CommandError) as raised:
        call_command(
            "gate", "--task", "gate", "--baseline", str(answers.pk), "--candidate", "model-a",
            "--timeout", "0", stdout=io.StringIO(), stderr=io.StringIO(),
        )  # fmt: skip
    assert raised.value.returncode == 3
    assert f"still waiting for judge run #{found.judged.pk}" in str(raised.value)


def test_what_cannot_be_compared_is_said_with_exit_3() -> None:
    models(5, lambda i: 3, lambda i: 3)
    for options, message in (
        (
            ("--baseline", "nobody", "--candidate", "model-b"),
            "gate has no model labelled 'nobody'.",
        ),
        (("--baseline", "999999", "--candidate", "model-b"), "gate has no run #999999."),
        (
            ("--baseline", "model-a", "--candidate", "model-b", "--subject", "tone"),
            "has no subject 'tone'",
        ),
    ):
        with pytest.raises(CommandError) as raised:
            call_command("gate", "--task", "gate", *options, stdout=io.StringIO())
        assert raised.value.returncode == 3 and message in str(raised.value)
