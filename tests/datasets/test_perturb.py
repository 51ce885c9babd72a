"""Perturbed copies (#15.3): each perturbation on fixed inputs with a fixed seed gives exactly
the expected text, keys are kept, the result is seeded and reproducible whatever the order,
the reference rule holds, and the copy is a linked, tagged, ready dataset."""

import pytest
from django.core.management import CommandError, call_command

from apps.datasets.models import Dataset
from apps.datasets.perturb import PerturbError, perturb_dataset, perturb_item
from tests.factories import make_dataset, make_task

TEXT = "Mary gave John his book back yesterday because she saw him read it; it costs 12.50 dollars, not 1,000."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "typos",
            "Mary gae Joohn his book back yesterday because she saw him read it; it costs "
            "12.50 dollars, not 1,000.",
        ),
        (
            "casing",
            "mary gave john his book back yesterday because she saw him read it; it costs "
            "12.50 dollars, not 1,000.",
        ),
        (
            "whitespace",
            "Mary gave John his book  back yesterday because   she saw him  read   it;   it "
            "costs 12.50 dollars, not 1,000.",
        ),
        (
            "punctuation",
            "Mary gave John his book back yesterday because she saw him read it it costs "
            "12.50 dollars, not 1,000",
        ),
        (
            "fairness",
            "George gave Patricia her book back yesterday because he saw her read it; it costs "
            "12.50 dollars, not 1,000.",
        ),
        (
            "numbers",
            "Mary gave John his book back yesterday because she saw him read it; it costs "
            "75.56 dollars, not 6,895.",
        ),
    ],
)
def test_each_perturbation_gives_exactly_this_text(name, expected):
    changed, reference = perturb_item(name, 7, "q1", {"question": TEXT}, "Paris")
    assert changed == {"question": expected}
    assert reference == "Paris"


def test_seeded_reproducible_and_independent_of_order():
    inputs = {"question": TEXT, "context": "Peter met Anna at 9 am in Berlin, then left."}
    for name in ("typos", "casing", "whitespace", "punctuation", "fairness", "numbers"):
        first = perturb_item(name, 3, "k", inputs, "")
        assert perturb_item(name, 3, "k", dict(reversed(inputs.items())), "") == first
        # Another seed or another item key draws differently (these texts give each a choice).
        others = {perturb_item(name, s, "k", inputs, "")[0]["question"] for s in range(6)}
        assert len(others) > 1, name


def test_punctuation_between_digits_and_whitespace_inside_lines_are_kept():
    changed, _ = perturb_item("punctuation", 1, "k", {"q": "Pay 3.5, or 1,000!"}, "")
    assert "3.5" in changed["q"] and "1,000" in changed["q"]
    changed, _ = perturb_item("whitespace", 1, "k", {"q": "a\nb c"}, "")
    assert changed["q"].split("\n")[0] == "a"


def test_names_and_pronouns_swap_in_the_reference_too():
    changed, reference = perturb_item(
        "fairness", 7, "q1", {"question": "Who lent John his car? He asked her for it."}, "John"
    )
    assert changed == {"question": "Who lent Mary her car? She asked him for it."}
    assert reference == "Mary"
    # A lowercase word is not a name ("mark" stays), capitals keep their case.
    changed, _ = perturb_item("fairness", 7, "q2", {"q": "JOHN will mark HIS answer."}, "")
    assert changed["q"] == "ASHLEY will mark HER answer."


def test_numbers_change_only_where_the_reference_has_no_digit():
    # "6" depends on the 3s without containing them: the item stays as it is.
    assert perturb_item("numbers", 7, "q1", {"q": "What is 3 + 3?"}, "6") == (
        {"q": "What is 3 + 3?"},
        "6",
    )
    changed, reference = perturb_item(
        "numbers", 7, "q2", {"q": "In 1889 which city got the tower? 1889!"}, "Paris"
    )
    assert reference == "Paris"
    assert changed["q"] != "In 1889 which city got the tower? 1889!"
    year = changed["q"].split()[1]
    assert len(year) == 4 and year.isdigit() and changed["q"].endswith(f"? {year}!")


def test_unknown_perturbation_is_refused():
    with pytest.raises(PerturbError, match="Unknown perturbation 'leet': use one of typos"):
        perturb_item("leet", 1, "k", {}, "")


ROWS = [
    {
        "key": "a1",
        "fields": {
            "id": "a1",
            "question": "Where does Mary live?",
            "answer": "Mary lives in Rome",
            "given": "Rome",
            "tag": "geo",
        },
        "reference": "Mary lives in Rome",
        "tags": ["geo"],
    },
    {
        "key": "b2",
        "fields": {
            "id": "b2",
            "question": "What is 2 + 2?",
            "answer": "4",
            "given": "4",
            "tag": "math",
        },
        "reference": "4",
        "tags": ["math"],
    },
]
MAPPING = {
    "id_column": "id",
    "input_columns": ["question"],
    "reference_column": "answer",
    "tags_column": "tag",
    "response_columns": ["given"],
}


@pytest.fixture
def original(db) -> Dataset:
    task = make_task("perturbing")
    columns = ["id", "question", "answer", "given", "tag"]
    return make_dataset(task, ROWS, name="facts", columns=columns, mapping=MAPPING)


