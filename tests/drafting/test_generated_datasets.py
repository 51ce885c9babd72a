"""Generated datasets (#15.1): a generator's content → questions → answers prompts asked N
times on real workers against the loopback server make a draft whose items are exactly what
the scripted replies said; an unreadable reply is a logged failure; seeds and costs are
recorded; the draft is refused by every start form and command until people have decided each
item and published it (atomically, announcing it like an upload)."""

import io
import json
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from apps.datasets.models import Dataset, Frozen, Item
from apps.datasets.signals import dataset_imported
from apps.drafting.drafts import (
    DraftError,
    create_dataset_generation_run,
    discard,
    publish,
    rates_by_version,
    split_list,
)
from apps.drafting.forms import GeneratorForm
from apps.drafting.models import DraftItem, DraftUnit, Generator
from apps.judges.launching import JudgeRunError, check_source
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.forms import GenerationRunForm
from apps.runs.models import AttemptLog, ErrorKind, PromptTemplate, Run
from tests.base import ROOT, make_user, subprocess_env, wait_for, work
from tests.factories import make_draft, make_generator, make_judge, make_qa_dataset
from tests.judges.test_judge_run_resume import kill_hard
from tests.llm_server import _text, _words

PRICES = json.dumps({"test-model": [1.0, 2.0]})  # USD per 1M tokens: input, output
FACTS = {
    1: "1. Quix is ruled by the Zorblat.\n2. Rivers on Quix run uphill.",
    2: "1. Vell has three moons.\n2. The sea of Vell is violet.",
    3: "1. Mort is grey.",
}
SCRIPT = [
    {"regex": r"^Invent facts about world 1\.", "reply": FACTS[1]},
    {"regex": r"^Invent facts about world 2\.", "reply": FACTS[2]},
    {"regex": r"^Invent facts about world 3\.", "reply": FACTS[3]},
    # Numbered, after a preamble; JSON in a fence; a refusal that lists nothing.
    {
        "regex": r"^Ask about these facts:[\s\S]*Quix",
        "reply": "Here they are:\n\n1. Who rules Quix?\n2) Which way do the rivers of Quix run?",
    },
    {
        "regex": r"^Ask about these facts:[\s\S]*Vell",
        "reply": '```json\n{"questions": ["How many moons has Vell?", "What colour is its sea?"]}\n```',
    },
    {"regex": r"^Ask about these facts:[\s\S]*Mort", "reply": "I would rather not."},
    {"regex": r"^Answer each question[\s\S]*Quix", "reply": '["The Zorblat", "Uphill"]'},
    {
        "regex": r"^Answer each question[\s\S]*Vell",
        "reply": "1. Three\n2. Violet\n\nHappy to help with more!",
    },
]
EXPECTED = [
    (0, 0, FACTS[1], "Who rules Quix?", "The Zorblat"),
    (0, 1, FACTS[1], "Which way do the rivers of Quix run?", "Uphill"),
    (1, 0, FACTS[2], "How many moons has Vell?", "Three"),
    (1, 1, FACTS[2], "What colour is its sea?", "Violet"),
]


def draft_rows(dataset: Dataset) -> list[tuple]:
    return list(
        DraftItem.objects.filter(dataset=dataset)
        .order_by("unit__index", "number")
        .values_list("unit__index", "number", "content", "question", "reference")
    )


# ---- reading replies ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "entries"),
    [
        ("1. What is X?\n2. Where is Y?", ["What is X?", "Where is Y?"]),
        (
            "Sure:\n\n1) What is X?\n2) Where\n   is Y?\n\nAnything else?",
            ["What is X?", "Where is Y?"],
        ),
        ('```json\n["a?", "b?"]\n```', ["a?", "b?"]),
        ('{"questions": [{"question": "a?"}, {"question": "b?"}]}', ["a?", "b?"]),
        ("Q1: a?\nQ2: b?", ["a?", "b?"]),
        ("**1.** a\n**2.** b", ["a", "b"]),
        ("- a\n- b\n* c", ["a", "b", "c"]),
        ("Answer 1: Paris\nAnswer 2: 42", ["Paris", "42"]),
        ("The facts are interesting.", []),
        ("1. a\n3. c", []),  # a skipped number cannot be paired with its answer
        ("1. a\n1. b", []),
        ('{"a": [1], "b": [2]}', []),  # which list? none
        ("[]", []),
    ],
)
def test_replies_are_read_as_json_numbered_or_bulleted_lists(reply: str, entries: list[str]):
    assert split_list(reply) == entries


