"""Conversations: a column of chat messages, read from the shapes datasets come in and kept in
one canonical shape, and the one way they read as text.

A cell may hold (a list, or the JSON text of one, as CSV, Excel and Parquet cells do):
- OpenAI chat messages: [{"role": "system" | "user" | "assistant" | "tool", "content": …}],
  with an assistant's `tool_calls` and each tool result's `tool_call_id` kept;
- MT-Bench's `turns`: a list of texts, each a user message;
- ShareGPT's `conversations`: [{"from": "human" | "gpt" | "system", "value": …}].

The canonical shape (`Item.conversation`) is a list of OpenAI messages: {"role", "content"}
plus "tool_calls" (assistant), "tool_call_id" (tool) and "name" where the file gave them;
content is always text ("" only for an assistant message that only calls tools).

Plain Python, no Django: prompt building and judges import it without settings.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from apps.datasets.values import as_text

Message = dict[str, Any]

ROLES = ("system", "user", "assistant", "tool")
# ShareGPT's speakers (its variants: FastChat, Vicuna, OpenChat exports) and their roles.
SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "assistant": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
}
SHAREGPT_LISTED = "human, gpt, system"
CONVERSATION_NAMES = ("messages", "conversation", "conversations", "turns", "dialogue", "dialog")


class ConversationError(ValueError):
    """A conversation that cannot be read: `message` is the 1-based message at fault (None
    when the conversation as a whole is wrong); the text says what is wrong with it."""

    def __init__(self, text: str, message: int | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.message = message


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a text"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _decoded(value: Any, what: str) -> Any:
    """A cell's value: a JSON text (CSV, Excel, Parquet) decoded, anything else as it is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    if text[0] not in "[{":
        raise ConversationError(f"{what} is a text, not a JSON list of messages")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConversationError(
            f"{what} is not valid JSON ({exc.msg} at character {exc.pos + 1})"
        ) from None


def parse_conversation(value: Any) -> list[Message]:
    """The canonical messages of one cell, or ConversationError naming the message at fault."""
    value = _decoded(value, "the conversation")
    if value is None or value == []:
        raise ConversationError("the conversation is empty")
    if not isinstance(value, list):
        raise ConversationError(f"the conversation is {_kind(value)}, not a list of messages")
    first = value[0]
    if isinstance(first, str):
        messages = [_turn(turn, index) for index, turn in enumerate(value, 1)]
    elif isinstance(first, dict) and "role" not in first and "from" in first:
        messages = [_sharegpt(message, index) for index, message in enumerate(value, 1)]
    else:
        messages = _openai(value)
    if not any(message["role"] == "user" for message in messages):
        raise ConversationError("the conversation has no user message")
    return messages


def _turn(turn: Any, index: int) -> Message:
    """One of MT-Bench's `turns`: a user message's text."""
    if not isinstance(turn, str):
        raise ConversationError(
            f"is {_kind(turn)}, but the first message is a text (a list of turns holds texts)",
            index,
        )
    if not turn.strip():
        raise ConversationError("the turn is empty", index)
    return {"role": "user", "content": turn}


def _sharegpt(message: Any, index: int) -> Message:
    if not isinstance(message, dict):
        raise ConversationError(f"is {_kind(message)}, not a message object", index)
    if "from" not in message:
        raise ConversationError("has no 'from' (ShareGPT messages have 'from' and 'value')", index)
    speaker = message["from"]
    role = SHAREGPT_ROLES.get(speaker.strip().lower()) if isinstance(speaker, str) else None
    if role is None:
        raise ConversationError(f"'from' {speaker!r} is not one of {SHAREGPT_LISTED}", index)
    if "value" not in message or message["value"] is None:
        raise ConversationError("has no 'value' (the message's text)", index)
    content = message["value"]
    if not isinstance(content, str):
        raise ConversationError(f"'value' is {_kind(content)}, not a text", index)
    if not content.strip():
        raise ConversationError(f"the {role} message is empty", index)
    return {"role": role, "content": content}


def _openai(messages: list[Any]) -> list[Message]:
    out: list[Message] = []
    calls: dict[str, bool] = {}  # each tool call made so far: answered yet?
    for index, message in enumerate(messages, 1):
        if not isinstance(message, dict):
            raise ConversationError(f"is {_kind(message)}, not a message object", index)
        if "role" not in message:
            raise ConversationError(
                "has no 'role' (chat messages have 'role' and 'content')", index
            )
        role = message["role"]
        if role not in ROLES:
            raise ConversationError(f"role {role!r} is not one of {', '.join(ROLES)}", index)
        canonical: Message = {"role": role, "content": _content(message, role, index)}
        if "name" in message and message["name"] is not None:
            if not isinstance(message["name"], str):
                raise ConversationError(f"'name' is {_kind(message['name'])}, not a text", index)
            canonical["name"] = message["name"]
        if message.get("tool_calls"):
            if role != "assistant":
                raise ConversationError(f"a {role} message has tool_calls", index)
            canonical["tool_calls"] = _tool_calls(message["tool_calls"], index)
            for call in canonical["tool_calls"]:
                if call["id"] in calls:
                    raise ConversationError(f"tool call id {call['id']!r} is used twice", index)
                calls[call["id"]] = False
        elif role == "assistant" and not canonical["content"].strip():
            raise ConversationError("the assistant message is empty", index)
        if role == "tool":
            canonical["tool_call_id"] = _answered_call(message, calls, index)
        out.append(canonical)
    return out


