"""Score.override / confirm / revert: the judge's value is kept, every change is history,
and a change made on an old revision is refused (the conflict rule)."""

import threading

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import close_old_connections

from apps.judges.models import Score, ScoreEvent, StaleScore
from tests.base import make_user
from tests.factories import fail_item, make_item, scenario


@pytest.fixture
def score(db) -> Score:
    run, items = scenario(1)
    return Score.objects.get(run=run, item=items[0], subject="accuracy")


@pytest.fixture
def alice(db):
    return make_user("reviewer", "alice")


@pytest.fixture
def bob(db):
    return make_user("reviewer", "bob")


def test_override_keeps_the_judge_value_and_records_who_when_why(score, alice):
    score.override(5, alice, "  The answer is fully right.  ", expected_revision=0)
    score.refresh_from_db()
    assert (score.judge_value, score.override_value, score.final_value) == (3, 5, 5)
    assert score.override_by == alice and score.override_at is not None
    assert score.override_reason == "The answer is fully right."
    assert score.revision == 1 and score.is_reviewed and score.is_overridden
    event = score.events.get()
    assert (event.kind, event.old_value, event.new_value, event.user) == ("override", 3, 5, alice)
    assert event.reason == "The answer is fully right."


@pytest.mark.parametrize(
    ("value", "reason", "field"),
    [
        (5, "", "reason"),
        (5, "   ", "reason"),
        (6, "too low", "value"),
        (0.5, "x", "value"),
        (float("nan"), "x", "value"),
        (float("inf"), "x", "value"),
    ],
)
def test_override_needs_a_reason_and_a_value_in_range(score, alice, value, reason, field):
    with pytest.raises(ValidationError) as error:
        score.override(value, alice, reason, expected_revision=0)
    assert field in error.value.message_dict
    score.refresh_from_db()
    assert score.final_value == 3 and score.revision == 0 and not score.events.exists()


def test_range_edges_are_allowed(score, alice):
    score.override(1, alice, "wrong", expected_revision=0)
    score.override(5, alice, "right after all", expected_revision=1)
    assert score.final_value == 5


def test_confirm_makes_the_judge_value_final_and_withdraws_an_override(score, alice, bob):
    score.override(1, alice, "wrong", expected_revision=0)
    score.confirm(bob, expected_revision=1)
    score.refresh_from_db()
    assert score.final_value == 3 and score.override_value is None and score.override_by is None
    assert score.confirmed_by == bob and score.is_reviewed and score.revision == 2
    assert [(e.kind, e.old_value, e.new_value) for e in score.events.all()] == [
        ("override", 3, 1),
        ("confirm", 1, 3),
    ]


def test_override_withdraws_an_earlier_confirmation(score, alice, bob):
    """A score is either confirmed (people agree with the judge) or overridden, never both."""
    score.confirm(alice, expected_revision=0)
    score.override(2, bob, "too generous", expected_revision=1)
    score.refresh_from_db()
    assert score.confirmed_by is None and score.confirmed_at is None
    assert score.changed_by_id == bob.pk


def test_a_failed_score_can_be_overridden_but_not_confirmed(db, alice):
    run, _ = scenario(0)
    failed = fail_item(run, make_item(run.dataset, 0))[0]
    with pytest.raises(ValidationError):
        failed.confirm(alice, expected_revision=0)
    failed.override(4, alice, "judge never answered; I read it", expected_revision=0)
    assert failed.final_value == 4 and failed.judge_value is None


def test_revert_goes_back_to_the_judge_and_is_history(score, alice):
    score.override(5, alice, "better than judged", expected_revision=0)
    score.revert(alice, "I misread", expected_revision=1)
    score.refresh_from_db()
    assert score.final_value == 3 and score.override_value is None and not score.is_reviewed
    kinds = list(score.events.values_list("kind", "old_value", "new_value", "reason"))
    assert kinds[-1] == ("revert", 5, 3, "I misread")


def test_revert_with_nothing_to_revert_is_refused(score, alice):
    with pytest.raises(ValidationError):
        score.revert(alice, expected_revision=0)
    assert not score.events.exists()