# ---- the run on real workers ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_generation_run_makes_exactly_the_scripted_items_and_logs_the_unreadable_unit(
    task, endpoint, llm_server
):
    endpoint.seed = 100
    endpoint.save()
    llm_server.configure(script=SCRIPT)
    generator = make_generator(task)
    run = create_dataset_generation_run(generator, endpoint, 3, name="worlds")
    work(EVALSITE_PRICE_TABLE=PRICES)
    run.refresh_from_db()
    assert (run.status, run.done, run.failed, run.total) == (
        Run.Status.COMPLETED_WITH_FAILURES,
        2,
        1,
        3,
    )
    dataset = run.dataset
    assert dataset.status == Dataset.Status.DRAFT and dataset.name == "worlds"
    assert draft_rows(dataset) == EXPECTED
    assert set(DraftItem.objects.values_list("generator_id", flat=True)) == {generator.pk}
    assert not Item.objects.filter(dataset=dataset).exists()  # nothing usable before review

    failed = DraftUnit.objects.get(run=run, status=DraftUnit.Status.FAILED)
    assert (failed.index, failed.error_kind, failed.content) == (2, ErrorKind.UNPARSEABLE, FACTS[3])
    assert "not a numbered list, a bullet list or a JSON list of questions" in failed.error
    # Logged like any failure (logging mode "failed"): the one unreadable attempt, by unit.
    log = AttemptLog.objects.get(run=run)
    assert (log.unit, log.item_id, log.ok, log.error_kind) == (2, None, False, "unparseable")
    assert "I would rather not." in log.raw_reply
    assert log.request_messages[-1]["content"] == f"Ask about these facts:\n{FACTS[3]}"

    # Unit i carries the endpoint's seed + i on each of its requests (unit 3 stopped after 2).
    requests = llm_server.stats()["log"]
    assert Counter(entry["params"]["seed"] for entry in requests) == {100: 3, 101: 3, 102: 2}
    # Every token the server counted is on the run, at the stated price.
    prompt = sum(_words(_text(m["content"])) for e in requests for m in e["messages"])
    completion = sum(_words(e["reply"]) for e in requests)
    assert (run.prompt_tokens, run.completion_tokens) == (prompt, completion)
    assert run.cost == pytest.approx((prompt * 1.0 + completion * 2.0) / 1e6)
    units = DraftUnit.objects.filter(run=run)
    assert sum(u.cost for u in units) == pytest.approx(run.cost)

    # The run's page lists its units, the failed one with its reply; the draft links there.
    viewer = Client()
    viewer.force_login(make_user("viewer"))
    page = viewer.get(run.get_absolute_url()).content.decode()
    assert 'id="unit-row-3"' in page and "I would rather not." in page
    assert "4 items to review" in page and 'id="overwrite-run"' not in page
    page = viewer.get(reverse("drafting:draft-review", args=[dataset.pk])).content.decode()
    assert "Who rules Quix?" in page and "1 failed" in page

    # Retry failed asks only the failed unit again; now it reads, and its items join the draft.
    llm_server.configure(
        script=[
            {"regex": r"^Ask about these facts:[\s\S]*Mort", "reply": "1. What colour is Mort?"},
            {"regex": r"^Answer each question[\s\S]*Mort", "reply": "1. Grey"},
            *SCRIPT,
        ]
    )
    llm_server.reset(stats_only=True)
    call_command("start_run", "retry-failed", str(run.pk))
    work(EVALSITE_PRICE_TABLE=PRICES)
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 3, 0)
    assert [e["params"]["seed"] for e in llm_server.stats()["log"]] == [102, 102, 102]
    assert draft_rows(dataset)[-1] == (2, 0, FACTS[3], "What colour is Mort?", "Grey")


