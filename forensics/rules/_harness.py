"""What the three harness-event rules share: grouping one event's several records into one."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, Turn, UserTurn


def event_runs(session: Session, wanted: Callable[[Turn], bool]) -> Iterator[list[Turn]]:
    """Runs of wanted turns that belong to one event.

    Two records are one event when nothing the user typed and nothing the assistant showed came
    between them (Codex writes a ``compacted`` line and a ``context_compacted`` event for one
    compaction; a provider error is retried several times before it is shown).
    """
    run: list[Turn] = []
    for turn in session.turns:
        if wanted(turn):
            run.append(turn)
            continue
        if run and _breaks(turn):
            yield run
            run = []
    if run:
        yield run


def _breaks(turn: Turn) -> bool:
    if isinstance(turn, UserTurn | ToolResultTurn):
        return True
    if isinstance(turn, AssistantTurn):
        return turn.visible
    return isinstance(turn, EventTurn) and turn.event in ("turn_complete", "session_start")


def last_assistant_before(session: Session, ordinal: int) -> AssistantTurn | None:
    """The assistant message the event cut short or answered, if the exchange has one."""
    for prev in session.turns_before(ordinal):
        if isinstance(prev, UserTurn):
            return None
        if isinstance(prev, AssistantTurn):
            return prev
    return None

