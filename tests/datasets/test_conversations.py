"""Conversation datasets (#27.1): chat messages, MT-Bench turns and ShareGPT read into one
canonical shape; bad conversations refused with the row and the message, nothing stored."""

import csv
import io
import json
from pathlib import Path

import pyarrow
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from apps.datasets.conversations import (
    ConversationError,
    conversation_text,
    parse_conversation,
    parse_turn_references,
)
from apps.datasets.importing import Mapping, import_dataset, suggest_mapping
from apps.datasets.models import Dataset, Item
from apps.datasets.readers import DatasetError
from tests.datasets.samples import csv_bytes, parquet_bytes, xlsx_bytes

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mt_bench"
QUESTIONS = FIXTURES / "question.jsonl"

CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
TOOL_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 12}'},
    {"role": "assistant", "content": "12 °C."},
]


def jsonl(*rows: dict) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def assert_nothing_stored() -> None:
    assert not Dataset.objects.exists() and not Item.objects.exists()


# ---- reading one conversation -------------------------------------------------------------
def test_the_three_shapes_read_into_canonical_chat_messages():
    assert parse_conversation(["Hi?", "And then?"]) == [
        {"role": "user", "content": "Hi?"},
        {"role": "user", "content": "And then?"},
    ]
    sharegpt = [{"from": "system", "value": "S"}, {"from": "human", "value": "Q"},
                {"from": "gpt", "value": "A"}]  # fmt: skip
    assert [m["role"] for m in parse_conversation(sharegpt)] == ["system", "user", "assistant"]
    canonical = parse_conversation(json.dumps(TOOL_CHAT))  # a CSV cell's JSON text
    assert canonical[2] == {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert canonical[3] == {"role": "tool", "content": '{"temp": 12}', "tool_call_id": "call_1"}
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text",
                                                                        "text": "b"}]}]  # fmt: skip
    assert parse_conversation(parts) == [{"role": "user", "content": "a\nb"}]
    decoded = [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}]}]  # fmt: skip
    assert parse_conversation(decoded)[1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'


def test_a_conversation_reads_as_one_text():
    assert conversation_text(parse_conversation(TOOL_CHAT)) == (
        "System: Be brief.\n\n"
        "User: Weather in Paris?\n\n"
        "Assistant calls weather({}) [call_1]\n\n"
        'Tool [call_1]: {"temp": 12}\n\n'
        "Assistant: 12 °C."
    )


@pytest.mark.parametrize(
    "value, message, text",
    [
        ([{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}], 2,
         "role 'bot' is not one of system, user, assistant, tool"),
        ([{"role": "user"}], 1, "the user message has no content"),
        ([{"role": "user", "content": "  "}], 1, "the user message is empty"),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}], 2,
         "the assistant message is empty"),
        ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "x",
                                               "content": "r"}], 2,
         "a tool result for call 'x', which no earlier assistant message made"),
        ([{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}], 2,
         "a tool result has no tool_call_id"),
        ([*TOOL_CHAT[:4], TOOL_CHAT[3]], 5, "call 'call_1' already has a result"),
        ([{"role": "user", "content": "q", "tool_calls": [CALL]}], 1,
         "a user message has tool_calls"),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"id": ""}]}],
         2, "tool call 1 has no id"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], 1,
         "content part 1 is 'image_url': only text parts can be kept"),
        ([{"role": "user", "content": 3}], 1, "the content is a number, not a text"),
        ([{"role": "user", "content": "q"}, "a"], 2, "is a text, not a message object"),
        ([{"content": "q"}], 1, "has no 'role' (chat messages have 'role' and 'content')"),
        (["first", ""], 2, "the turn is empty"),
        (["first", 2], 2, "is a number, but the first message is a text"),
        ([{"from": "human", "value": "q"}, {"from": "bot", "value": "a"}], 2,
         "'from' 'bot' is not one of human, gpt, system"),
        ([{"from": "human"}], 1, "has no 'value' (the message's text)"),
        ([], None, "the conversation is empty"),
        ("", None, "the conversation is empty"),
        (None, None, "the conversation is empty"),
        ("hello", None, "the conversation is a text, not a JSON list of messages"),
        ("[{", None, "the conversation is not valid JSON"),
        ({"role": "user", "content": "q"}, None, "the conversation is an object, not a list"),
        (7, None, "the conversation is a number, not a list of messages"),
        ([{"role": "system", "content": "s"}], None, "the conversation has no user message"),
    ],
)  # fmt: skip
def test_every_bad_conversation_names_the_message_and_the_cause(value, message, text):
    with pytest.raises(ConversationError) as caught:
        parse_conversation(value)
    assert caught.value.message == message and caught.value.text.startswith(text)


