"""Small walks over a session's turns that several rules share."""

from __future__ import annotations

from collections.abc import Iterator

from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, Turn, UserTurn

STOP_EVENTS = frozenset({"abort", "interrupt"})


def after(session: Session, ordinal: int) -> Iterator[Turn]:
    """Turns after ``ordinal``, in order."""
    return iter(session.turns[ordinal:])


def rest_of_exchange(session: Session, ordinal: int) -> list[Turn]:
    """Turns after ``ordinal`` up to (not including) the next message the user typed."""
    out: list[Turn] = []
    for turn in session.turns[ordinal:]:
        if isinstance(turn, UserTurn):
            break
        out.append(turn)
    return out


def next_user(session: Session, ordinal: int) -> UserTurn | None:
    for turn in session.turns[ordinal:]:
        if isinstance(turn, UserTurn):
            return turn
    return None


def user_stopped(turns: list[Turn]) -> bool:
    """Did the user abort or interrupt within these turns."""
    return any(isinstance(t, EventTurn) and t.event in STOP_EVENTS for t in turns) or any(
        isinstance(t, ToolResultTurn) and t.aborted for t in turns
    ) or any(isinstance(t, AssistantTurn) and t.aborted for t in turns)


def is_failed_reply(turn: Turn) -> bool:
    """An assistant reply that failed in a way the user saw: provider error or abort."""
    return isinstance(turn, AssistantTurn) and (turn.error is not None or turn.aborted)
