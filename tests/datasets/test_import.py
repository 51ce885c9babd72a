"""import_dataset: the four shapes, the mapping, ids, versions, frozen datasets, atomicity."""

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from apps.datasets import importing
from apps.datasets.importing import (
    Mapping,
    import_dataset,
    reference_like,
    split_tags,
    suggest_mapping,
)
from apps.datasets.models import Dataset, Frozen, Item, Task
from apps.datasets.readers import DatasetError
from apps.runs.models import Run
from tests.datasets import samples

pytestmark = pytest.mark.django_db


def assert_nothing_stored() -> None:
    assert Dataset.objects.count() == 0
    assert Item.objects.count() == 0


def import_error(task: Task, data: bytes, name: str = "file.csv", **mapping) -> str:
    with pytest.raises(DatasetError) as caught:
        import_dataset(task, "broken", data, mapping, file_name=name)
    assert_nothing_stored()
    return str(caught.value)


# ---- the four shapes ----------------------------------------------------------------------
def test_mmlu_csv_with_a_response_column(task, admin_user):
    mapping = {"reference_column": "answer", "response_columns": ["response"]}
    dataset = import_dataset(task, "mmlu", samples.MMLU_CSV, mapping, user=admin_user)
    assert (dataset.status, dataset.format, dataset.row_count) == ("ready", "csv", 3)
    assert dataset.columns == ["question", "A", "B", "C", "D", "answer", "response"]
    assert dataset.input_columns == ["question", "A", "B", "C", "D"]  # the unmapped ones
    assert dataset.response_columns == ["response"]
    assert dataset.created_by == admin_user
    items = list(dataset.items.order_by("position"))
    assert [item.key for item in items] == ["0", "1", "2"]  # no id column: the position
    assert items[0].fields["question"] == 'Which is prime, given "primes" are odd?'
    assert items[0].field("response") == "The answer is C.\r\nBecause 7 is prime."
    assert items[1].fields["B"] == "北京" and items[1].reference == "B"
    assert items[2].fields["question"] == "007" and items[2].fields["A"] == "NA"
    assert "中国的首都是哪里" in items[1].search_text


def test_instruction_jsonl_with_history_list(task):
    mapping = Mapping(reference_column="output", response_columns=["response"])
    dataset = import_dataset(task, "sft", samples.INSTRUCTION_JSONL, mapping, file_name="s.jsonl")
    assert dataset.format == "jsonl"
    first = dataset.items.get(position=0)
    assert first.fields["history"] == [["Hi", "Salut"], ["Thanks", "Merci"]]
    assert first.reference == "Bonjour"
    assert dataset.input_columns == ["instruction", "input", "history"]
    assert "merci" in first.search_text  # lists are searchable too


def test_json_array_with_numeric_ids_and_list_references(task):
    mapping = {"id_column": "id", "reference_column": "answers"}
    dataset = import_dataset(task, "qa", samples.JSON_ARRAY, mapping, file_name="qa.json")
    assert list(dataset.items.values_list("key", flat=True)) == ["1", "2", "3"]
    first = dataset.items.get(key="1")
    assert first.fields == samples.JSON_ROWS[0]  # numbers, lists and objects stay JSON
    assert first.reference == '["4", "four"]'


def test_nli_jsonl_with_uid_label_and_tag_lists(task):
    mapping = {"id_column": "uid", "reference_column": "label", "tags_column": "tags"}
    dataset = import_dataset(task, "nli", samples.NLI_JSONL, mapping, file_name="nli.jsonl")
    assert dataset.tag_counts == {"easy": 2, "music": 1, "animals": 1, "weather": 1}
    assert dataset.sorted_tag_counts()[0] == ("easy", 2)
    assert sorted(dataset.items.tagged("easy").values_list("key", flat=True)) == ["n-1", "n-3"]
    assert dataset.items.get(key="n-2").reference == "neutral"
    assert dataset.input_columns == ["premise", "hypothesis"]


def test_tags_from_text_are_split_on_commas_and_semicolons():
    assert split_tags("math; easy,algebra;;math") == ["math", "easy", "algebra"]
    assert split_tags(["a", " b ", "", 3]) == ["a", "b", "3"]
    assert split_tags(None) == [] and split_tags("") == []


def test_tag_filter_matches_whole_tags_only(task):
    data = samples.csv_bytes(["q", "tags"], [["1", "math"], ["2", "mathematics"], ["3", "a|b"]])
    dataset = import_dataset(task, "t", data, {"tags_column": "tags"})
    assert list(dataset.items.tagged("math").values_list("key", flat=True)) == ["0"]
    assert list(dataset.items.tagged("a|b").values_list("key", flat=True)) == ["2"]
    assert not dataset.items.tagged("a").exists()


