"""Small walks over a session's turns that several rules share."""

from __future__ import annotations

from forensics.model import AssistantTurn, EventTurn, Session, Turn, UserTurn

STOP_EVENTS = frozenset({"abort", "interrupt"})
"""Events that mean the user stopped the assistant: what came after was not its choice."""


def rest_of_exchange(session: Session, ordinal: int) -> list[Turn]:
    """Turns after ``ordinal`` up to (not including) the next message the user typed."""
    out: list[Turn] = []
    for turn in session.turns[ordinal:]:
        if isinstance(turn, UserTurn):
            break
        out.append(turn)
    return out


def user_stopped(turns: list[Turn]) -> bool:
    """Did the user abort or interrupt within these turns."""
    return any(
        (isinstance(t, EventTurn) and t.event in STOP_EVENTS)
        or (isinstance(t, AssistantTurn) and t.aborted)
        for t in turns
    )
