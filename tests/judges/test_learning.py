"""Examples from reviews (#14.1): a new judge version's prompt carries few-shot examples drawn
from items people settled, spread over the subject's values, corrections first, seeded; a
held-out share of the reviewed items (split by dataset item) is never an example, and the
version records it; a run of the version sends the examples before the item."""

import json

import pytest
from django.db import transaction
from django.urls import reverse

from apps.judges import learning
from apps.judges.judge_prompts import build_rubric_messages
from apps.judges.launching import create_judge_run
from apps.judges.models import Judge
from apps.judges.parsing import parse_rubric_reply
from tests.base import work_here
from tests.factories import (
    add_scores,
    make_answers_dataset,
    make_judge,
    make_judge_run,
    rubric_reply,
    score,
)
from tests.judges.test_judge_pages import judge_form

N = 40


@pytest.fixture
def reviewed(task, reviewer_user):
    """A rubric judge's run over 40 answers, every item reviewed: accuracy overridden to
    1 + i % 5 on the items whose i % 3 == 0, confirmed elsewhere; clarity confirmed."""
    dataset = make_answers_dataset(task, N)
    judge = make_judge(task, name="quality", user_prompt="Q: {{ inputs }}\nA: {{ response }}")
    run = make_judge_run(dataset, judge, source_column="response")
    add_scores(run, {f"q{i}": {"accuracy": 3, "clarity": 4} for i in range(N)})
    for i in range(N):
        accuracy = score(run, f"q{i}", "accuracy")
        if i % 3 == 0:
            accuracy.override(1 + i % 5, reviewer_user, f"really {1 + i % 5} (q{i})")
        else:
            accuracy.confirm(reviewer_user)
        score(run, f"q{i}", "clarity").confirm(reviewer_user)
    return dataset, judge, run


@pytest.mark.django_db
def test_held_out_items_are_never_examples_whatever_the_seed(reviewed) -> None:
    _, judge, _ = reviewed
    for seed in range(12):
        draft = learning.draft(judge, k=20, seed=seed)
        held = set(draft.held_out)
        assert draft.reviewed == N and 8 <= len(held) <= 32  # about half, by hash
        assert len(held) + len(draft.candidates) == N
        assert draft.examples and not {e["item"] for e in draft.examples} & held
    # The split is a function of (seed, item): the same seed gives the same split.
    assert learning.draft(judge, seed=3).held_out == learning.draft(judge, seed=3).held_out
    assert learning.draft(judge, seed=3).held_out != learning.draft(judge, seed=4).held_out


@pytest.mark.django_db
def test_an_item_reviewed_in_two_runs_is_on_one_side_only(reviewed, reviewer_user) -> None:
    dataset, judge, _ = reviewed
    second = make_judge_run(dataset, judge, source_column="response")
    add_scores(second, {f"q{i}": {"accuracy": 2, "clarity": 2} for i in range(N)})
    for i in range(N):
        for subject in ("accuracy", "clarity"):
            score(second, f"q{i}", subject).confirm(reviewer_user)
    draft = learning.draft(judge, k=20, seed=1)
    assert draft.reviewed == 2 * N
    held = set(draft.held_out)
    assert not {r.item_id for r in draft.candidates} & held
    # One example per item even though each item has two reviewed runs: as many as there are
    # items to draw from, up to 20 (the split hashes item ids, which differ per database).
    items = [e["item"] for e in draft.examples]
    available = {r.item_id for r in draft.candidates}
    assert len(available) == N - len(held) and len(draft.candidates) == 2 * len(available)
    assert len(items) == len(set(items)) == min(20, len(available))


@pytest.mark.django_db
def test_examples_spread_over_values_corrections_first(reviewed) -> None:
    _, judge, _ = reviewed
    draft = learning.draft(judge, k=5, seed=0)
    values = [e["values"]["accuracy"] for e in draft.examples]
    available = {r.values["accuracy"] for r in draft.candidates}
    assert len(values) == 5 and set(values) == set(sorted(available)[:5])
    for example in draft.examples:
        same = [
            r for r in draft.candidates if r.values["accuracy"] == example["values"]["accuracy"]
        ]
        if any(r.overridden for r in same):
            assert example["overridden"]  # a correction teaches more than a confirmation