def test_reviewers_revert_only_their_own_change_admins_anyones(score, alice, bob):
    admin = make_user("admin", "root")
    score.override(5, alice, "mine", expected_revision=0)
    assert score.may_revert(alice) and score.may_revert(admin) and not score.may_revert(bob)
    with pytest.raises(PermissionDenied):
        score.revert(bob, expected_revision=1)
    score.refresh_from_db()
    assert score.final_value == 5
    score.revert(admin, "policy", expected_revision=1)
    assert score.final_value == 3
    score.confirm(bob, expected_revision=2)
    assert score.may_revert(bob) and not score.may_revert(alice)


def test_viewers_may_never_revert(score, alice):
    score.override(5, alice, "mine", expected_revision=0)
    assert not score.may_revert(make_user("viewer", "val"))


# ---- the conflict rule ---------------------------------------------------------------------
def test_a_change_on_an_old_revision_is_refused_and_shows_the_newer_value(score, alice, bob):
    rendered_revision = score.revision  # both reviewers loaded the page at revision 0
    score.override(5, alice, "alice's view", expected_revision=rendered_revision)
    stale_copy = Score.objects.get(pk=score.pk)
    with pytest.raises(StaleScore) as conflict:
        stale_copy.override(1, bob, "bob's view", expected_revision=rendered_revision)
    assert conflict.value.current.final_value == 5
    assert conflict.value.current.override_by == alice
    assert conflict.value.current.last_event().user == alice
    score.refresh_from_db()
    assert score.final_value == 5 and score.revision == 1
    assert list(score.events.values_list("user__username", flat=True)) == ["alice"]


@pytest.mark.parametrize("action", ["confirm", "revert"])
def test_confirm_and_revert_obey_the_conflict_rule_too(score, alice, bob, action):
    score.confirm(alice, expected_revision=0)
    score.override(2, alice, "on reflection", expected_revision=1)
    with pytest.raises(StaleScore):
        if action == "confirm":
            score.confirm(bob, expected_revision=1)
        else:
            score.revert(make_user("admin", "root"), expected_revision=1)
    score.refresh_from_db()
    assert score.final_value == 2 and score.revision == 2


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_saving_at_once_one_wins_the_other_gets_a_conflict():
    run, items = scenario(1)
    pk = Score.objects.get(run=run, item=items[0], subject="accuracy").pk
    users = [make_user("reviewer", "alice"), make_user("reviewer", "bob")]
    barrier = threading.Barrier(2)
    outcome: dict[str, str] = {}

    def save(user, value):
        try:
            copy = Score.objects.get(pk=pk)
            barrier.wait(timeout=10)
            copy.override(value, user, f"{user.username} says {value}", expected_revision=0)
            outcome[user.username] = "saved"
        except StaleScore:
            outcome[user.username] = "stale"
        finally:
            close_old_connections()

    threads = [
        threading.Thread(target=save, args=(u, v)) for u, v in zip(users, [5, 1], strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcome.values()) == ["saved", "stale"]
    winner = next(name for name, result in outcome.items() if result == "saved")
    score = Score.objects.get(pk=pk)
    assert score.override_by.username == winner and score.revision == 1
    assert ScoreEvent.objects.filter(score=score).count() == 1


# ---- bulk confirm ------------------------------------------------------------------------
def test_bulk_confirm_confirms_only_unreviewed_scores_with_a_judge_value(db, alice, bob):
    run, items = scenario(2)
    failed = fail_item(run, make_item(run.dataset, 5))
    overridden = Score.objects.get(run=run, item=items[0], subject="accuracy")
    overridden.override(1, alice, "wrong", expected_revision=0)
    confirmed = Score.objects.filter(run=run).bulk_confirm(bob)
    assert confirmed == 3  # 4 ok scores, one already overridden; failed ones untouched
    overridden.refresh_from_db()
    assert overridden.final_value == 1 and overridden.confirmed_by is None
    for score in Score.objects.filter(run=run, status="ok").exclude(pk=overridden.pk):
        assert score.confirmed_by == bob and score.final_value == score.judge_value
        assert score.revision == 1
        assert list(score.events.values_list("kind", "user__username")) == [("confirm", "bob")]
    assert all(not s.is_reviewed for s in Score.objects.filter(pk__in=[f.pk for f in failed]))
    assert Score.objects.filter(run=run).bulk_confirm(bob) == 0
