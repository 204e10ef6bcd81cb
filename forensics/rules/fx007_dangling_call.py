"""FX007 dangling-call: a tool call that never came back.

A call with no result at all while the session goes on (Claude Code ``tool_use`` with no
``tool_result``, Codex ``function_call`` with no output), or a call opencode still marks
pending/running in a message that finished. Not counted: a call the user's abort ended
(``interrupted-turn`` reports it), a background launch whose result is the launch itself, and the
last calls of a session saved while they still ran (opencode says so; a JSONL transcript that
simply ends after the call cannot tell a live session from a dead one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forensics.findings import Evidence, Finding
from forensics.ingest._opencode import NEVER_FINISHED
from forensics.model import AssistantTurn, EventTurn, Session, ToolCall, ToolResultTurn, UserTurn
from forensics.rules import rule
from forensics.analysis.session import STOP_EVENTS, analysis_of, user_stopped
from forensics.analysis.shell import command_of, split_pipelines
from forensics.analysis.text import shorten


@dataclass(frozen=True)
class DanglingCallParams:
    """FX007's ``[params]``."""

    param_names: ClassVar[frozenset[str]] = frozenset({"resultless_tools"})
    resultless_tools: frozenset[str]
    """Tools that never return a result of their own (lower-cased)."""

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "DanglingCallParams":
        return cls(frozenset(t.lower() for t in raw["resultless_tools"]))


@rule("FX007")
def dangling_call(session: Session, params: DanglingCallParams) -> Iterator[Finding]:
    no_result_expected = params.resultless_tools
    analysis = analysis_of(session)
    if _keeps_no_results(session, len(analysis.runs)):
        return
    for run in analysis.runs:  # every call in order, with its result (shared with FX005/FX006)
        turn, call, result = run.turn, run.call, run.result
        if turn.aborted or call.name.lower() in no_result_expected:
            continue
        if result is not None and not _never_finished(result):
            continue  # answered: most calls end here, before their script is split
        if _launched_in_background(call):
            continue
        after = result.ordinal if result is not None else turn.ordinal
        later = analysis.rest_of_exchange(after)
        if user_stopped(later) or (result is not None and result.aborted):
            continue
        if result is None and not _session_went_on(session, after):
            continue  # the transcript ends here: a live session, not a lost result
        yield _finding(session, turn, call, result)


NO_RESULTS_FORMAT_CALLS = 3
"""This many calls and not one result: the format kept no results (a Cline UI stream without
its API history), so no call can be said to have lost its own. One or two unanswered calls in
a short session are still judged."""


def _keeps_no_results(session: Session, calls: int) -> bool:
    """``calls``: how many tool calls the session made."""
    return calls >= NO_RESULTS_FORMAT_CALLS and not any(
        isinstance(t, ToolResultTurn) for t in session.turns)


def _never_finished(result: ToolResultTurn) -> bool:
    return result.error == NEVER_FINISHED


def _launched_in_background(call: ToolCall) -> bool:
    if call.background:
        return True
    command = command_of(call)
    if not command or "&" not in command:
        return False  # only an ``&`` ends a pipeline in the background (split_pipelines)
    pipelines = split_pipelines(command)
    return bool(pipelines) and pipelines[-1].background


def _session_went_on(session: Session, ordinal: int) -> bool:
    """A later message or a closed turn: results of the same step's other calls are not enough
    (a session copied while its last parallel calls ran has those and nothing more)."""
    return any(isinstance(t, (UserTurn, AssistantTurn))
               or (isinstance(t, EventTurn) and t.event == "turn_complete")
               for t in session.turns_after(ordinal))


def _next_step(session: Session, ordinal: int):
    for later in session.turns_after(ordinal):
        if isinstance(later, EventTurn) and later.event not in STOP_EVENTS:
            continue
        return later
    return None


def _finding(session: Session, turn: AssistantTurn, call: ToolCall,
             result: ToolResultTurn | None) -> Finding:
    command = command_of(call)
    what = f"`{shorten(command, 80)}`" if command else f"the {call.name or 'tool'} call"
    after = result.ordinal if result is not None else turn.ordinal
    nxt = _next_step(session, after)
    evidence = [t.ordinal for t in (result, nxt) if t is not None]
    if result is not None:
        how = "is still marked pending/running although its message finished"
    else:
        how = "never got a result"
    if isinstance(nxt, UserTurn):
        severity = "high"
        reason = "the user wrote again while the call had not come back"
        then = f"; the user wrote next: \"{shorten(nxt.text, 70)}\""
    else:
        severity = "medium"
        reason = "the session went on without the call's result"
        then = "; the session went on without it" if nxt is not None else ""
    facts = [Evidence(kind="call", role="dangling call", turn=turn.ordinal, anchor=call.anchor,
                      command=command or call.name,
                      status="pending" if result is not None else "no result")]
    if result is not None:
        facts.append(Evidence(kind="result", role="still pending", turn=result.ordinal,
                              anchor=result.anchor, quote=shorten(result.error or "", 160)))
    if isinstance(nxt, UserTurn):
        facts.append(Evidence(kind="message", role="user wrote next", turn=nxt.ordinal,
                              anchor=nxt.anchor, quote=shorten(nxt.text, 160)))
    elif nxt is not None:
        facts.append(Evidence(kind="event" if isinstance(nxt, EventTurn) else
                              "result" if isinstance(nxt, ToolResultTurn) else "reply",
                              role="the session went on", turn=nxt.ordinal, anchor=nxt.anchor,
                              quote=shorten(getattr(nxt, "text", "") or "", 160)))
    return Finding(turn=turn.ordinal, anchor=call.anchor, severity=severity,
                   severity_reason=reason, message=f"{what} {how}{then}.", evidence=evidence,
                   facts=facts)
