"""Alignment over time (#14.3): judge–human agreement per version and per week of review,
pinned by hand; the task's threshold raises a notice on the board when the default judge's
latest week with enough reviews falls below it; setting it is for reviewers."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.judges.models import Judge, Score
from apps.leaderboards import alignment
from apps.leaderboards.models import BoardSettings
from tests.base import make_user
from tests.factories import (
    add_scores,
    make_answers_dataset,
    make_judge,
    make_judge_run,
    make_task,
    score,
    set_judging,
)

pytestmark = pytest.mark.django_db

N = 12


def review(run, reviewer, agree: set[int], when) -> None:
    """Confirm the items in `agree`, override the rest to 1; all dated `when`."""
    for i in range(N):
        s = score(run, f"q{i}", "accuracy")
        if i in agree:
            s.confirm(reviewer)
        else:
            s.override(1, reviewer, "no")
    Score.objects.filter(run=run).update(override_at=when, confirmed_at=None)
    Score.objects.filter(run=run, override_value__isnull=True).update(confirmed_at=when)


@pytest.fixture
def two_versions(reviewer_user):
    task = make_task()
    dataset = make_answers_dataset(task, N)
    subjects = [{"name": "accuracy", "min": 1, "max": 5}]
    v1 = make_judge(task, name="quality", subjects=subjects)
    v2 = Judge.objects.get(pk=v1.pk).save_as_new_version(reviewer_user)
    old, new = make_judge_run(dataset, v1), make_judge_run(dataset, v2)
    add_scores(old, {f"q{i}": {"accuracy": 4} for i in range(N)})
    add_scores(new, {f"q{i}": {"accuracy": 4.4 if i < 9 else 3} for i in range(N)})
    two_weeks_ago = timezone.now() - timedelta(days=14)
    review(old, reviewer_user, agree={0, 1, 2}, when=two_weeks_ago)  # 3 of 12
    review(new, reviewer_user, agree=set(range(9)), when=timezone.now())  # 9 of 12
    return task, v1, v2


def test_agreement_by_version_and_by_week_pinned_by_hand(two_versions) -> None:
    _, _, v2 = two_versions
    (entry,) = alignment.history(v2)
    by_version = {p.label: p for p in entry.by_version}
    assert (by_version["v1"].n, by_version["v1"].agreement) == (N, 3 / 12)
    # v1 said 4 everywhere; people left 4 on 3 items and 1 on 9: |4 − 1| × 9 / 12.
    assert by_version["v1"].mad == pytest.approx(27 / 12)
    # v2 said 4.4 (rounds to 4, confirmed: people's value is 4.4 too) on 9, 3 on the rest.
    assert by_version["v2"].agreement == 9 / 12
    assert by_version["v2"].mad == pytest.approx(3 * 2 / 12)
    assert [p.n for p in entry.by_week] == [N, N]
    assert [p.agreement for p in entry.by_week] == [3 / 12, 9 / 12]
    monday = timezone.localtime(timezone.now())
    monday = (monday - timedelta(days=monday.weekday())).date().isoformat()
    assert entry.by_week[-1].label == monday


def test_the_board_warns_when_the_default_judge_falls_below_the_threshold(
    two_versions, reviewer_client
) -> None:
    task, v1, v2 = two_versions
    viewer_client = Client()  # the client fixtures share one client
    viewer_client.force_login(make_user("viewer", "watcher"))
    set_judging(task, default_judge=v2)
    board = reverse("leaderboards:task", args=[task.slug])
    assert "alignment-alarm" not in viewer_client.get(board).content.decode()  # no threshold
    url = reverse("leaderboards:alignment-threshold", args=[v2.pk])
    assert viewer_client.post(url, {"alignment_threshold": "0.8"}).status_code == 403
    reviewer_client.post(url, {"alignment_threshold": "1.5"})
    assert BoardSettings.of(task.pk).alignment_threshold is None
    reviewer_client.post(url, {"alignment_threshold": "0.8"})
    assert BoardSettings.of(task.pk).alignment_threshold == 0.8
    page = reviewer_client.get(board).content.decode()
    assert 'class="msg msg-error alignment-alarm"' in page and "75% of the 12 accuracy" in page
    BoardSettings.objects.filter(task=task).update(alignment_threshold=0.7)
    assert "alignment-alarm" not in reviewer_client.get(board).content.decode()
    # The alarm reads the default judge's own scores: v1's latest week (25%) is below 0.7 even
    # though this week's reviews (of v2, 75%) are not.
    set_judging(task, default_judge=v1)
    page = reviewer_client.get(board).content.decode()
    assert "default judge quality v1 agreed with people on 25% of the 12" in page
    page = reviewer_client.get(reverse("leaderboards:judge-alignment", args=[v2.pk]))
    html = page.content.decode()
    assert html.count('class="by-version"') == 2 and html.count('class="by-week"') == 2


def test_a_kept_history_follows_a_new_review(two_versions, reviewer_user) -> None:
    """history() is memoised by the runs' results and the last score event: a confirmation
    withdrawn (revert) after a first look shows at once, as a fresh computation gives it."""
    from apps.leaderboards import memo

    _, _, v2 = two_versions
    (before,) = alignment.history(v2)
    assert {p.label: p.n for p in before.by_version} == {"v1": N, "v2": N}
    run = v2.judge_runs.get().run
    score(run, "q0", "accuracy").revert(reviewer_user, "not sure")
    (after,) = alignment.history(v2)
    assert {p.label: p.n for p in after.by_version} == {"v1": N, "v2": N - 1}
    memo.clear_all()
    assert repr(alignment.history(v2)) == repr([after])