# ---- drafts are refused until published -----------------------------------------------------------
@pytest.mark.django_db
def test_a_draft_is_refused_by_start_forms_and_commands(task, endpoint, reviewer_client):
    ready = make_qa_dataset(task, 2)
    draft = make_draft(make_generator(task), [[("q?", "a")]])
    template = PromptTemplate.objects.create(task=task, name="qa", user_message="{{ question }}")
    form = GenerationRunForm(task=task)
    assert list(form.fields["dataset"].queryset) == [ready]
    assert list(Dataset.objects.ready()) == [ready]
    response = reviewer_client.post(
        reverse("runs:generation-start"),
        {
            "task": task.slug,
            "dataset": draft.pk,
            "endpoint": endpoint.pk,
            "template": template.pk,
            "logging_mode": "failed",
            "chunk_size": 200,
        },
    )
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    with pytest.raises(CommandError, match=r"is a draft: review and publish its items"):
        call_command(
            "start_run",
            "generation",
            "--dataset",
            str(draft.pk),
            "--endpoint",
            endpoint.name,
            "--template",
            "qa",
        )
    with pytest.raises(JudgeRunError, match="is a draft"):
        check_source(make_judge(task), None, draft, "reference")
    assert not Run.objects.filter(kind=Run.Kind.GENERATION).exists()


# ---- review, roles and publishing -----------------------------------------------------------------
def decide(client: Client, item: DraftItem, decision: str, **texts: str):
    return client.post(
        reverse("drafting:draft-decide", args=[item.pk]), {"decision": decision, **texts}
    )


