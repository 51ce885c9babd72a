"""A response to a conversation item, as the review pages show it: the dialogue turn by turn.

Each message becomes a bubble with its role. The model's own answers are marked with their
turn, and a judge that scored turn by turn has its values and reasons beside the answer they
are about. Tool calls and tool results are folded (they are long and rarely what is judged).
A multi-turn run's failed turn shows its error in the answer's place; turns after it were not
asked and say so. Everything here is plain values; templates escape them.
"""

from typing import Any

from apps.datasets.conversations import Bubble, bubble
from apps.datasets.models import Item
from apps.runs.models import Response, Run, Turn


def _meta(row: Response | Turn) -> str:
    parts = [f"{row.prompt_tokens}+{row.completion_tokens} tokens", f"{row.latency_ms} ms"]
    if getattr(row, "finish_reason", ""):
        parts.append(f"finish: {row.finish_reason}")
    return " · ".join(parts)


def _multi_turn(item: Item, turns: list[Turn]) -> list[Bubble]:
    """The item's conversation asked turn by turn: each user message with the model's answer
    (or the turn's error) after it. What the file recorded after a user message (its assistant
    replies and tool traffic) was not sent: the model's own answer stands in its place."""
    by_number = {t.number: t for t in turns}
    bubbles: list[Bubble] = []
    turn = 0
    failed_before = False
    for message in item.messages():
        role = message.get("role")
        if role == "user":
            turn += 1
            bubbles.append(bubble(message, turn))
            row = by_number.get(turn)
            if failed_before or row is None:
                bubbles.append(Bubble(role="assistant", turn=turn, answer=True, not_asked=True))
            elif row.is_answered:
                bubbles.append(
                    Bubble(
                        role="assistant", content=row.text, turn=turn, answer=True, meta=_meta(row)
                    )
                )
            else:
                failed_before = True
                reason = row.get_error_kind_display() if row.error_kind else ""
                error = ": ".join(part for part in (reason, row.error) if part) or "failed"
                bubbles.append(Bubble(role="assistant", turn=turn, answer=True, failed=error))
        elif turn == 0 or role == "system":
            bubbles.append(bubble(message, turn))
    return bubbles


def _own_turns(turns: list[Turn]) -> list[Bubble]:
    """A run that wrote its own user turns (a memory script's statements, filler and
    question; a simulated user's lines): each turn's line, then the model's answer or why the
    turn failed."""
    bubbles: list[Bubble] = []
    for row in sorted(turns, key=lambda t: t.number):
        bubbles.append(Bubble(role="user", content=row.asked, turn=row.number))
        if row.is_answered:
            answer = Bubble(
                role="assistant", content=row.text, turn=row.number, answer=True, meta=_meta(row)
            )
        else:
            reason = row.get_error_kind_display() if row.error_kind else ""
            error = ": ".join(part for part in (reason, row.error) if part) or "failed"
            answer = Bubble(role="assistant", turn=row.number, answer=True, failed=error)
        bubbles.append(answer)
    return bubbles


def _single_turn(item: Item, response: Response) -> list[Bubble]:
    """A conversation item answered once: the file's dialogue, then the model's answer to it."""
    bubbles: list[Bubble] = []
    turn = 0
    for message in item.messages():
        if message.get("role") == "user":
            turn += 1
        bubbles.append(bubble(message, turn))
    if response.status == Response.Status.OK:
        answer = Bubble(
            role="assistant", content=response.text, turn=turn, answer=True, meta=_meta(response)
        )
    else:
        reason = response.get_error_kind_display() if response.error_kind else ""
        error = ": ".join(part for part in (reason, response.error) if part) or "failed"
        answer = Bubble(role="assistant", turn=turn, answer=True, failed=error)
    return [*bubbles, answer]


def dialogue_of(
    response: Response, verdicts: dict[int, list[dict[str, Any]]] | None = None
) -> list[Bubble]:
    """The bubbles of a response to a conversation item ([] for a plain item), each answer
    with the judge's rounds about its turn (`verdicts`, by turn number) beside it."""
    item = response.item
    run: Run = response.run
    if run.kind in (Run.Kind.SCRIPT, Run.Kind.SIMULATION):
        bubbles = _own_turns(response.turns())
    elif not item.is_conversation:
        return []
    elif run.multi_turn:
        bubbles = _multi_turn(item, response.turns())
    else:
        bubbles = _single_turn(item, response)
    for each in bubbles:
        if each.answer:
            each.verdicts = (verdicts or {}).get(each.turn, [])
    return bubbles
