"""Dialogues as judges read them: a transcript (canonical chat messages, the model's answers in
place) cut into turns, and written as MT-Bench writes a conversation in its judge prompts.
Pure Python, no Django.

A turn is one user message and what the assistant said until the next user message; its
`answer` is the last assistant text in it (the final answer after any tool calls). Turns are
numbered from 1, as MT-Bench and people count them: `turns[1].answer` in a template is the
answer to the first question.

MT-Bench's single-answer multi-turn prompts (FastChat, fastchat/llm_judge/data/
judge_prompts.jsonl) write a conversation as

    <|The Start of Assistant A's Conversation with User|>

    ### User:
    {question_1}

    ### Assistant A:
    {answer_1}

    ...

    <|The End of Assistant A's Conversation with User|>

and the reference answers the same way between "<|The Start of Reference Answer|>" and
"<|The End of Reference Answer|>", each answer under "### Reference answer:". `rendered` and
`reference_rendered` write exactly that, so MT-Bench's prompt is `{{ conversation }}` and its
math prompt `{{ reference_conversation }}` + two blank lines + `{{ conversation }}`. A system
message, tool calls and tool results (which MT-Bench has none of) are written in the same
"### Role:" blocks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]


class DialogueError(ValueError):
    """A transcript that cannot be judged turn by turn (the text says which turn and why)."""


@dataclass(frozen=True)
class Turn:
    """One turn for a template: `{{ turn.number }}`, `{{ turn.question }}`, `{{ turn.answer }}`,
    `{{ turn.reference }}` (the turn's reference answer, "" without one)."""

    number: int
    question: str
    answer: str
    reference: str = ""
    # Pairwise prompts: each side's answer to this turn.
    answer_a: str = ""
    answer_b: str = ""

    def __str__(self) -> str:
        return self.answer


class Turns(Sequence[Turn]):
    """The turns, numbered from 1 as people count them: `turns[1]` is the first turn; iterating
    gives them in order; `turns|length` is how many."""

    __slots__ = ("_turns",)

    def __init__(self, turns: Sequence[Turn]) -> None:
        self._turns = list(turns)

    def __getitem__(self, number: Any) -> Any:
        if isinstance(number, slice):
            raise TypeError("turns are read one at a time: turns[1], turns[2]…")
        if isinstance(number, str) and number.isdigit():
            number = int(number)
        if not isinstance(number, int) or not 1 <= number <= len(self._turns):
            count = len(self._turns)
            raise IndexError(
                f"there is no turn {number!r}: turns are numbered 1 to {count}"
                if count
                else "this item has no turns"
            )
        return self._turns[number - 1]

    def __iter__(self) -> Iterator[Turn]:
        return iter(self._turns)

    def __len__(self) -> int:
        return len(self._turns)

    def __str__(self) -> str:
        return "\n\n".join(f"Turn {turn.number}: {turn.answer}" for turn in self._turns)


@dataclass(frozen=True)
class Dialogue:
    """A transcript and its turns (`turns[0]` is turn 1 here; templates see `Turns`)."""

    messages: list[Message]
    turns: list[Turn] = field(default_factory=list)

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]], references: Sequence[str] = ()) -> Dialogue:
        """The dialogue of a transcript; `references` are per-turn reference answers (MT-Bench's
        `reference`), [] when there are none."""
        copied: list[Message] = [dict(message) for message in messages]
        turns: list[Turn] = []
        for start, end in _spans(copied):
            number = len(turns) + 1
            answers = [
                str(m.get("content") or "")
                for m in copied[start + 1 : end]
                if m.get("role") == "assistant" and str(m.get("content") or "").strip()
            ]
            reference = references[number - 1] if number <= len(references) else ""
            turns.append(
                Turn(
                    number,
                    str(copied[start].get("content") or ""),
                    answers[-1] if answers else "",
                    str(reference or ""),
                )
            )
        return cls(copied, turns)

    @classmethod
    def single(cls, question: str, answer: str, reference: str = "") -> Dialogue:
        """An item that is not a conversation: one question, one answer."""
        return cls.of(
            [{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
            [reference],
        )

    def unanswered(self) -> list[int]:
        """The numbers of the turns without an answer."""
        return [turn.number for turn in self.turns if not turn.answer.strip()]

    def upto(self, number: int) -> Dialogue:
        """The dialogue until the end of turn `number` (what a judge of that turn sees)."""
        spans = list(_spans(self.messages))
        if not 1 <= number <= len(spans):
            raise DialogueError(f"The dialogue has no turn {number} (it has {len(spans)}).")
        end = spans[number - 1][1]
        return Dialogue(self.messages[:end], self.turns[:number])

    @property
    def has_references(self) -> bool:
        return any(turn.reference.strip() for turn in self.turns)

    def rendered(self, assistant: str = "Assistant A") -> str:
        """The conversation as MT-Bench's multi-turn prompts write it, markers included."""
        blocks = [_block(message, assistant) for message in self.messages]
        return (
            f"<|The Start of {assistant}'s Conversation with User|>\n\n"
            + "\n\n".join(blocks)
            + f"\n\n<|The End of {assistant}'s Conversation with User|>"
        )

    def reference_rendered(self) -> str:
        """The reference answers as MT-Bench's multi-turn math prompts write them ("" when the
        item has none)."""
        if not self.has_references:
            return ""
        blocks = []
        for turn in self.turns:
            blocks.append(f"### User:\n{turn.question}")
            blocks.append(f"### Reference answer:\n{turn.reference}")
        return (
            "<|The Start of Reference Answer|>\n\n"
            + "\n\n".join(blocks)
            + "\n\n<|The End of Reference Answer|>"
        )


def _spans(messages: list[Message]) -> Iterator[tuple[int, int]]:
    """(index of each user message, index where its turn ends)."""
    starts = [i for i, message in enumerate(messages) if message.get("role") == "user"]
    for n, start in enumerate(starts):
        yield start, starts[n + 1] if n + 1 < len(starts) else len(messages)


def _block(message: Mapping[str, Any], assistant: str) -> str:
    role = str(message.get("role") or "")
    content = str(message.get("content") or "")
    if role == "user":
        return f"### User:\n{content}"
    if role == "system":
        return f"### System:\n{content}"
    if role == "tool":
        return f"### Tool result [{message.get('tool_call_id', '')}]:\n{content}"
    lines = [content] if content else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        lines.append(
            f"(calls {function.get('name', '')}({function.get('arguments', '')}) "
            f"[{call.get('id', '')}])"
        )
    return f"### {assistant}:\n" + "\n".join(lines)


def transcript_with_answer(conversation: Sequence[Mapping[str, Any]], answer: str) -> list[Message]:
    """An item's conversation with one answer after it: what a single-turn generation run
    answered to the whole conversation (the answer to its last turn)."""
    return [*(dict(message) for message in conversation), {"role": "assistant", "content": answer}]


def paired(a: Dialogue, b: Dialogue) -> Turns:
    """The turns of two answers to the same conversation: each turn's question and reference,
    with `answer_a` and `answer_b`."""
    return Turns(
        [
            Turn(
                turn.number,
                turn.question,
                turn.answer,
                turn.reference,
                answer_a=turn.answer,
                answer_b=b.turns[turn.number - 1].answer if turn.number <= len(b.turns) else "",
            )
            for turn in a.turns
        ]
    )
