"""The facts of a finding that the narrative needs, each behind one small function.

Today these read the finding's evidence ordinals and the turns (with ``_shell``'s launch, kill and
check knowledge, the same the rules use). When ``Finding`` carries typed evidence (the launch, the
kill, the port, the quoted words), each function here becomes a field lookup and nothing else in
the narrative changes: this module is the one place that knows how a finding's evidence is
stored.
"""

from __future__ import annotations

from forensics.findings import Incident
from forensics.model import (
    AssistantTurn,
    EventTurn,
    Session,
    ToolCall,
    ToolResultTurn,
    Turn,
    UserTurn,
)
from forensics.report._shell import checks, kills, launches, ports_in, result_failed
from forensics.report._turns import calls_of


def flagged(session: Session, incident: Incident) -> Turn:
    return session.turns[incident.turn - 1]


def evidence(session: Session, incident: Incident) -> list[Turn]:
    """The evidence turns the finding names, in order."""
    return [session.turns[o - 1] for o in incident.evidence_turns
            if 0 < o <= len(session.turns)]


def result_before(session: Session, incident: Incident) -> ToolResultTurn | None:
    """The tool result right before the flagged reply (what an empty reply answered)."""
    if incident.turn < 2:
        return None
    prev = session.turns[incident.turn - 2]
    return prev if isinstance(prev, ToolResultTurn) else None


def call_of(session: Session, result: ToolResultTurn) -> tuple[AssistantTurn, ToolCall] | None:
    return session.call_for(result)


def failed_calls(session: Session, incident: Incident) -> list[tuple[ToolCall, ToolResultTurn]]:
    """The failed calls of the flagged message (ignored-tool-error), with their results."""
    turn = flagged(session, incident)
    out: list[tuple[ToolCall, ToolResultTurn]] = []
    for call in calls_of(turn):
        result = session.result_for(call)
        if result is not None and result_failed(result):
            out.append((call, result))
    if not out and isinstance(turn, ToolResultTurn):
        pair = session.call_for(turn)
        if pair:
            out.append((pair[1], turn))
    return out


def relaunch(session: Session, incident: Incident) -> tuple[ToolCall, ToolResultTurn | None] | None:
    """The launch call the duplicate-launch finding flags, and its result."""
    for call in calls_of(flagged(session, incident)):
        if launches(call.command, call):
            return call, session.result_for(call)
    return None


def earlier_launch(session: Session, incident: Incident) -> Turn | None:
    """The earlier launch the relaunch duplicates (the first evidence turn that launches)."""
    for turn in evidence(session, incident):
        if turn.ordinal < incident.turn and any(launches(c.command, c) for c in calls_of(turn)):
            return turn
    return None


def launch_port(command: str | None) -> str | None:
    found = ports_in(command or "")
    return found[0][0] if found else None


def kills_between(session: Session, first: int, last: int) -> list[Turn]:
    return [t for t in session.turns[first:last - 1]
            if any(kills(c.command) for c in calls_of(t))]


def checks_between(session: Session, first: int, last: int) -> list[Turn]:
    return [t for t in session.turns[first:last - 1]
            if any(checks(c.command) for c in calls_of(t))]


def repeated_message(session: Session, incident: Incident) -> UserTurn | None:
    """The earlier user message a re-send repeats."""
    for turn in evidence(session, incident):
        if turn.ordinal < incident.turn and isinstance(turn, UserTurn):
            return turn
    return None


def replies_between(session: Session, incident: Incident) -> list[Turn]:
    """What answered the repeated message before the user sent it again."""
    earlier = repeated_message(session, incident)
    if earlier is None:
        return []
    named = [t for t in evidence(session, incident) if earlier.ordinal < t.ordinal < incident.turn
             and isinstance(t, (AssistantTurn, EventTurn, ToolResultTurn))]
    if named:
        return named
    return [t for t in session.turns[earlier.ordinal:incident.turn - 1]
            if isinstance(t, (AssistantTurn, EventTurn))]
