"""The item review page and the per-score POSTs: content, HTMX fragments, no-JS fallback,
conflicts, history, revert rights, roles and blind mode."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from apps.judges.models import Score
from apps.review.models import BlindEntry, ReviewLock
from apps.runs.models import AttemptLog
from tests.base import make_user
from tests.factories import (
    fail_item,
    judge_item,
    make_generation_run,
    make_item,
    make_judge_run,
    make_review_dataset,
    make_task,
    scenario,
)

HX = {"HTTP_HX_REQUEST": "true"}


def client_for(role: str, username: str | None = None) -> Client:
    client = Client()
    client.user = make_user(role, username)
    client.force_login(client.user)
    return client


@pytest.fixture
def reviewer(db) -> Client:
    return client_for("reviewer", "alice")


@pytest.fixture
def other_reviewer(db) -> Client:
    return client_for("reviewer", "bob")


@pytest.fixture
def admin(db) -> Client:
    return client_for("admin", "root")


@pytest.fixture
def viewer(db) -> Client:
    return client_for("viewer", "val")


@pytest.fixture
def judged(db):
    """One item judged in two rounds that disagree on accuracy (3 and 4.5 → 3.75)."""
    dataset = make_review_dataset(make_task())
    item = make_item(dataset, 0, question="What is 2+2?", reference="4", answer="Four.")
    run = make_judge_run(dataset)
    scores = judge_item(
        run,
        item,
        [{"accuracy": 3, "clarity": 2}, {"accuracy": 4.5, "clarity": 2}],
        reasons=["JUDGE-REASON-ONE", "JUDGE-REASON-TWO"],
        raw_replies=['{"accuracy": 3, "tag": "RAW-ONE"}', '{"accuracy": 4.5, "tag": "RAW-TWO"}'],
    )
    return run, item, {s.subject: s for s in scores}


def page(client: Client, run, item, **params) -> str:
    response = client.get(reverse("review:item", args=[run.pk, item.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def card(html: str, score: Score) -> str:
    """The HTML of one subject's card."""
    match = re.search(rf'<section[^>]*id="score-{score.pk}".*?</section>', html, re.S)
    assert match, f"no card for score {score.pk}"
    return match.group(0)


def test_page_shows_inputs_reference_response_rounds_and_scores(reviewer, judged):
    run, item, _scores = judged
    html = page(reviewer, run, item)
    for text in [
        "What is 2+2?",
        "Four.",
        "JUDGE-REASON-ONE",
        "JUDGE-REASON-TWO",
        "RAW-ONE",
        "RAW-TWO",
        "accuracy",
        "clarity",
        "3.75",
        "spread 1.5",
    ]:
        assert text in html, text
    assert html.index("What is 2+2?") < html.index("Four.")


def test_response_comes_from_the_generation_run_when_there_is_one(reviewer, db):
    dataset = make_review_dataset(make_task())
    item = make_item(dataset, 0, answer="COLUMN-ANSWER")
    source = make_generation_run(dataset, {0: "GENERATED-ANSWER"})
    run = make_judge_run(dataset, source_run=source)
    judge_item(run, item, [{"accuracy": 4, "clarity": 4}])
    html = page(reviewer, run, item)
    assert "GENERATED-ANSWER" in html and "COLUMN-ANSWER" not in html


def test_failed_item_shows_its_attempt_log(reviewer, db):
    run, _ = scenario(0)
    item = make_item(run.dataset, 0)
    fail_item(run, item)
    html = page(reviewer, run, item)
    assert "Judge failed" in html and "not json at all" in html and "Rate q0" in html
    assert "Reply was not JSON" in html


