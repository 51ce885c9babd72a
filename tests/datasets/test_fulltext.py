"""Full-text search behind one function (#28.5): the same rows on SQLite (FTS5) and PostgreSQL
(tsvector), whatever the user types, and an index that follows every write."""

import pytest
from django.db import connection

from apps.datasets import fulltext
from apps.datasets.fulltext import Term, matching, terms
from apps.datasets.models import Item
from apps.runs.models import Response
from tests.factories import make_dataset, make_generation_run, make_task

pytestmark = pytest.mark.django_db

TEXTS = [
    "The capital of France is Paris.",  # 0
    "Paris Hilton is not a capital.",  # 1
    "Photosynthesis turns light into sugar",  # 2
    "日本の首都は東京です。",  # 3
    "SQL: SELECT * FROM t WHERE x = 'a\"b'; -- NEAR(x y) OR z",  # 4
    "Café au lait, naïve résumé",  # 5
    "capitals and CAPITALISM",  # 6
]


@pytest.fixture
def items():
    task = make_task()
    rows = [{"key": f"k{i}", "fields": {"text": text}} for i, text in enumerate(TEXTS)]
    dataset = make_dataset(task, rows)
    return dataset


def found(dataset, text: str) -> list[int]:
    return sorted(matching(dataset.items.all(), text).values_list("position", flat=True))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("paris", [0, 1]),  # a word, case folded
        ("PARIS capital", [0, 1]),  # every word, in any order
        ('"capital of france"', [0]),  # a phrase, words in order
        ('"france of capital"', []),
        ("capital", [0, 1]),  # words, not substrings: "capitals" is another word
        ("capital*", [0, 1, 6]),  # a prefix
        ("photo", []),
        ("photo*", [2]),
        ("photosynthesi*", [2]),  # longer than the index's prefix lists: read whole
        ("capitalis*", [6]),
        ("c*", [0, 1, 5, 6]),  # café too
        ("首都", [3]),  # no spaces between words in Japanese: a substring
        ("東京 paris", []),
        ("café", [5]),
        ("resume", []),  # accents are kept, on both databases alike
        ("near(x", [4]),  # FTS5 syntax is text
        ('a"b', [4]),
        ("select * from", [4]),
        ("OR", [4]),
        ("-- ;", [0, 1, 2, 3, 4, 5, 6]),  # no word at all: nothing to narrow by
        ("", [0, 1, 2, 3, 4, 5, 6]),
        ("zebra", []),
    ],
)
def test_words_phrases_prefixes_and_unspaced_scripts(items, query, expected):
    assert found(items, query) == expected
    # Each row looked up on its own (a search that stops early) finds the same rows.
    per_row = items.items.filter(fulltext.condition(Item, query, per_row=True))
    assert sorted(per_row.values_list("position", flat=True)) == expected


def test_more_than_counts_matches_only_as_far_as_it_needs(items):
    assert fulltext.more_than(Item, "paris", 1)  # 2 rows
    assert not fulltext.more_than(Item, "paris", 2)
    assert fulltext.more_than(Item, "capital*", 2)
    assert not fulltext.more_than(Item, "zebra", 0)
    assert not fulltext.more_than(Item, "首都", 0)  # no indexed word: nothing counted


def test_terms_are_words_phrases_and_prefixes():
    assert terms('Capital "of  France" pari* -- *') == [
        Term("capital"),
        Term("of france"),
        Term("pari", prefix=True),
    ]
    assert terms("a_b*") == [Term("a_b*")]  # only letters and digits make a prefix


def test_the_index_follows_updates_and_deletes(items):
    item = items.items.get(position=2)
    item.search_text = "chlorophyll absorbs light"
    item.save(update_fields=["search_text"])
    assert found(items, "photosynthesis") == []
    assert found(items, "chlorophyll") == [2]
    Item.objects.filter(position=0).delete()
    assert found(items, "paris") == [1]
    assert found(items, "france") == []


def test_responses_are_searched_too(items):
    run = make_generation_run(items, {0: "Paris, obviously.", 1: "I do not know", 2: None})
    hits = matching(Response.objects.filter(run=run), "obviously paris")
    assert [r.item.position for r in hits] == [0]
    # The item's own text and its responses' are one condition each, to combine.
    either = items.items.filter(
        fulltext.condition(Item, "know")
        | fulltext.condition(Response, "know", prefix="responses__")
    ).distinct()
    assert [i.position for i in either] == [1]


def test_a_column_without_an_index_is_refused(items):
    with pytest.raises(ValueError, match="no full-text index"):
        list(Item.objects.filter(reference__fulltext="x"))


def test_the_index_is_there_after_migrate_and_put_back_when_lost(items):
    assert fulltext.ensure_index(Item) is False  # made by post_migrate
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # What SQLite's ALTER TABLE emulation does to triggers when a migration copies a table.
            cursor.execute('DROP TRIGGER "datasets_item_fts_insert"')
        else:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE after inserts
            cursor.execute('ALTER TABLE "datasets_item" DROP COLUMN "fts_vector"')
    make_dataset(items.task, [{"key": "x", "fields": {"text": "zebra crossing"}}])
    assert fulltext.ensure_index(Item) is True
    assert matching(Item.objects.all(), "zebra").count() == 1  # rows written meanwhile too
    assert found(items, "paris") == [0, 1]


def test_an_index_made_before_the_prefix_lists_is_made_again(items):
    if connection.vendor != "sqlite":  # the GIN index finds prefixes in its sorted keys
        assert fulltext.ensure_index(Item) is False
        assert found(items, "capital*") == [0, 1, 6]
        return
    with connection.cursor() as cursor:
        cursor.execute('DROP TABLE "datasets_item_fts"')
        cursor.execute(
            'CREATE VIRTUAL TABLE "datasets_item_fts" USING fts5("search_text", '
            'content="datasets_item", content_rowid="id", '
            "tokenize='unicode61 remove_diacritics 0')"
        )
    assert fulltext.ensure_index(Item) is True
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'datasets_item_fts'")
        assert "prefix='1 2 3 4 5 6 7 8 9 10 11 12'" in cursor.fetchone()[0]
    assert found(items, "capital*") == [0, 1, 6]  # filled again
    assert fulltext.ensure_index(Item) is False


def test_an_import_indexes_its_items_in_one_statement_and_puts_the_trigger_back():
    from apps.datasets.importing import import_dataset
    from apps.datasets.readers import DatasetError
    from tests.datasets import samples

    task = make_task()
    data = samples.csv_bytes(["id", "q"], [["a", "the zebra crossing"], ["b", "a quiet road"]])
    dataset = import_dataset(task, "roads", data, {"id_column": "id"})
    assert found(dataset, "zebra") == [0]
    repeated = samples.csv_bytes(["id", "q"], [["a", "zebra"], ["a", "zebra"]])
    with pytest.raises(DatasetError):
        import_dataset(task, "broken", repeated, {"id_column": "id"})
    assert fulltext.ensure_index(Item) is False  # every trigger is there
    later = make_dataset(task, [{"key": "x", "fields": {"q": "zebra"}}])
    assert found(later, "zebra") == [0]
    assert matching(Item.objects.all(), "zebra").count() == 2
