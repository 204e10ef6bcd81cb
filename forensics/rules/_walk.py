"""Walks over a session's turns that several rules share (kept in ``forensics.analysis``)."""

from __future__ import annotations

from forensics.analysis import STOP_EVENTS, user_stopped
from forensics.model import Session, Turn

__all__ = ["STOP_EVENTS", "rest_of_exchange", "user_stopped"]


def rest_of_exchange(session: Session, ordinal: int) -> list[Turn]:
    """Turns after ``ordinal`` up to (not including) the next message the user typed."""
    from forensics.analysis import analysis_of

    return analysis_of(session).rest_of_exchange(ordinal)