def test_an_attempts_traceback_is_for_admins_only_and_folded(db):
    """#28.6: every role saw the worker's Python traceback (server paths) on the review page;
    the one-line cause is for everyone."""
    run, _ = scenario(0)
    item = make_item(run.dataset, 0)
    fail_item(run, item)
    AttemptLog.objects.filter(run=run, item=item).update(
        traceback='Traceback (most recent call last):\n  File "/srv/evalsite/SECRET-PATH.py"'
    )
    for role in ("viewer", "reviewer"):
        html = page(client_for(role), run, item)
        assert "Reply was not JSON" in html and "SECRET-PATH" not in html, role
    html = page(client_for("admin"), run, item)
    folded = re.search(
        r'<details class="traceback"><summary>Traceback[^<]*</summary><pre>([^<]*)', html
    )
    assert folded and "SECRET-PATH" in folded.group(1)


# ---- saving over HTMX and without JS ------------------------------------------------------
def test_override_over_htmx_returns_the_subjects_card(reviewer, judged):
    _run, _item, scores = judged
    accuracy = scores["accuracy"]
    response = reviewer.post(
        reverse("review:override", args=[accuracy.pk]),
        {"value": "2", "reason": "Misses the units", "revision": "0"},
        **HX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<section") and "<html" not in html
    assert f'id="score-{accuracy.pk}"' in html and 'data-saved="overridden"' in html
    assert "Overridden" in html and "Misses the units" in html and "alice" in html
    assert 'name="revision" value="1"' in html  # the next save carries the new revision
    accuracy.refresh_from_db()
    assert accuracy.final_value == 2 and accuracy.judge_value == 3.75


def test_without_js_a_save_redirects_back_to_the_item(reviewer, judged):
    run, item, scores = judged
    response = reviewer.post(
        reverse("review:confirm", args=[scores["clarity"].pk]),
        {"revision": "0", "order": "failed", "blind": "1"},
    )
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith(reverse("review:item", args=[run.pk, item.pk]))
    assert "order=failed" in location and "blind=1" in location
    assert location.endswith(f"#score-{scores['clarity'].pk}")
    scores["clarity"].refresh_from_db()
    assert scores["clarity"].confirmed_by == reviewer.user


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"value": "4", "reason": ""}, "Say why you override the judge."),
        ({"value": "9", "reason": "x"}, "outside accuracy"),
        ({"value": "", "reason": "x"}, "Enter your value."),
        ({"value": "abc", "reason": "x"}, "Enter a number."),
    ],
)
def test_invalid_override_is_refused_with_a_message(reviewer, judged, data, message):
    _run, _item, scores = judged
    url = reverse("review:override", args=[scores["accuracy"].pk])
    fragment = reviewer.post(url, {**data, "revision": "0"}, **HX).content.decode()
    assert message in fragment and "data-saved" not in fragment
    full = reviewer.post(url, {**data, "revision": "0"})
    assert full.status_code == 400 and message in full.content.decode()
    scores["accuracy"].refresh_from_db()
    assert scores["accuracy"].final_value == 3.75 and scores["accuracy"].revision == 0


def test_the_reason_typed_is_kept_when_a_save_is_refused(reviewer, judged):
    _run, _item, scores = judged
    fragment = reviewer.post(
        reverse("review:override", args=[scores["accuracy"].pk]),
        {"value": "9", "reason": "KEEP-THIS-REASON", "revision": "0"},
        **HX,
    ).content.decode()
    assert "KEEP-THIS-REASON" in fragment and 'value="9"' in fragment


# ---- conflicts ---------------------------------------------------------------------------
def test_stale_save_shows_a_conflict_with_the_newer_value_and_who_set_it(
    reviewer, other_reviewer, judged
):
    _run, _item, scores = judged
    url = reverse("review:override", args=[scores["accuracy"].pk])
    # Both loaded the page at revision 0; bob saves first.
    assert other_reviewer.post(url, {"value": "5", "reason": "bob", "revision": "0"}, **HX)
    html = reviewer.post(url, {"value": "1", "reason": "alice", "revision": "0"}, **HX)
    html = html.content.decode()
    assert "Not saved" in html and 'class="conflict-who">bob<' in html
    assert re.search(r'class="conflict-value">5<', html)
    assert 'name="revision" value="1"' in html  # saving again is a conscious second try
    assert "alice" in html  # what alice typed is still there
    scores["accuracy"].refresh_from_db()
    assert scores["accuracy"].final_value == 5
    assert list(scores["accuracy"].events.values_list("user__username", flat=True)) == ["bob"]
    # Without JS the whole page answers 409 with the same message.
    full = reviewer.post(url, {"value": "1", "reason": "alice", "revision": "0"})
    assert full.status_code == 409 and "Not saved" in full.content.decode()