@pytest.mark.django_db
def test_reviewers_decide_items_viewers_only_look(task):
    draft = make_draft(make_generator(task), [[("Who rules?", "Zorblat"), ("Rivers?", "Up")]])
    first, second = DraftItem.objects.filter(dataset=draft).order_by("number")
    viewer, reviewer = Client(), Client()
    viewer.force_login(make_user("viewer", "vera"))
    reviewer.force_login(make_user("reviewer", "rita"))

    page = viewer.get(reverse("drafting:draft-review", args=[draft.pk])).content.decode()
    assert "Who rules?" in page and 'data-action="approve"' not in page and "Publish" not in page
    assert decide(viewer, first, "approved").status_code == 403
    assert viewer.post(reverse("drafting:draft-publish", args=[draft.pk])).status_code == 403
    first.refresh_from_db()
    assert first.decision == DraftItem.Decision.PENDING

    page = reviewer.get(reverse("drafting:draft-review", args=[draft.pk])).content.decode()
    assert 'data-action="approve"' in page and 'id="publish" disabled' in page
    # Without JavaScript: a plain POST, then back to the item on the review page.
    response = decide(reviewer, first, "approved")
    assert response.status_code == 302 and response["Location"].endswith(f"#draft-item-{first.pk}")
    # With htmx: the item's card and, out of band, the counts.
    response = reviewer.post(
        reverse("drafting:draft-decide", args=[second.pk]),
        {
            "decision": "edited",
            "content": "Facts of unit 1.",
            "question": "Which way?",
            "reference": "Uphill",
        },
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert f'id="draft-item-{second.pk}"' in html and 'hx-swap-oob="true"' in html
    assert '<dd class="num" id="count-pending">0</dd>' in html
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.decision, first.decided_by.username) == ("approved", "rita")
    assert (second.decision, second.question, second.generated["question"]) == (
        "edited",
        "Which way?",
        "Rivers?",
    )
    # An "edit" that changes nothing is an approval; an undo makes it pending again.
    decide(
        reviewer, first, "edited", content=first.content, question="Who rules?", reference="Zorblat"
    )
    first.refresh_from_db()
    assert first.decision == "approved"
    decide(reviewer, first, "pending")
    first.refresh_from_db()
    assert (first.decision, first.decided_at) == ("pending", None)
    # Model output is escaped on the page.
    DraftItem.objects.filter(pk=first.pk).update(question="<script>alert(1)</script>")
    page = viewer.get(reverse("drafting:draft-review", args=[draft.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page


@pytest.mark.django_db(transaction=True)
def test_publish_needs_every_item_decided_keeps_approved_and_edited_and_announces_it(task):
    generator = make_generator(task)
    draft = make_draft(
        generator,
        [[("Who rules?", "Zorblat"), ("Rivers?", "Up")], [("Moons?", "3"), ("=1+1", "2")]],
    )
    items = list(DraftItem.objects.filter(dataset=draft).order_by("unit__index", "number"))
    reviewer = Client()
    reviewer.force_login(make_user("reviewer", "rita"))
    heard: list[Dataset] = []

    def receiver(sender, dataset, **kwargs):
        heard.append(dataset)

    dataset_imported.connect(receiver, dispatch_uid="test-generated")
    try:
        decide(reviewer, items[0], "approved")
        response = reviewer.post(reverse("drafting:draft-publish", args=[draft.pk]), follow=True)
        assert "3 items are still to review" in response.content.decode()
        draft.refresh_from_db()
        assert draft.status == Dataset.Status.DRAFT and not draft.items.exists() and not heard

        decide(reviewer, items[1], "rejected")
        decide(
            reviewer,
            items[2],
            "edited",
            content="Vell facts.",
            question="How many moons?",
            reference="Three",
        )
        decide(reviewer, items[3], "approved")
        response = reviewer.post(reverse("drafting:draft-publish", args=[draft.pk]))
        assert response.status_code == 302 and response["Location"] == draft.get_absolute_url()
    finally:
        dataset_imported.disconnect(dispatch_uid="test-generated")
    draft.refresh_from_db()
    assert (draft.status, draft.row_count) == (Dataset.Status.READY, 3)
    assert [d.pk for d in heard] == [draft.pk]
    rows = list(
        draft.items.order_by("position").values_list(
            "position", "key", "fields", "reference", "tags"
        )
    )
    assert rows == [
        (
            0,
            "1-1",
            {
                "id": "1-1",
                "content": "Facts of unit 1.",
                "question": "Who rules?",
                "reference": "Zorblat",
                "tags": "unit:1",
            },
            "Zorblat",
            ["unit:1"],
        ),
        (
            1,
            "2-1",
            {
                "id": "2-1",
                "content": "Vell facts.",
                "question": "How many moons?",
                "reference": "Three",
                "tags": "unit:2",
            },
            "Three",
            ["unit:2"],
        ),
        (
            2,
            "2-2",
            {
                "id": "2-2",
                "content": "Facts of unit 2.",
                "question": "=1+1",
                "reference": "2",
                "tags": "unit:2",
            },
            "2",
            ["unit:2"],
        ),
    ]
    assert draft.input_columns == ["content", "question"] and draft.reference_column == "reference"
    assert list(Dataset.objects.ready()) == [draft]
    # Published is final: decisions stay as the record, and no longer change.
    assert decide(reviewer, items[1], "approved").status_code == 302
    items[1].refresh_from_db()
    assert items[1].decision == "rejected"
    with pytest.raises(Frozen, match=r"v\d+ is published: its items no longer change"):
        items[1].decide("approved", None)
    # A run may use it now (its inputs are the content and the question).
    assert list(GenerationRunForm(task=task).fields["dataset"].queryset) == [draft]


@pytest.mark.django_db(transaction=True)
def test_publish_is_atomic(task):
    draft = make_draft(
        make_generator(task), [[("a?", "1"), ("b?", "2")]], decisions=["approved", "approved"]
    )
    # A clash on the second item's key makes the write fail halfway: nothing stays behind.
    Item.objects.create(dataset=draft, position=99, key="1-2", fields={})
    with pytest.raises(IntegrityError):
        publish(draft)
    draft.refresh_from_db()
    assert draft.status == Dataset.Status.DRAFT and draft.row_count == 0
    assert list(draft.items.values_list("key", flat=True)) == ["1-2"]
    assert not DraftItem.objects.filter(item__isnull=False).exists()


@pytest.mark.django_db
def test_a_discarded_draft_is_used_by_nothing_and_its_decisions_still_count(task, viewer_client):
    reviewer_client = Client()
    reviewer_client.force_login(make_user("reviewer", "decider"))
    generator = make_generator(task)
    draft = make_draft(
        generator, [[("a?", "1"), ("b?", "2"), ("c?", "3")]], decisions=["approved", "rejected"]
    )
    url = reverse("drafting:draft-discard", args=[draft.pk])
    review_url = reverse("drafting:draft-review", args=[draft.pk])
    assert 'id="discard"' in reviewer_client.get(review_url).content.decode()
    assert 'id="discard"' not in viewer_client.get(review_url).content.decode()
    assert viewer_client.post(url).status_code == 403
    run = Run.objects.get(dataset=draft)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())
    going = reviewer_client.post(url, follow=True).content.decode()
    assert "Its generation run is still going: cancel it first." in going
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)

    response = reviewer_client.post(url)
    assert response.status_code == 302 and response.url == task.get_absolute_url()
    draft.refresh_from_db()
    assert draft.status == Dataset.Status.DISCARDED
    # Its two decisions count; the item nobody decided is not waiting for anyone.
    (rates,) = rates_by_version(generator)
    assert (rates.approved, rates.rejected, rates.pending, rates.kept_rate) == (1, 1, 0, 0.5)
    review = reviewer_client.get(reverse("drafting:draft-review", args=[draft.pk])).content.decode()
    assert 'id="discarded"' in review and 'id="publish"' not in review
    assert 'id="discard"' not in review

    # Nothing uses it, changes it or publishes it; the next draft is not its new version.
    assert draft not in GenerationRunForm(task=task).fields["dataset"].queryset
    with pytest.raises(DraftError, match="is not a draft"):
        publish(draft)
    with pytest.raises(DraftError, match="is not a draft"):
        discard(draft)
    with pytest.raises(Frozen, match="is discarded: its items no longer change"):
        DraftItem.objects.get(dataset=draft, decision="pending").decide("approved", None)
    with pytest.raises(LaunchError, match="is discarded: its generation run cannot run again"):
        launch(run, Run.Mode.RESUME)
    with pytest.raises(JudgeRunError, match="is not ready"):
        check_source(make_judge(task), None, draft, "question")
    upload = Dataset.objects.new_version(task, draft.name, format="csv", status="ready")
    assert (upload.version, upload.previous_id) == (draft.version + 1, None)  # corrects nothing
    page = viewer_client.get(draft.get_absolute_url()).content.decode()
    assert "A discarded draft" in page
    assert "A corrected file becomes a new version" not in page  # its own run froze it


# ---- rates per generator version ------------------------------------------------------------------
@pytest.mark.django_db
def test_approve_and_reject_rates_per_version_are_computed_by_hand(task, viewer_client):
    v1 = make_generator(task)
    make_draft(
        v1,
        [[("q", "a")] * 4, [("q", "a")] * 3],
        decisions=["approved", "approved", "edited", "rejected", "approved", "rejected"],
    )
    edited = GeneratorForm(
        {
            "name": v1.name,
            "content_prompt": "Ten facts, world {{ unit }}.",
            "questions_prompt": "Ask:\n{{ content }}",
            "answers_prompt": "Answer:\n{{ questions }}",
        },
        instance=Generator.objects.get(pk=v1.pk),  # the form edits its instance in place
        task=task,
        editing=True,
    )
    assert edited.is_valid(), edited.errors
    v2 = edited.save(commit=False).save_as_new_version(None)
    assert (v1.version, v2.version) == (1, 2)
    make_draft(v2, [[("q", "a")] * 4], decisions=["approved", "rejected", "rejected", "rejected"])

    rates = {row.generator.version: row for row in rates_by_version(v2)}
    # v1: 3 approved, 1 edited, 2 rejected of 6 decided (1 still to review).
    one = rates[1]
    assert (one.approved, one.edited, one.rejected, one.pending, one.decided) == (3, 1, 2, 1, 6)
    assert (one.approved_rate, one.edited_rate, one.rejected_rate, one.kept_rate) == (
        pytest.approx(3 / 6),
        pytest.approx(1 / 6),
        pytest.approx(2 / 6),
        pytest.approx(4 / 6),
    )
    two = rates[2]
    assert (two.approved, two.edited, two.rejected, two.pending) == (1, 0, 3, 0)
    assert (two.kept_rate, two.rejected_rate) == (pytest.approx(0.25), pytest.approx(0.75))

    page = viewer_client.get(reverse("drafting:generator-detail", args=[v2.pk])).content.decode()
    row1 = page.split('id="rates-v1"', 1)[1].split("</tr>", 1)[0]
    row2 = page.split('id="rates-v2"', 1)[1].split("</tr>", 1)[0]
    assert '3 <span class="muted">(50%)</span>' in row1 and "(17%)" in row1 and "(33%)" in row1
    assert row1.rstrip().endswith("67%</td>")
    assert "(75%)" in row2 and row2.rstrip().endswith("25%</td>")
    assert 'id="generate-form"' not in page  # viewers see, never start


GOODAI_STYLE = {
    # GoodAI's LTM prompt files: later prompts refer to "the content prompt above".
    "content": "Generate a list of three facts about a fictional world.",
    "question": "Generate a question about each fact from the content prompt above.",
    "answer": "For each of the generated questions, provide the key information.",
}


@pytest.mark.django_db
def test_create_generator_reads_goodai_prompt_files_and_makes_versions(task, tmp_path):
    path = tmp_path / "delayed_recall.json"
    path.write_text(json.dumps(GOODAI_STYLE))
    out = io.StringIO()
    call_command(
        "create_generator",
        "--task",
        task.slug,
        "--name",
        "recall",
        "--from-json",
        str(path),
        stdout=out,
    )
    v1 = Generator.objects.get(task=task, name="recall")
    assert out.getvalue().startswith("Saved generator recall v1 in task qa")
    assert (v1.content_prompt, v1.questions_prompt, v1.answers_prompt) == (
        GOODAI_STYLE["content"],
        GOODAI_STYLE["question"],
        GOODAI_STYLE["answer"],
    )
    call_command(
        "create_generator",
        "--task",
        task.slug,
        "--name",
        "recall",
        "--answers",
        "Answer:\n{{ questions }}",
        stdout=io.StringIO(),
    )
    v2 = Generator.objects.get(task=task, name="recall", version=2)
    assert (
        v2.content_prompt == v1.content_prompt and v2.answers_prompt == "Answer:\n{{ questions }}"
    )
    v1.refresh_from_db()
    assert v1.answers_prompt == GOODAI_STYLE["answer"]  # earlier versions never change
    with pytest.raises(CommandError, match=r"nope.json: No such file"):
        call_command(
            "create_generator",
            "--task",
            task.slug,
            "--name",
            "x",
            "--from-json",
            str(tmp_path / "nope.json"),
        )
    with pytest.raises(CommandError, match=r"answers prompt: This field is required"):
        call_command(
            "create_generator",
            "--task",
            task.slug,
            "--name",
            "y",
            "--content",
            "c",
            "--questions",
            "q",
        )
    with pytest.raises(CommandError, match=r"Answers prompt: .*if"):
        call_command(
            "create_generator",
            "--task",
            task.slug,
            "--name",
            "z",
            "--content",
            "c",
            "--questions",
            "q",
            "--answers",
            "Answer {% if questions %}",
        )


@pytest.mark.django_db(transaction=True)
def test_prompts_without_the_earlier_reply_continue_the_conversation(task, endpoint, llm_server):
    llm_server.configure(
        script=[
            {"match": GOODAI_STYLE["content"], "reply": FACTS[1]},
            {"match": GOODAI_STYLE["question"], "reply": "1. Who rules Quix?\n2. Which way?"},
            {"match": GOODAI_STYLE["answer"], "reply": "1. The Zorblat\n2. Uphill"},
        ]
    )
    generator = make_generator(
        task,
        name="recall",
        content_prompt=GOODAI_STYLE["content"],
        questions_prompt=GOODAI_STYLE["question"],
        answers_prompt=GOODAI_STYLE["answer"],
    )
    run = create_dataset_generation_run(generator, endpoint, 1)
    work()
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.COMPLETED, 1)
    asked = [entry["messages"] for entry in llm_server.stats()["log"]]
    questions = "1. Who rules Quix?\n2. Which way?"
    assert asked == [
        [{"role": "user", "content": GOODAI_STYLE["content"]}],
        [
            {"role": "user", "content": GOODAI_STYLE["content"]},
            {"role": "assistant", "content": FACTS[1]},
            {"role": "user", "content": GOODAI_STYLE["question"]},
        ],
        [
            {"role": "user", "content": GOODAI_STYLE["content"]},
            {"role": "assistant", "content": FACTS[1]},
            {"role": "user", "content": GOODAI_STYLE["question"]},
            {"role": "assistant", "content": questions},
            {"role": "user", "content": GOODAI_STYLE["answer"]},
        ],
    ]
    assert [row[3:] for row in draft_rows(run.dataset)] == [
        ("Who rules Quix?", "The Zorblat"),
        ("Which way?", "Uphill"),
    ]