def test_per_turn_references_in_mt_bench_and_fastchat_answer_shapes():
    assert parse_turn_references(["Area is 3", "5pi"], 2) == ["Area is 3", "5pi"]
    answer = json.loads((FIXTURES / "reference_answer_gpt-4.jsonl").read_text().splitlines()[2])
    assert parse_turn_references(answer["choices"], 2) == ["12000", "2000"]  # numbers as text
    assert parse_turn_references(None, 2) == [] and parse_turn_references("", 2) == []
    with pytest.raises(ConversationError, match="has 3 entries for 2 user turns"):
        parse_turn_references(["a", "b", "c"], 2)


# ---- MT-Bench's own file, as a user loads it -----------------------------------------------
def test_mt_bench_questions_import_with_the_suggested_mapping(task):
    data = QUESTIONS.read_bytes()
    suggested = Mapping.suggest(
        ["question_id", "category", "turns", "reference"],
        rows=[json.loads(line) for line in data.splitlines()],
    )
    assert suggested == Mapping(
        "question_id", ["category", "turns"], "reference", None, [], conversation_column="turns"
    )
    dataset = import_dataset(task, "mt-bench", data, suggested, file_name="question.jsonl")
    assert dataset.row_count == 4 and dataset.conversation_column == "turns"
    writing, translate, race, triangle = dataset.items.order_by("position")
    assert (writing.key, writing.turn_references, writing.reference) == ("81", [], "")
    assert writing.user_turns() == [
        "Compose an engaging travel blog post about a recent trip to Hawaii, highlighting "
        "cultural experiences and must-see attractions.",
        "Rewrite your previous response. Start every sentence with the letter A.",
    ]
    assert "衣带渐宽终不悔" in translate.user_turns()[0]
    assert race.turn_references == ["You are in second place.", "Uncertain."]
    assert triangle.messages() == [
        {"role": "user", "content": "The vertices of a triangle are at points (0, 0), (-1, 1), "
                                    "and (3, 3). What is the area of the triangle?"},
        {"role": "user", "content": "What's area of the circle circumscribing the triangle?"},
    ]  # fmt: skip
    assert triangle.fields["turns"] == triangle.user_turns()  # the file's value is kept too


def test_mt_bench_through_the_command_line(task, capsys):
    call_command("import_dataset", str(QUESTIONS), "--task", task.slug)
    dataset = Dataset.objects.get()
    assert (dataset.name, dataset.id_column, dataset.conversation_column) == (
        "question",
        "question_id",
        "turns",
    )
    assert "conversation turns." in capsys.readouterr().out
    assert dataset.items.get(key="111").turn_references == ["Area is 3", "5pi"]


def test_fastchat_reference_answers_joined_to_the_questions_are_per_turn_references(task):
    """A file that carries FastChat's answer `choices` beside the turns (as joined by
    question_id from reference_answer/gpt-4.jsonl) reads the first choice's turns."""
    answers = {
        row["question_id"]: row["choices"]
        for row in map(json.loads, (FIXTURES / "reference_answer_gpt-4.jsonl").open())
    }
    rows = [json.loads(line) for line in QUESTIONS.open()]
    joined = [{**row, "gpt4": answers[row["question_id"]]} for row in rows if row["question_id"]
              in answers]  # fmt: skip
    mapping = Mapping("question_id", ["turns"], "gpt4", conversation_column="turns")
    dataset = import_dataset(task, "mt-ref", jsonl(*joined), mapping, file_name="joined.jsonl")
    assert dataset.items.get(key="111").turn_references == ["Площадь равна 3.", "5pi"]