def test_confirm_on_a_stale_revision_does_not_undo_an_override(reviewer, other_reviewer, judged):
    _run, _item, scores = judged
    accuracy = scores["accuracy"]
    other_reviewer.post(
        reverse("review:override", args=[accuracy.pk]),
        {"value": "1", "reason": "bob", "revision": "0"},
    )
    html = reviewer.post(
        reverse("review:confirm", args=[accuracy.pk]), {"revision": "0"}, **HX
    ).content.decode()
    assert "Not saved" in html and "bob" in html and "overrode" in html
    accuracy.refresh_from_db()
    assert accuracy.final_value == 1


# ---- history and revert ------------------------------------------------------------------
def test_history_lists_every_change_with_who_old_new_and_reason(reviewer, admin, judged):
    run, item, scores = judged
    accuracy = scores["accuracy"]
    accuracy.override(5, reviewer.user, "REASON-A", expected_revision=0)
    accuracy.confirm(admin.user, expected_revision=1)
    accuracy.override(2, reviewer.user, "REASON-B", expected_revision=2)
    accuracy.revert(admin.user, "REASON-C", expected_revision=3)
    history = card(page(reviewer, run, item), accuracy)
    rows = re.findall(r'<tr class="event event-(\w+)">(.*?)</tr>', history, re.S)
    assert [kind for kind, _ in rows] == ["override", "confirm", "override", "revert"]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for _, row in rows]
    assert [c[1:] for c in cells] == [
        ["alice", "Override", "3.75", "5", "REASON-A"],
        ["root", "Confirm", "5", "3.75", ""],
        ["alice", "Override", "3.75", "2", "REASON-B"],
        ["root", "Revert", "2", "3.75", "REASON-C"],
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", c[0]) for c in cells)  # the one format


def test_a_reviewer_reverts_their_own_change(reviewer, judged):
    run, item, scores = judged
    accuracy = scores["accuracy"]
    accuracy.override(5, reviewer.user, "mine", expected_revision=0)
    assert "Revert to judge" in card(page(reviewer, run, item), accuracy)
    response = reviewer.post(reverse("review:revert", args=[accuracy.pk]), {"revision": "1"}, **HX)
    assert 'data-saved="reverted' in response.content.decode()
    accuracy.refresh_from_db()
    assert accuracy.final_value == 3.75 and not accuracy.is_reviewed


def test_a_reviewer_may_not_revert_someone_elses_change(reviewer, other_reviewer, judged):
    run, item, scores = judged
    accuracy = scores["accuracy"]
    accuracy.override(5, other_reviewer.user, "bob's", expected_revision=0)
    assert "Revert to judge" not in card(page(reviewer, run, item), accuracy)
    response = reviewer.post(reverse("review:revert", args=[accuracy.pk]), {"revision": "1"})
    assert response.status_code == 403
    accuracy.refresh_from_db()
    assert accuracy.final_value == 5


def test_an_admin_reverts_anyones_change(admin, other_reviewer, judged):
    run, item, scores = judged
    accuracy = scores["accuracy"]
    accuracy.override(5, other_reviewer.user, "bob's", expected_revision=0)
    assert "Revert to judge" in card(page(admin, run, item), accuracy)
    response = admin.post(reverse("review:revert", args=[accuracy.pk]), {"revision": "1"})
    assert response.status_code == 302
    accuracy.refresh_from_db()
    assert accuracy.final_value == 3.75
    assert accuracy.events.last().user == admin.user


# ---- roles -------------------------------------------------------------------------------
def test_viewers_read_every_review_page_but_get_no_forms(viewer, judged):
    run, item, _scores = judged
    for url in [
        reverse("review:index"),
        reverse("review:run", args=[run.pk]),
        reverse("review:item", args=[run.pk, item.pk]),
    ]:
        response = viewer.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert 'method="post" action="/review/' not in html, url
        assert "hx-post" not in html, url
        assert 'form="bulk"' not in html
    html = page(viewer, run, item)
    assert "3.75" in html and "JUDGE-REASON-ONE" in html  # they do read everything


# Text only a person who may change scores needs: lock notices, the forms, the keys that save.
EDITOR_ONLY = [
    'id="lock-status"',
    "is reviewing this item",
    "Your changes are still safe",
    "has it open",
    "Save override",
    "Confirm judge",
    'name="reason"',
    "data-digit-keys",
    "data-keys-for",
    "<th>Enter</th>",
    "<th>c</th>",
    "Enter saves",
    'name="blind"',
    'name="mine"',
]


def test_viewers_see_no_lock_notices_forms_or_save_keys(viewer, reviewer, other_reviewer, judged):
    run, item, _scores = judged
    assert ReviewLock.claim(run, item, other_reviewer.user)
    urls = [reverse("review:run", args=[run.pk]), reverse("review:item", args=[run.pk, item.pk])]
    as_reviewer = "".join(reviewer.get(url).content.decode() for url in urls)
    for text in EDITOR_ONLY:
        assert text in as_reviewer, text  # the list is of things that are really there
    as_viewer = "".join(viewer.get(url).content.decode() for url in urls)
    for text in EDITOR_ONLY:
        assert text not in as_viewer, text
    assert "next / previous item" in as_viewer and "3.75" in as_viewer
    # Opening the page as a viewer took no lock and left bob's as it was.
    assert list(run.review_locks.values_list("user__username", flat=True)) == ["bob"]


def test_viewers_cannot_take_or_renew_a_lock(viewer, judged):
    run, item, _scores = judged
    url = reverse("review:lock", args=[run.pk, item.pk])
    assert viewer.post(url, {"opened": "1"}, **HX).status_code == 403
    assert not run.review_locks.exists()


def test_blind_mode_does_not_apply_to_viewers(viewer, judged):
    """Blind mode waits for the reader's own value: a viewer would wait for ever."""
    run, item, _scores = judged
    html = page(viewer, run, item, blind="1")
    assert 'class="judge-value">3.75<' in html and "JUDGE-REASON-ONE" in html
    assert "Blind mode" not in html


def test_viewers_walk_a_queue_by_get_without_locking(viewer, judged):
    run, item, _ = judged
    response = viewer.get(reverse("review:next", args=[run.pk]), {"order": "failed"})
    assert response.status_code == 302 and f"/item/{item.pk}/" in response["Location"]
    assert not run.review_locks.exists()


@pytest.mark.parametrize("name", ["override", "confirm", "revert", "blind"])
def test_viewers_cannot_change_a_score(viewer, judged, name):
    _run, _item, scores = judged
    accuracy = scores["accuracy"]
    response = viewer.post(
        reverse(f"review:{name}", args=[accuracy.pk]),
        {"value": "1", "reason": "x", "revision": "0"},
    )
    assert response.status_code == 403
    accuracy.refresh_from_db()
    assert accuracy.final_value == 3.75 and not accuracy.events.exists()
    assert not BlindEntry.objects.exists()


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_reviewers_and_admins_override_and_confirm(db, judged, role):
    run, item, scores = judged
    client = client_for(role)
    html = page(client, run, item)
    assert "Save override" in html and "Confirm judge" in html
    assert (
        client.post(
            reverse("review:override", args=[scores["accuracy"].pk]),
            {"value": "1", "reason": "x", "revision": "0"},
        ).status_code
        == 302
    )
    assert (
        client.post(
            reverse("review:confirm", args=[scores["clarity"].pk]), {"revision": "0"}
        ).status_code
        == 302
    )
    scores["accuracy"].refresh_from_db()
    scores["clarity"].refresh_from_db()
    assert scores["accuracy"].override_by == client.user
    assert scores["clarity"].confirmed_by == client.user


def test_anonymous_users_are_sent_to_login(client, judged):
    run, item, _scores = judged
    response = client.get(reverse("review:item", args=[run.pk, item.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


# ---- blind mode --------------------------------------------------------------------------
def test_blind_mode_keeps_the_judge_out_of_the_html_until_the_reviewer_scores(reviewer, judged):
    run, item, scores = judged
    secrets = ["3.75", "JUDGE-REASON-ONE", "JUDGE-REASON-TWO", "RAW-ONE", "RAW-TWO", "4.5"]
    html = page(reviewer, run, item, blind="1")
    for secret in secrets:
        assert secret not in html, secret
    assert "the judge's reason shows once you have entered your own value" in html
    assert "Enter my value" in html and "Save override" not in html
    assert "What is 2+2?" in html and "Four." in html  # the item itself is shown

    # Own value for accuracy: accuracy's judge value shows beside it, clarity stays hidden,
    # and so do the rounds (their reasons speak of every subject).
    response = reviewer.post(
        reverse("review:blind", args=[scores["accuracy"].pk]), {"value": "2", "blind": "1"}, **HX
    )
    fragment = response.content.decode()
    assert re.search(r'class="blind-value">2<', fragment)
    assert re.search(r'class="judge-value">3.75<', fragment)
    assert "JUDGE-REASON-ONE" not in fragment
    assert 'name="value" step="any" data-score-input required value="2"' in fragment
    html = page(reviewer, run, item, blind="1")
    assert "JUDGE-REASON-ONE" not in html
    assert 'class="judge-value">2<' not in card(html, scores["clarity"])

    # The last subject reveals the rounds too, swapped in out of band.
    fragment = reviewer.post(
        reverse("review:blind", args=[scores["clarity"].pk]), {"value": "4", "blind": "1"}, **HX
    ).content.decode()
    assert 'id="evidence" hx-swap-oob="true"' in fragment and "JUDGE-REASON-ONE" in fragment
    # The score panel's copy of the judge's reasons comes with them.
    panel = fragment.split('id="judge-says" hx-swap-oob="true"')[1]
    assert "JUDGE-REASON-ONE" in panel and "JUDGE-REASON-TWO" in panel
    html = page(reviewer, run, item, blind="1")
    assert all(secret in html for secret in secrets)
    # Entering blind changes no score: it is the reviewer's unbiased label, kept apart.
    scores["accuracy"].refresh_from_db()
    assert scores["accuracy"].final_value == 3.75 and scores["accuracy"].revision == 0
    assert BlindEntry.objects.get(score=scores["accuracy"]).value == 2


def test_blind_mode_is_per_reviewer(reviewer, other_reviewer, judged):
    run, item, scores = judged
    reviewer.post(reverse("review:blind", args=[scores["accuracy"].pk]), {"value": "2"})
    assert "3.75" not in page(other_reviewer, run, item, blind="1")


def test_blind_mode_hides_other_reviewers_values_and_history(reviewer, other_reviewer, judged):
    run, item, scores = judged
    scores["accuracy"].override(1.25, other_reviewer.user, "BOB-REASON", expected_revision=0)
    html = page(reviewer, run, item, blind="1")
    assert "1.25" not in html and "BOB-REASON" not in html and "3.75" not in html


def test_a_blind_value_must_be_in_range(reviewer, judged):
    _run, _item, scores = judged
    fragment = reviewer.post(
        reverse("review:blind", args=[scores["accuracy"].pk]), {"value": "7", "blind": "1"}, **HX
    ).content.decode()
    assert "outside accuracy" in fragment and "3.75" not in fragment
    assert not BlindEntry.objects.exists()


def test_without_blind_mode_the_judge_shows_at_once(reviewer, judged):
    run, item, _scores = judged
    assert 'class="judge-value">3.75<' in page(reviewer, run, item)