@pytest.mark.django_db
def test_only_items_people_settled_on_every_subject_count(task, reviewer_user) -> None:
    dataset = make_answers_dataset(task, 4)
    judge = make_judge(task, name="quality")
    run = make_judge_run(dataset, judge, source_column="response")
    add_scores(run, {f"q{i}": {"accuracy": 3, "clarity": 4} for i in range(4)})
    score(run, "q0", "accuracy").override(5, reviewer_user, "great")
    score(run, "q0", "clarity").confirm(reviewer_user)
    score(run, "q1", "accuracy").override(1, reviewer_user, "wrong")  # clarity not reviewed
    found = learning.reviewed_items(judge)
    assert [(r.item_id, r.values, r.reason) for r in found] == [
        (dataset.items.get(key="q0").pk, {"accuracy": 5.0, "clarity": 4.0}, "great")
    ]


@pytest.mark.django_db
def test_an_example_is_the_judges_own_prompt_and_a_reply_it_can_read(reviewed) -> None:
    dataset, judge, _ = reviewed
    draft = learning.draft(judge, k=3, seed=0)
    example = draft.examples[0]
    item = dataset.items.get(pk=example["item"])
    expected = build_rubric_messages(
        subjects=judge.subjects,
        response=item.fields["response"],
        reference=item.reference,
        fields=item.fields,
        inputs={"question": item.fields["question"]},
        user_prompt=judge.user_prompt,
    )[-1]["content"]
    assert example["user"] == expected and f"A: answer number {item.position}" in expected
    parsed = parse_rubric_reply(example["reply"], judge.subjects)
    assert parsed.values == example["values"]


@pytest.mark.django_db
def test_other_kinds_are_told_why(task) -> None:
    with pytest.raises(learning.LearningError, match="for LLM rubric judges"):
        learning.draft(make_judge(task, Judge.Kind.METRIC, name="exact"))


@pytest.mark.django_db
def test_improve_page_saves_a_version_with_the_checked_and_edited_examples(
    reviewed, reviewer_client
) -> None:
    _, judge, _ = reviewed
    url = reverse("judges:improve", args=[judge.pk])
    page = reviewer_client.get(url, {"count": 4, "seed": 2}).content.decode()
    assert 'id="held-out-count"' in page and page.count('class="card example"') == 4
    draft = learning.draft(judge, k=4, seed=2)
    post = {"seed": 2, "count": 4, "use": ["0", "2"]}
    for i, example in enumerate(draft.examples):
        post |= {f"run_{i}": example["run"], f"item_{i}": example["item"]}
        post[f"reply_{i}"] = example["reply"]
    post["reply_2"] = '{"reason": "edited", "accuracy": 2, "clarity": 5}'
    response = reviewer_client.post(url, post)
    new = Judge.objects.get(name="quality", version=2)
    assert response.status_code == 302 and response["Location"] == new.get_absolute_url()
    assert [e["item"] for e in new.examples] == [
        draft.examples[0]["item"],
        draft.examples[2]["item"],
    ]
    assert new.examples[1]["reply"] == post["reply_2"]
    assert new.learned_from == {
        "from_version": judge.pk,
        "seed": 2,
        "held_out_share": 0.5,
        "held_out": draft.held_out,
    }
    assert (new.user_prompt, new.subjects) == (judge.user_prompt, judge.subjects)
    shown = reviewer_client.get(new.get_absolute_url()).content.decode()
    assert (
        'id="judge-examples"' in shown
        and f"{len(draft.held_out)} reviewed item{'' if len(draft.held_out) == 1 else 's'} held out"
        in shown
    )