def test_the_copy_keeps_keys_is_linked_tagged_and_ready(original):
    copy = perturb_dataset(original, "fairness", 7)
    assert (copy.name, copy.version, copy.status) == ("facts · fairness (seed 7)", 1, "ready")
    assert (copy.perturbed_from, copy.perturbation, copy.perturbation_seed) == (
        original,
        "fairness",
        7,
    )
    items = list(copy.items.order_by("position"))
    assert [(i.position, i.key) for i in items] == [(0, "a1"), (1, "b2")]
    first, second = items
    name = first.fields["question"].split()[2]
    assert first.fields["question"] == f"Where does {name} live?" and name != "Mary"
    # The reference follows the swap, in the item and in its column; the answers are gone.
    assert first.reference == f"{name} lives in Rome" == first.fields["answer"]
    assert "given" not in first.fields and copy.response_columns == []
    assert "given" not in copy.columns
    assert first.tags == ["geo", "perturbed:fairness"] and second.tags == ["math"]
    assert copy.tag_counts == {"geo": 1, "math": 1, "perturbed:fairness": 1}
    assert second.fields == {"id": "b2", "question": "What is 2 + 2?", "answer": "4", "tag": "math"}
    assert copy.fingerprint == copy.compute_fingerprint()
    # The same perturbation and seed give the copy already made; another seed a new version.
    assert perturb_dataset(original, "fairness", 7) == copy
    again = perturb_dataset(original, "fairness", 8)
    assert (again.name, again.version) == ("facts · fairness (seed 8)", 1)


def test_refusals(original):
    original.status = Dataset.Status.IMPORTING
    original.save()
    with pytest.raises(PerturbError, match="facts v1 is importing, not ready"):
        perturb_dataset(original, "typos", 1)
    original.status = Dataset.Status.READY
    original.save()
    with pytest.raises(PerturbError, match="Unknown perturbation 'sarcasm'"):
        perturb_dataset(original, "sarcasm", 1)
    copy = perturb_dataset(original, "typos", 1)
    with pytest.raises(PerturbError, match="already a perturbed copy"):
        perturb_dataset(copy, "typos", 2)
    assert Dataset.objects.count() == 2


def test_cli(original, capsys):
    call_command("perturb_dataset", str(original.pk), "--perturbation", "casing", "--seed", "3")
    copy = Dataset.objects.get(perturbation="casing")
    out = capsys.readouterr().out
    assert f"Made facts · casing (seed 3) v1 (dataset #{copy.pk})" in out
    assert "2 of 2 items changed, tagged perturbed:casing" in out
    call_command("perturb_dataset", str(original.pk), "--perturbation", "casing", "--seed", "3")
    assert "Already made" in capsys.readouterr().out
    assert Dataset.objects.filter(perturbation="casing").count() == 1
    with pytest.raises(CommandError, match="Unknown perturbation 'leet'"):
        call_command("perturb_dataset", str(original.pk), "--perturbation", "leet")
    with pytest.raises(CommandError, match="No dataset with id 999"):
        call_command("perturb_dataset", "999", "--perturbation", "typos")


def test_the_dataset_page_makes_copies_for_admins_only(original):
    from django.test import Client

    from tests.base import make_user

    viewer = Client()
    viewer.force_login(make_user("viewer"))
    page = viewer.get(original.get_absolute_url()).content.decode()
    assert 'id="perturbations"' in page and 'id="perturb-form"' not in page
    url = f"/datasets/{original.pk}/perturb/"
    assert viewer.post(url, {"perturbation": "typos", "seed": "1"}).status_code == 403
    reviewer = Client()
    reviewer.force_login(make_user("reviewer"))
    assert reviewer.post(url, {"perturbation": "typos", "seed": "1"}).status_code == 403
    assert not Dataset.objects.filter(perturbation="typos").exists()

    admin = Client()
    admin.force_login(make_user("admin"))
    assert 'id="perturb-form"' in admin.get(original.get_absolute_url()).content.decode()
    response = admin.post(url, {"perturbation": "leet", "seed": "1"}, follow=True)
    assert "Not perturbed: perturbation: Select a valid choice." in response.content.decode()
    response = admin.post(url, {"perturbation": "typos", "seed": "4"}, follow=True)
    copy = Dataset.objects.get(perturbation="typos")
    assert response.redirect_chain[-1][0] == copy.get_absolute_url()
    page = response.content.decode()
    assert "Made facts · typos (seed 4) v1:" in page
    assert f'id="perturbed-from">{original}</a>' in page
    assert 'id="perturbation-seed">4<' in page
    again = admin.post(url, {"perturbation": "typos", "seed": "4"}, follow=True)
    assert "was made before with this perturbation and seed" in again.content.decode()
    assert Dataset.objects.filter(perturbation="typos").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_big_dataset_is_copied_by_a_worker(settings):
    from django.test import Client

    from tests.base import make_user, work

    task = make_task("big")
    original = make_dataset(task, ROWS, name="facts", mapping=MAPPING)
    settings.DATASET_SYNC_MAX_ROWS = 1  # two items count as big here
    admin = Client()
    admin.force_login(make_user("admin"))
    url = f"/datasets/{original.pk}/perturb/"
    response = admin.post(url, {"perturbation": "casing", "seed": "2"}, follow=True)
    assert response.redirect_chain[-1][0] == original.get_absolute_url()
    assert "Making the casing copy of 2 items in the background" in response.content.decode()
    assert not Dataset.objects.filter(perturbation="casing").exists()
    work()
    copy = Dataset.objects.get(perturbation="casing")
    assert (copy.perturbed_from, copy.perturbation_seed, copy.row_count) == (original, 2, 2)
    # Asked again, the copy made is shown at once.
    again = admin.post(url, {"perturbation": "casing", "seed": "2"}, follow=True)
    assert again.redirect_chain[-1][0] == copy.get_absolute_url()
