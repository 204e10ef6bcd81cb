"""The facts of a finding that the narrative needs, each behind one small function.

They read the finding's typed evidence (``Incident.facts``: the relaunch, the earlier launch,
the port) and the session's process ledger, which the scan built: the report never decides
again what was a launch, a kill or a check. This module is the one place that knows how a
finding's evidence is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from forensics.analysis.session import analysis_of
from forensics.findings import Evidence, Incident
from forensics.model import (
    AssistantTurn,
    EventTurn,
    Session,
    ToolCall,
    ToolResultTurn,
    Turn,
    UserTurn,
)
from forensics.report._shell import status_words
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


def silence_after(session: Session, incident: Incident) -> tuple[ToolResultTurn, Evidence] | None:
    """The tool result an empty reply answered, with its fact (kind ``failure`` when it
    failed, its status and telling lines), as the empty-response finding names it."""
    fact = _fact(incident, "result before the silence")
    result = _turn(session, fact.turn) if fact else None
    return (result, fact) if isinstance(result, ToolResultTurn) else None


def call_of(session: Session, result: ToolResultTurn) -> tuple[AssistantTurn, ToolCall] | None:
    return session.call_for(result)


def owner_of(session: Session, call: ToolCall) -> tuple[AssistantTurn, ToolCall] | None:
    """The assistant turn that holds ``call``."""
    result = session.result_for(call)
    return session.call_for(result) if result is not None else None


@dataclass(frozen=True)
class FailedCall:
    """A failed call a finding names (its ``failure`` fact): the call, its result, how it
    ended as the rule judged it (``exit 1``, ``killed``, ``failed``…) and the lines that show
    it."""

    call: ToolCall
    result: ToolResultTurn
    status: str
    lines: tuple[str, ...]


def failed_calls(session: Session, incident: Incident) -> list[FailedCall]:
    """The failed calls the finding's facts name, in order (ignored-tool-error's failure, the
    failed result an empty reply answered, a failed run a claim rests on)."""
    out: list[FailedCall] = []
    for fact in incident.facts:
        if fact.kind != "failure":
            continue
        result = _turn(session, fact.turn)
        pair = session.call_for(result) if isinstance(result, ToolResultTurn) else None
        call = pair[1] if pair is not None else None
        script = analysis_of(session).script
        if call is not None and fact.command and script(call) != fact.command:
            # the failure showed in another call's result (a launch's log read later): the
            # failed call is the one the finding flags
            call = next((c for c in calls_of(flagged(session, incident))
                         if script(c) == fact.command), call)
        if call is not None:
            out.append(FailedCall(call, result, fact.status or "failed",
                                  tuple(ln for ln in fact.quote.splitlines() if ln.strip())))
    return out


def failed_results(session: Session, incident: Incident) -> dict[int, str]:
    """The tool results the finding's facts call failed, by ordinal, each as a timeline line:
    the tool, how it ended (as the rule judged it) and the last line that shows it."""
    out: dict[int, str] = {}
    for fact in incident.facts:
        result = _turn(session, fact.turn) if fact.kind == "failure" else None
        if isinstance(result, ToolResultTurn):
            lines = [ln for ln in fact.quote.splitlines() if ln.strip()]
            out[fact.turn] = (f"{result.name or 'tool'} {status_words(fact.status or 'failed')}"
                              + (f": {lines[-1]}" if lines else ""))
    return out


def _fact(incident: Incident, role: str) -> Evidence | None:
    return next((f for f in incident.facts if f.role == role), None)


def _turn(session: Session, ordinal: int) -> Turn | None:
    return session.turns[ordinal - 1] if 0 < ordinal <= len(session.turns) else None


def relaunch(session: Session, incident: Incident) -> tuple[ToolCall, ToolResultTurn | None] | None:
    """The launch call the duplicate-launch finding flags (its ``relaunch`` fact), and its
    result."""
    fact = _fact(incident, "relaunch")
    turn = _turn(session, fact.turn) if fact else flagged(session, incident)
    calls = calls_of(turn) if turn is not None else []
    call = next((c for c in calls if fact and fact.command and c.command == fact.command), None)
    call = call or next((c for c in calls if c.anchor == incident.anchor), None)
    call = call or (calls[0] if calls else None)
    return (call, session.result_for(call)) if call is not None else None


def earlier_launch(session: Session, incident: Incident) -> Turn | None:
    """The earlier launch the relaunch duplicates (its ``earlier launch`` fact)."""
    fact = _fact(incident, "earlier launch")
    return _turn(session, fact.turn) if fact else None


def launch_port(session: Session, incident: Incident) -> str | None:
    """The port both launches compete for, as the finding's facts name it."""
    for fact in incident.facts:
        if fact.kind == "port" and fact.port:
            return str(fact.port)
    fact = _fact(incident, "relaunch") or _fact(incident, "earlier launch")
    return str(fact.port) if fact and fact.port else None


def kills_between(session: Session, first: int, last: int) -> list[Turn]:
    """The turns between ``first`` and ``last`` the ledger holds a kill for."""
    ledger = analysis_of(session).latest_ledger()
    ordinals = sorted({k.ordinal for k in ledger.kills if first < k.ordinal < last}
                      if ledger else ())
    return [t for t in (_turn(session, o) for o in ordinals) if t is not None]


def checks_between(session: Session, first: int, last: int) -> list[Turn]:
    """The turns between ``first`` and ``last`` the ledger holds a health or port check for."""
    ledger = analysis_of(session).latest_ledger()
    ordinals = sorted({c.ordinal for c in ledger.checks if first < c.ordinal < last}
                      if ledger else ())
    return [t for t in (_turn(session, o) for o in ordinals) if t is not None]


def repeated_message(session: Session, incident: Incident) -> UserTurn | None:
    """The earlier user message a re-send repeats (its ``earlier message`` fact)."""
    fact = _fact(incident, "earlier message")
    turn = _turn(session, fact.turn) if fact else None
    return turn if isinstance(turn, UserTurn) else None


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