@pytest.mark.django_db
def test_a_held_out_item_or_an_unreadable_reply_is_refused(reviewed, reviewer_client) -> None:
    _, judge, run = reviewed
    url = reverse("judges:improve", args=[judge.pk])
    draft = learning.draft(judge, k=2, seed=0)
    held = draft.held_out[0]
    tampered = {"seed": 0, "count": 2, "use": ["0"], "run_0": run.pk, "item_0": held}
    tampered["reply_0"] = '{"accuracy": 1, "clarity": 1}'
    response = reviewer_client.post(url, tampered)
    assert response.status_code == 400 and "held-out split" in response.content.decode()
    bad = {"seed": 0, "count": 2, "use": ["0"], "run_0": run.pk}
    bad |= {"item_0": draft.examples[0]["item"], "reply_0": '{"accuracy": 9}'}
    response = reviewer_client.post(url, bad)
    assert response.status_code == 400 and "would not be read" in response.content.decode()
    assert Judge.objects.filter(name="quality").count() == 1


@pytest.mark.django_db
def test_viewers_cannot_improve_a_judge(reviewed, viewer_client) -> None:
    _, judge, _ = reviewed
    url = reverse("judges:improve", args=[judge.pk])
    assert viewer_client.get(url).status_code == 403
    assert viewer_client.post(url, {"use": ["0"]}).status_code == 403
    assert Judge.objects.filter(name="quality").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_run_of_the_new_version_sends_the_examples_before_the_item(
    reviewed, reviewer_user, endpoint, llm_server
) -> None:
    dataset, judge, _ = reviewed
    draft = learning.draft(judge, k=2, seed=0)
    new = learning.save_version(judge, draft.examples, draft, reviewer_user)
    llm_server.configure(default_reply=rubric_reply(4, 4))
    with transaction.atomic():
        run = create_judge_run(new, endpoint=endpoint, dataset=dataset, source_column="response")
    work_here()
    run.refresh_from_db()
    assert run.done == N
    first = llm_server.stats()["log"][0]["messages"]
    roles = [m["role"] for m in first]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert first[1]["content"] == draft.examples[0]["user"]
    assert json.loads(first[2]["content"]) == json.loads(draft.examples[0]["reply"])
    assert first[-1]["content"].startswith("Q: question:")


@pytest.mark.django_db
def test_a_consensus_teaches_its_value_not_the_apps_words(task, reviewer_user) -> None:
    dataset = make_answers_dataset(task, 2)
    judge = make_judge(task, name="quality")
    run = make_judge_run(dataset, judge, source_column="response")
    add_scores(run, {f"q{i}": {"accuracy": 4, "clarity": 4} for i in range(2)})
    for i in range(2):
        consensus = "Consensus of 3 reviews (maria 4, omar 4, admin 5): 4.33333."
        score(run, f"q{i}", "accuracy").settle_by_people(13 / 3, "consensus", None, consensus)
        score(run, f"q{i}", "clarity").override(2, reviewer_user, "rambles")
    found = learning.reviewed_items(judge)
    assert [(r.values["accuracy"], r.reason) for r in found] == [(13 / 3, "rambles")] * 2
    reply = json.loads(learning.reply_for(found[0].values, found[0].reason))
    assert reply == {"reason": "rambles", "accuracy": 4.33, "clarity": 2}


@pytest.mark.django_db
def test_editing_an_improved_version_keeps_its_examples_and_split(
    reviewed, reviewer_user, reviewer_client
) -> None:
    _, judge, _ = reviewed
    draft = learning.draft(judge, k=3, seed=5)
    v2 = learning.save_version(judge, draft.examples, draft, reviewer_user)
    form = judge_form(
        name="quality",
        subjects_text="accuracy 1 5\nclarity 1 5",
        user_prompt=v2.user_prompt,
        system_prompt="Be strict.",
    )
    response = reviewer_client.post(reverse("judges:edit", args=[v2.pk]), form)
    v3 = Judge.objects.get(name="quality", version=3)
    assert response.status_code == 302 and v3.system_prompt == "Be strict."
    assert v3.examples == v2.examples and v3.learned_from == v2.learned_from
    assert learning.split_of(v3)["held_out"] == draft.held_out