def _content(message: Message, role: str, index: int) -> str:
    content = message.get("content")
    if content is None:
        if role == "assistant" and message.get("tool_calls"):
            return ""
        raise ConversationError(f"the {role} message has no content", index)
    if isinstance(content, list):  # OpenAI's content parts: the text ones are kept
        texts = []
        for number, part in enumerate(content, 1):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text" or not isinstance(part.get("text"), str):
                shown = repr(kind) if isinstance(kind, str) else _kind(part)
                raise ConversationError(
                    f"content part {number} is {shown}: only text parts can be kept", index
                )
            texts.append(part["text"])
        content = "\n".join(texts)
    if not isinstance(content, str):
        raise ConversationError(f"the content is {_kind(content)}, not a text", index)
    if role in ("system", "user") and not content.strip():
        raise ConversationError(f"the {role} message is empty", index)
    return content


def _tool_calls(value: Any, index: int) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ConversationError(f"tool_calls is {_kind(value)}, not a list", index)
    calls = []
    for number, call in enumerate(value, 1):
        where = f"tool call {number}"
        if not isinstance(call, dict):
            raise ConversationError(f"{where} is {_kind(call)}, not an object", index)
        call_id, function = call.get("id"), call.get("function")
        if not isinstance(call_id, str) or not call_id.strip():
            raise ConversationError(f"{where} has no id", index)
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ConversationError(f"{where} has no function name", index)
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):  # some exports keep the arguments decoded
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    return calls


def _answered_call(message: Message, calls: dict[str, bool], index: int) -> str:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id.strip():
        raise ConversationError("a tool result has no tool_call_id", index)
    if call_id not in calls:
        raise ConversationError(
            f"a tool result for call {call_id!r}, which no earlier assistant message made", index
        )
    if calls[call_id]:
        raise ConversationError(f"call {call_id!r} already has a result", index)
    calls[call_id] = True
    return call_id


def looks_like_conversation(values: list[Any]) -> bool:
    """Whether a column's first values hold conversations (for the suggested mapping): one that
    reads is enough, so that the import then names any bad one by its row and message."""
    for value in values:
        if value in (None, ""):
            continue
        try:
            parse_conversation(value)
        except ConversationError:
            continue
        return True
    return False


def parse_turn_references(value: Any, user_turns: int) -> list[str]:
    """Per-turn reference answers, one per user turn: MT-Bench's `reference` (a list of texts)
    or FastChat's answer files' `choices` ([{"index": 0, "turns": [...]}]: the first choice).
    Nothing there: []. Numbers become text; "" is a turn without a reference."""
    value = _decoded(value, "the per-turn reference")
    if value is None or value == []:
        return []
    if (
        isinstance(value, list)
        and isinstance(value[0], dict)
        and isinstance(value[0].get("turns"), list)
    ):
        value = value[0]["turns"]
    if not isinstance(value, list):
        raise ConversationError(f"the per-turn reference is {_kind(value)}, not a list")
    for number, entry in enumerate(value, 1):
        if isinstance(entry, list | dict):
            raise ConversationError(
                f"reference {number} is {_kind(entry)}, not a text (one reference per turn)"
            )
    if len(value) != user_turns:
        raise ConversationError(
            f"the per-turn reference has {len(value)} entr{'y' if len(value) == 1 else 'ies'} "
            f"for {user_turns} user turn{'' if user_turns == 1 else 's'}"
        )
    return [as_text(entry) for entry in value]


def conversation_text(messages: list[Message]) -> str:
    """A conversation as text, the one way pages and prompts write it: "Role: content" per
    message, a blank line between, tool calls and results named."""
    blocks = []
    for message in messages:
        role = str(message.get("role", ""))
        label = role.capitalize()
        if role == "tool":
            label += f" [{message.get('tool_call_id', '')}]"
        elif message.get("name"):
            label += f" ({message['name']})"
        lines = [f"{label}: {message.get('content', '')}".rstrip()]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            lines.append(
                f"{label} calls {function.get('name', '')}({function.get('arguments', '')}) "
                f"[{call.get('id', '')}]"
            )
        if role == "assistant" and not message.get("content") and len(lines) > 1:
            lines = lines[1:]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# ---- the one rendering on pages ---------------------------------------------------------
@dataclass
class Bubble:
    """One message of a dialogue as every page shows it (templates/_dialogue.html): the
    dataset's item page, review, the A/B queue."""

    role: str  # system, user, assistant, tool
    content: Any = ""
    turn: int = 0  # the user turn it belongs to (1-based); 0 before the first user message
    answer: bool = False  # the model's own answer under review (not a line of the file)
    failed: str = ""  # a failed turn: why
    not_asked: bool = False  # a turn after a failed one
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""
    meta: str = ""  # tokens, latency, finish reason of an answer
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # per-turn judge rounds
    reference: str | None = None  # a user turn's reference answer (MT-Bench's), if any


def bubble(message: Message, turn: int) -> Bubble:
    """A message of a conversation, as a bubble of the user turn `turn`."""
    return Bubble(
        role=str(message.get("role", "")),
        content=message.get("content") or "",
        turn=turn,
        tool_calls=[_call(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)],
        tool_call_id=str(message.get("tool_call_id") or ""),
        name=str(message.get("name") or ""),
    )


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "id": str(call.get("id") or ""),
        "name": str(function.get("name") or ""),
        "arguments": function.get("arguments") or "",
    }


def bubbles(messages: list[Message], references: list[str] | None = None) -> list[Bubble]:
    """A conversation as it stands in a file: each message a bubble, each user message with
    its turn's reference answer when there are references."""
    out, turn = [], 0
    for message in messages:
        if message.get("role") == "user":
            turn += 1
        found = bubble(message, turn)
        if references is not None and found.role == "user":
            found.reference = references[turn - 1] if turn <= len(references) else ""
        out.append(found)
    return out