# ---- the command line -----------------------------------------------------------------------------
def generate_dataset(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "generate_dataset", *args],
        cwd=ROOT,
        env=subprocess_env(EVALSITE_PRICE_TABLE=PRICES),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_command_generates_and_waits_and_names_what_is_wrong(
    task, endpoint, llm_server, workers
):
    llm_server.configure(script=SCRIPT[:2] + SCRIPT[3:5] + SCRIPT[6:])
    make_generator(task)
    workers(EVALSITE_PRICE_TABLE=PRICES)
    common = ["--task", task.slug, "--generator", "world-facts", "--endpoint", endpoint.name]
    result = generate_dataset(*common, "--count", "2", "--wait", "--poll", "0.3")
    assert result.returncode == 0, result.stdout + result.stderr
    run = Run.objects.get(kind=Run.Kind.GENERATE_DATASET)
    lines = result.stdout.splitlines()
    assert (
        lines[0] == f"Started run #{run.pk} ({run.title}): 2 units (content → questions → answers)."
    )
    assert f"run #{run.pk} completed: 2 done, 0 failed of 2" in result.stdout
    assert lines[-1] == (
        f"Draft dataset world-facts v1 (id {run.dataset_id}): 4 items to review at "
        f"/runs/drafts/{run.dataset_id}/"
    )
    assert draft_rows(run.dataset) == EXPECTED

    bad = generate_dataset(
        "--task", task.slug, "--generator", "nope", "--endpoint", endpoint.name, "--count", "2"
    )
    assert (
        bad.returncode != 0
        and "No generator 'nope' in task qa (there are: world-facts)" in bad.stderr
    )
    bad = generate_dataset(*common, "--count", "0")
    assert bad.returncode != 0 and "--count must be between 1 and 1000, not 0" in bad.stderr
    assert Run.objects.filter(kind=Run.Kind.GENERATE_DATASET).count() == 1