# ---- every error leaves nothing behind ----------------------------------------------------
@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (b"", "x.csv", "The file is empty."),
        (b"a,b\n", "x.csv", "only a header row"),
        ("a\ncafé\n".encode("latin-1"), "x.csv", "line 2"),
        (b'{"a": 1}\n{"a": }\n', "x.jsonl", "Line 2 is not valid JSON"),
        (b"a,b\n1,2\n1,2,3\n", "x.csv", "Row 3 (line 3) has 3 fields, but the header has 2"),
        (b'{"a": [1]}', "x.json", "not a list of objects"),
        (b'{"a": 1}\n7\n', "x.jsonl", "Line 2 is a number, not a JSON object"),
        (b"a\n\x00\n", "x.csv", "NUL bytes"),
    ],
)
def test_file_errors_store_nothing(task, data, name, expected):
    assert expected in import_error(task, data, name)


def test_duplicate_ids_name_the_id_and_its_rows(task):
    data = samples.csv_bytes(
        ["id", "q"], [["a", "1"], ["b", "2"], ["a", "3"], ["c", "4"], ["a", "5"]]
    )
    message = import_error(task, data, id_column="id")
    assert message.startswith("The id 'a' in column 'id' appears 3 times: row 2, row 4, row 6.")
    lines = b'{"uid": 1}\n{"uid": 2}\n\n{"uid": 1}\n{"uid": 2}\n'
    message = import_error(task, lines, "x.jsonl", id_column="uid")
    assert "The id '1' in column 'uid' appears 2 times: line 1, line 4." in message
    assert "1 other ids are repeated too" in message


def test_missing_and_bad_ids(task):
    data = samples.csv_bytes(["id", "q"], [["a", "1"], ["", "2"]])
    assert import_error(task, data, id_column="id") == "Row 3 has no id in the id column 'id'."
    lines = b'{"id": "x"}\n{"id": [1]}\n'
    assert "Line 2 has a list in the id column 'id'" in import_error(
        task, lines, "x.jsonl", id_column="id"
    )


def test_file_over_the_size_limit_stores_nothing(task, settings):
    settings.DATASET_MAX_UPLOAD_BYTES = 100
    assert "the limit is 100 bytes" in import_error(task, samples.numbered_csv(20))


def test_mapping_must_name_columns_of_the_file(task):
    data = samples.csv_bytes(["question", "answer"], [["q", "a"]])
    message = import_error(task, data, reference_column="gold")
    assert (
        message
        == "The reference column 'gold' is not in the file. Its columns are: question, answer."
    )
    message = import_error(task, data, reference_column="answer", response_columns=["answer"])
    assert message == "Column 'answer' cannot be both the reference column and a response column."
    message = import_error(task, data, id_column="question", response_columns=["question"])
    assert message == "Column 'question' cannot be both the id column and a response column."
    # An input may also be the tags or the reference: a prompt may show what it likes.
    mapping = Mapping(input_columns=["question", "answer"], tags_column="answer")
    dataset = import_dataset(task, "ok", data, mapping)
    assert dataset.input_columns == ["question", "answer"] and dataset.tag_counts == {"a": 1}


def test_a_failure_while_writing_leaves_no_half_written_items(task, monkeypatch):
    """The third batch hits the unique key constraint after two batches were inserted."""
    monkeypatch.setattr(importing, "WRITE_BATCH", 10)
    real_build = importing.build_item_rows

    def build_with_a_clash(table, mapping):
        items = real_build(table, mapping)
        items.rows[25] = (25, items.rows[0][1], *items.rows[25][2:])
        return items

    monkeypatch.setattr(importing, "build_item_rows", build_with_a_clash)
    with CaptureQueriesContext(connection) as queries, pytest.raises(IntegrityError):
        import_dataset(task, "big", samples.numbered_csv(50), {"id_column": "id"})
    writes = ('INSERT INTO "datasets_item"', 'COPY "datasets_item"')  # SQLite, PostgreSQL
    inserts = [q for q in queries.captured_queries if any(w in q["sql"] for w in writes)]
    assert len(inserts) == 3  # two batches (20 items) went in before the failure...
    assert_nothing_stored()  # ...and were rolled back with the dataset row


# ---- mapping memory -----------------------------------------------------------------------
def test_the_mapping_is_remembered_per_column_name_and_new_columns_are_guessed(task):
    mapping = {"id_column": "uid", "reference_column": "label", "tags_column": "tags"}
    import_dataset(task, "nli", samples.NLI_JSONL, mapping, file_name="nli.jsonl")
    task.refresh_from_db()
    assert Mapping.from_dict(task.last_mapping) == Mapping(
        "uid", ["premise", "hypothesis"], "label", "tags", []
    )
    assert task.remembered_roles() == {
        "uid": ["id"],
        "premise": ["input"],
        "hypothesis": ["input"],
        "label": ["reference"],
        "tags": ["tags"],
    }
    # "notes" is new: guessed by its name (an input), not dropped for the memory's sake.
    offered = suggest_mapping(task, "other", ["uid", "premise", "label", "notes"])
    assert offered == Mapping("uid", ["premise", "notes"], "label", None, [])
    other = Task.objects.create(slug="other", name="Other")
    assert other.last_mapping == {} and other.remembered_roles() == {}


