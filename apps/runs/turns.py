"""Multi-turn dialogues: what each turn of a conversation item asks, the messages it is asked
with, and the transcript a response stands for.

A multi-turn run asks each user message of the item's conversation in order, with the model's
own earlier answers in place of whatever the file recorded after each user message (assistant
replies, tool calls and their results): the model converses with itself, as in MT-Bench.
Messages before the first user message (a system prompt, an opening assistant line) and system
messages between turns stay where they are.
"""

from typing import Any

from apps.datasets.conversations import Message


def user_turns(conversation: list[Message]) -> list[str]:
    """The text of each user message, in order: what turn 1, 2, … asks."""
    return [str(m.get("content", "")) for m in conversation if m.get("role") == "user"]


def dialogue(
    conversation: list[Message], answers: list[str], *, upto: int | None = None
) -> list[Message]:
    """The conversation with `answers[k]` as the assistant's reply to user message k + 1.

    `upto` n: the messages turn n is asked with (ending at user message n, the answers to the
    turns before it in place). Without it: the transcript, ending with the last answer ([]
    when no turn was answered).
    """
    out: list[Message] = []
    turn = 0
    for message in conversation:
        role = message.get("role")
        if role == "user":
            if upto is not None and turn >= upto:
                break
            if upto is None and turn >= len(answers):
                break
            turn += 1
            out.append(dict(message))
            if upto is not None and turn == upto:
                break
            out.append({"role": "assistant", "content": answers[turn - 1]})
        elif turn == 0 or role == "system":
            out.append(dict(message))
        # Recorded assistant replies and tool traffic after a user message: the model's own
        # answer stands in their place.
    if upto is None:
        # A system message meant for the next turn, which was not answered, is not part of it.
        while out and (turn == 0 or out[-1].get("role") != "assistant"):
            out.pop()
    return out


def turn_failure(number: int, turns: int, error: str) -> str:
    """A multi-turn response's error: the turn that failed named, then why."""
    return f"Turn {number} of {turns}: {error}"


def turn_totals(turns: list[Any]) -> dict[str, Any]:
    """What a multi-turn Response sums over its turns: tokens, cost, latency, attempts."""
    return {
        "prompt_tokens": sum(t.prompt_tokens for t in turns),
        "completion_tokens": sum(t.completion_tokens for t in turns),
        "cost": sum(t.cost for t in turns),
        "latency_ms": sum(t.latency_ms for t in turns),
        "attempts": sum(t.attempts for t in turns),
    }