# ---- every format the readers allow --------------------------------------------------------
def test_conversations_arrive_from_csv_json_excel_and_parquet(task):
    chat = json.dumps(TOOL_CHAT, ensure_ascii=False)
    sharegpt = json.dumps([{"from": "human", "value": "Q?"}, {"from": "gpt", "value": "A."}])
    files = {
        "c.csv": csv_bytes(["id", "messages"], [["a", chat], ["b", sharegpt]]),
        "c.json": json.dumps(
            [{"id": "a", "messages": TOOL_CHAT}, {"id": "b", "messages": json.loads(sharegpt)}]
        ).encode(),
        "c.xlsx": xlsx_bytes({"chats": [["id", "messages"], ["a", chat], ["b", sharegpt]]}),
        "c.parquet": parquet_bytes({"id": ["a", "b"], "messages": pyarrow.array([chat, sharegpt])}),
    }
    for number, (name, data) in enumerate(files.items()):
        dataset = import_dataset(
            task, f"chat-{number}", data, Mapping("id", conversation_column="messages"),
            file_name=name,
        )  # fmt: skip
        first, second = dataset.items.order_by("position")
        assert first.messages() == parse_conversation(TOOL_CHAT), name
        assert [m["role"] for m in second.messages()] == ["user", "assistant"], name