def test_a_reference_that_was_an_input_elsewhere_is_suggested_as_the_reference(task):
    """#28.6: after a file where `answer` was an input, question/answer/response made `answer`
    an input again (the reference leaked into prompts) and lost the response column."""
    first = samples.csv_bytes(["input", "answer", "label"], [["2+2?", "four", "4"]])
    import_dataset(task, "grading", first, {"input_columns": ["input", "answer"],
                                            "reference_column": "label"}, fmt="csv")  # fmt: skip
    task.refresh_from_db()
    offered = suggest_mapping(task, "qa", ["question", "answer", "response"])
    assert offered == Mapping(None, ["question"], "answer", None, ["response"])
    # Per name, the memory still decides what names cannot: "input" was an input.
    assert suggest_mapping(task, "qa", ["input", "answer"]).input_columns == ["input"]


def test_memory_decides_per_name_and_a_kept_column_stays_out_of_the_inputs(task):
    import_dataset(task, "nli", samples.NLI_JSONL, {"id_column": "uid",
        "reference_column": "hypothesis", "input_columns": ["premise"]}, fmt="jsonl")  # fmt: skip
    task.refresh_from_db()
    # label was kept (no role): neither the reference its name suggests nor an input.
    offered = suggest_mapping(task, "nli-2", ["uid", "premise", "hypothesis", "label", "extra"])
    assert offered == Mapping("uid", ["premise", "extra"], "hypothesis", None, [])


def test_columns_named_like_a_reference_are_never_suggested_or_defaulted_as_inputs():
    guess = Mapping.suggest(["question", "answer", "gold_label", "expectedOutput", "answer_a"])
    assert guess.reference_column == "answer"
    assert guess.input_columns == ["question", "answer_a"]  # options stay inputs
    checked = Mapping(reference_column="label").validated(["q", "Gold Answer", "label", "ctx"])
    assert checked.input_columns == ["q", "ctx"]
    chosen = Mapping(input_columns=["q", "Gold Answer"]).validated(["q", "Gold Answer"])
    assert chosen.reference_like_inputs() == ["Gold Answer"]  # ticked: kept, and said
    assert [reference_like(n) for n in ("response_gold", "prediction_answer", "uid")] == [
        False,
        False,
        False,
    ]


def test_without_a_memory_the_mapping_is_guessed_from_column_names():
    guess = Mapping.suggest(["question", "A", "B", "C", "D", "answer", "response"])
    assert guess == Mapping(None, ["question", "A", "B", "C", "D"], "answer", None, ["response"])
    guess = Mapping.suggest(["uid", "premise", "hypothesis", "label", "tags"])
    assert guess == Mapping("uid", ["premise", "hypothesis"], "label", "tags", [])
    guess = Mapping.suggest(["instruction", "input", "output", "history", "response"])
    assert guess.reference_column == "output" and guess.response_columns == ["response"]


# ---- versions and frozen datasets ---------------------------------------------------------
def test_a_corrected_file_becomes_the_next_version_linked_to_the_old(task):
    first = import_dataset(task, "mmlu", samples.MMLU_CSV, {"reference_column": "answer"})
    fixed = samples.MMLU_CSV.replace("北京".encode(), "北京市".encode())
    second = import_dataset(task, "mmlu", fixed, {"reference_column": "answer"})
    assert (first.version, second.version) == (1, 2)
    assert second.previous == first and second.name == "mmlu"
    assert list(first.next_versions.all()) == [second]
    assert first.items.get(position=1).fields["B"] == "北京"  # the old version is untouched
    assert second.items.get(position=1).fields["B"] == "北京市"
    assert import_dataset(task, "other", fixed, {}).version == 1


def test_a_dataset_is_frozen_once_a_run_uses_it(task):
    dataset = import_dataset(task, "mmlu", samples.MMLU_CSV, {"reference_column": "answer"})
    assert not dataset.is_frozen
    Run.objects.create(task=task, kind=Run.Kind.GENERATION, dataset=dataset)
    assert dataset.is_frozen
    with pytest.raises(Frozen, match="Upload a corrected file"):
        dataset.delete()
    assert dataset.items.count() == 3
    newer = import_dataset(task, "mmlu", samples.MMLU_CSV, {"reference_column": "answer"})
    assert newer.previous == dataset and not newer.is_frozen


def test_an_unfrozen_dataset_can_be_deleted_with_its_items(task):
    dataset = import_dataset(task, "mmlu", samples.MMLU_CSV, {})
    dataset.delete()
    assert_nothing_stored()
