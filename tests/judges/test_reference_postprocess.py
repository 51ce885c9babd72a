"""Post-processing of the reference as well as the prediction (#29.12, second point):
UltraEval's processed_output, where gsm8k's worked answer "… #### 72" is compared as "72"."""

import pytest
from django.urls import reverse

from apps.judges.metrics import MetricError, evaluate, processed_references
from apps.judges.models import Judge
from apps.judges.scoring import JudgeSpec, score_text
from tests.factories import make_judge

# gsm8k's answer field as the dataset ships it: the worked solution, then "#### " and the number.
GSM8K = [
    (
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
        "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
        "Natalia sold 72 clips in total, so the answer is 72.",
    ),
    (
        "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n"
        "Working 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
        "She earned $10",
    ),
    ("In total, 1,200 - 300 = <<1200-300=900>>900 remain.\n#### 900", "So 900 remain."),
    ("The balance is −5 dollars.\n#### -5", "She owes money: −5"),
]


def ultraeval_processed_output(output: str) -> str:
    """What UltraEval's gsm8k transform keeps of the answer for scoring: the text after
    "#### " (its processed_output), written here from its docs, not with evalsite's code."""
    return output.split("#### ")[-1].strip().replace(",", "")


@pytest.mark.parametrize(("reference", "response"), GSM8K)
def test_the_reference_post_processed_is_ultraevals_processed_output(reference, response):
    assert processed_references("last_number", [reference]) == [
        ultraeval_processed_output(reference)
    ]
    # Exact match after Last number on both sides: right; on the response only: wrong.
    assert evaluate("exact_match", response, [reference], postprocess="last_number") == 0
    assert (
        evaluate(
            "exact_match",
            response,
            [reference],
            postprocess="last_number",
            postprocess_reference=True,
        )
        == 100
    )


def test_the_judge_option_reaches_the_score():
    spec = JudgeSpec(
        kind="metric", metric="exact_match", postprocess="last_number", postprocess_reference=True
    )
    reference, response = GSM8K[0]
    assert score_text(spec, response, [reference]).values == {"exact_match": 100.0}
    plain = JudgeSpec(kind="metric", metric="exact_match", postprocess="last_number")
    assert score_text(plain, response, [reference]).values == {"exact_match": 0.0}


def test_a_reference_post_processed_to_nothing_fails_with_the_reason():
    with pytest.raises(MetricError, match=r"Post-processing the reference \(last_number\) left"):
        evaluate(
            "exact_match",
            "72",
            ["seventy-two"],
            postprocess="last_number",
            postprocess_reference=True,
        )
    # One reference without a number beside one with: the other one counts.
    assert evaluate("exact_match", "72", ["seventy-two", "#### 72"], postprocess="last_number",
                    postprocess_reference=True) == 100  # fmt: skip


@pytest.mark.django_db
def test_the_judge_form_sets_it_and_the_judge_page_says_it(admin_client):
    from tests.factories import make_task

    task = make_task("gsm8k")
    response = admin_client.post(
        reverse("judges:create") + f"?task={task.slug}",
        {
            "name": "gsm8k-em",
            "kind": Judge.Kind.METRIC,
            "metric": "exact_match",
            "postprocess": "last_number",
            "postprocess_reference": "on",
            "label_type": "upper",
            "label_count": 4,
            "n_iter": 1,
            "aggregation": "mean",
            "reply_format": "json",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    judge = Judge.objects.get(task=task, name="gsm8k-em")
    assert judge.postprocess_reference is True
    page = admin_client.get(judge.get_absolute_url()).content.decode()
    assert "of the response and of the reference" in page
    other = make_judge(task, Judge.Kind.METRIC, name="em", postprocess="last_number")
    page = admin_client.get(other.get_absolute_url()).content.decode()
    assert "of the response (the reference as written)" in page