def test_a_parquet_list_of_structs_is_read_as_messages(task):
    messages = pyarrow.array(
        [[{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A."}]]
    )
    data = parquet_bytes({"id": ["a"], "messages": messages})
    suggested = suggest_mapping(task, "p", ["id", "messages"], [{"messages": None}])
    assert suggested.conversation_column is None  # nothing to recognise in an empty value
    dataset = import_dataset(task, "p", data, Mapping("id", conversation_column="messages"),
                             file_name="p.parquet")  # fmt: skip
    assert dataset.items.get().conversation_text() == "User: Q?\n\nAssistant: A."


# ---- the hold-out of bad files: refused with row and message, nothing stored ---------------
GOOD = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
BAD_FILES = [
    ("wrong role", "jsonl", jsonl({"id": 1, "messages": GOOD},
                                  {"id": 2, "messages": [*GOOD, {"role": "bot", "content": "x"}]}),
     "Line 2, message 3: role 'bot' is not one of system, user, assistant, tool "
     "(column 'messages')."),
    ("missing content", "json", json.dumps([{"id": 1, "messages": GOOD},
                                             {"id": 2, "messages": [{"role": "user"}]}]).encode(),
     "Item 2, message 1: the user message has no content (column 'messages')."),
    ("tool result with no call", "csv",
     csv_bytes(["id", "messages"], [["1", json.dumps(GOOD)], ["2", json.dumps(GOOD)],
                                    ["3", json.dumps([*GOOD, {"role": "tool", "tool_call_id": "c9",
                                                              "content": "42"}])]]),
     "Row 4, message 3: a tool result for call 'c9', which no earlier assistant message made "
     "(column 'messages')."),
    ("empty turn", "jsonl", jsonl({"id": 1, "turns": ["a", "b"]}, {"id": 2, "turns": ["a", " "]}),
     "Line 2, message 2: the turn is empty (column 'turns')."),
    ("empty turns", "jsonl", jsonl({"id": 1, "turns": ["a"]}, {"id": 2, "turns": []}),
     "Line 2: the conversation is empty (column 'turns')."),
    ("not a list", "jsonl", jsonl({"id": 1, "turns": ["a"]}, {"id": 2, "turns": "just text"}),
     "Line 2: the conversation is a text, not a JSON list of messages (column 'turns')."),
    ("a number", "json", json.dumps([{"id": 1, "turns": ["a"]}, {"id": 2, "turns": 5}]).encode(),
     "Item 2: the conversation is a number, not a list of messages (column 'turns')."),
    ("broken JSON in a cell", "csv", csv_bytes(["id", "messages"], [["1", '[{"role": "user"']]),
     "Row 2: the conversation is not valid JSON"),
    ("sharegpt speaker", "jsonl",
     jsonl({"id": 1, "conversations": [{"from": "human", "value": "q"},
                                       {"from": "assistant_bot", "value": "a"}]}),
     "Line 1, message 2: 'from' 'assistant_bot' is not one of human, gpt, system "
     "(column 'conversations')."),
    ("only a system message", "jsonl",
     jsonl({"id": 1, "messages": [{"role": "system", "content": "s"}]}),
     "Line 1: the conversation has no user message (column 'messages')."),
    ("references for the wrong number of turns", "jsonl",
     jsonl({"id": 1, "turns": ["a", "b"], "reference": ["x", "y"]},
           {"id": 2, "turns": ["a", "b"], "reference": ["x"]}),
     "Line 2: the per-turn reference has 1 entry for 2 user turns (column 'reference')."),
    ("excel: an assistant with nothing", "xlsx",
     xlsx_bytes({"S": [["id", "messages"], ["1", json.dumps(GOOD)],
                       ["2", json.dumps([GOOD[0], {"role": "assistant", "content": ""}])]]}),
     "Row 3 of sheet 'S', message 2: the assistant message is empty (column 'messages')."),
    ("parquet: a tool call without a name", "parquet",
     parquet_bytes({"id": ["1"], "messages": [json.dumps(
         [GOOD[0], {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}])]}),
     "Row 1, message 2: tool call 1 has no function name (column 'messages')."),
]  # fmt: skip


@pytest.mark.parametrize("case, fmt, data, expected", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_the_hold_out_of_bad_conversation_files_is_refused_whole(task, case, fmt, data, expected):
    names = ("messages", "turns", "conversations")
    # Workbooks and Parquet files are compressed: their bad cases all use "messages".
    column = next((c for c in names if c.encode() in data), "messages")
    reference = "reference" if b'"reference"' in data else None
    mapping = Mapping("id", reference_column=reference, conversation_column=column)
    with pytest.raises(DatasetError) as caught:
        import_dataset(task, "bad", data, mapping, fmt=fmt, file_name=f"bad.{fmt}")
    assert str(caught.value).startswith(expected)
    assert_nothing_stored()


def test_a_bad_conversation_is_refused_on_the_page_and_the_command_line(
    reviewer_client, task, tmp_path
):
    case = BAD_FILES[0]
    url = reverse("datasets:dataset-upload", args=[task.slug])
    response = reviewer_client.post(url, {"file": SimpleUploadedFile("bad.jsonl", case[2])})
    mapping_url = response["Location"]
    form = reviewer_client.get(mapping_url).context["form"]
    assert form.initial["conversation_column"] == "messages"  # the first row reads as one
    page = reviewer_client.post(
        mapping_url, {"name": "bad", "format": "jsonl", "id_column": "id",
                      "conversation_column": "messages"})  # fmt: skip
    assert page.status_code == 200
    assert "Line 2, message 3: role &#x27;bot&#x27; is not one of system" in page.content.decode()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(case[2])
    with pytest.raises(CommandError, match=r"Line 2, message 3: role 'bot' is not one of"):
        call_command("import_dataset", str(path), "--task", task.slug,
                     "--conversation-column", "messages")  # fmt: skip
    assert_nothing_stored()


# ---- pages and exports -------------------------------------------------------------------
def test_the_item_page_shows_the_dialogue_and_exports_write_the_canonical_shape(
    reviewer_client, task
):
    sharegpt = [{"from": "human", "value": "<b>Q</b>?"}, {"from": "gpt", "value": "A."}]
    data = jsonl({"id": "s", "chat": sharegpt}, {"id": "t", "chat": TOOL_CHAT})
    dataset = import_dataset(task, "chats", data, Mapping("id", conversation_column="chat"),
                             file_name="chats.jsonl")  # fmt: skip
    page = reviewer_client.get(reverse("datasets:item-detail", args=[dataset.pk, 1]))
    html = page.content.decode()
    # The review pages' bubbles (one rendering of a dialogue), tool traffic folded.
    assert 'id="conversation"' in html and html.count('<li class="chat-row') == 5
    assert 'data-role="tool"' in html and "Tool result of <code>call_1</code>" in html
    assert "Calls <code>weather</code>" in html
    # Drawn once: the column's field below is its stored JSON, folded, not another rendering.
    assert "chat-message" not in html and 'class="stored-conversation"' in html
    assert "&quot;tool_call_id&quot;: &quot;call_1&quot;" in html
    first = reviewer_client.get(reverse("datasets:item-detail", args=[dataset.pk, 0]))
    assert "&lt;b&gt;Q&lt;/b&gt;?" in first.content.decode()  # escaped, as every field
    listing = reviewer_client.get(dataset.get_absolute_url()).content.decode()
    assert "User: &lt;b&gt;Q&lt;/b&gt;?" in listing  # the table cell reads as the dialogue
    exported = reviewer_client.get(reverse("datasets:dataset-download", args=[dataset.pk, "jsonl"]))
    lines = [json.loads(line) for line in b"".join(exported.streaming_content).splitlines()]
    assert lines[0]["chat"] == [{"role": "user", "content": "<b>Q</b>?"},
                                {"role": "assistant", "content": "A."}]  # fmt: skip
    as_csv = reviewer_client.get(reverse("datasets:dataset-download", args=[dataset.pk, "csv"]))
    rows = list(csv.DictReader(io.StringIO(b"".join(as_csv.streaming_content).decode())))
    assert json.loads(rows[1]["chat"]) == parse_conversation(TOOL_CHAT)
