"""The page "How evalsite computes its numbers" (#29): reachable from every board, behind the
login like every page, and naming the reference each number is pinned to."""

import pytest
from django.test import Client
from django.urls import reverse

from tests.base import make_user


@pytest.mark.django_db
def test_the_methods_page_names_each_method_and_its_reference() -> None:
    url = reverse("leaderboards:methods")
    assert Client().get(url).status_code == 302  # login first
    client = Client()
    client.force_login(make_user("viewer"))
    html = client.get(url).content.decode()
    for anchor in (
        "intervals",
        "pairs",
        "compare",
        "epochs",
        "bradley-terry",
        "agreement",
        "parsing",
        "corpus",
        "seed-formats",
        "reference-postprocess",
        "target-scores",
        "response-schema",
        "metric-board",
        "corrected",
        "style-control",
        "bias",
    ):
        assert f'id="{anchor}"' in html
    for text in (
        "Clopper–Pearson",
        'proportion_confint(method="beta")',
        "Learned-Miller",
        "binomtest",
        "sign-flip permutation test",
        "ttest_rel",
        "Holm",
        "cohens_kappa",
        "Normal(1000, 400",
        "Laplace",
        "Chen et al.",
        "corpus_bleu",
        'f1_score(average="macro")',
        "processed_output",
        "verify_response",
        "perf_metric",
        "PPI++",
        "ppi_mean_ci",
        "random sample",
        "LogisticRegression(C=1/precision",
        'cov_type="HC1"',
    ):
        assert text in html, text


@pytest.mark.django_db
def test_every_board_links_to_it(board_data) -> None:
    client = Client()
    client.force_login(make_user("viewer"))
    slug = board_data["task"].slug
    target = reverse("leaderboards:methods")
    for name in ("task", "compare", "agreement", "metrics"):
        html = client.get(reverse(f"leaderboards:{name}", args=[slug])).content.decode()
        assert f'href="{target}" id="methods-link"' in html, name
    # The pairwise board links it beside its ratings (tests/review/test_ab.py).