# ---- a killed worker ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_loses_no_unit_and_resume_makes_only_the_rest(
    task, endpoint, llm_server, workers
):
    endpoint.concurrency_limit = 2
    endpoint.save()
    # Every reply is a one-entry list: each unit makes one item.
    llm_server.configure(latency=0.25, default_reply="1. entry {n}")
    run = create_dataset_generation_run(make_generator(task), endpoint, 12)
    worker = workers()
    wait_for(lambda: DraftUnit.objects.filter(run=run).count() >= 3, timeout=90, what="units")
    kill_hard(worker.pid)
    worker.wait(timeout=10)
    at_kill = {u.index: (u.pk, u.content) for u in DraftUnit.objects.filter(run=run)}
    assert 3 <= len(at_kill) < 12, "the kill must land mid-run"
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    assert run.is_stalled and run.can_resume
    with transaction.atomic():
        assert launch(run, Run.Mode.RESUME) == 12 - len(at_kill)
    work(timeout=180)
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == (Run.Status.COMPLETED, 12, 0)
    units = {u.index: (u.pk, u.content) for u in DraftUnit.objects.filter(run=run)}
    assert sorted(units) == list(range(12))
    assert {i: units[i] for i in at_kill} == at_kill  # finished units were not made again
    counts = DraftItem.objects.filter(dataset=run.dataset).values("unit").annotate(n=Count("pk"))
    assert len(counts) == 12 and all(row["n"] == 1 for row in counts)
