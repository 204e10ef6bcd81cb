"""FX101 interrupted-turn: the user stopped the assistant (a harness event worth a row).

One finding per stop: opencode's aborted message, Claude Code's ``[Request interrupted by user…]``
line, Codex's ``turn_aborted`` line. A rejected tool call whose exchange records no stop of its
own is anchored at the rejected call's result.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.analysis.params import NoParams
from forensics.findings import Evidence, Finding
from forensics.model import EventTurn, Session, ToolResultTurn
from forensics.rules import rule
from forensics.rules._harness import event_runs, last_assistant_before
from forensics.analysis.session import STOP_EVENTS, analysis_of, user_stopped
from forensics.analysis.shell import command_of
from forensics.analysis.text import shorten


@rule("FX101")
def interrupted_turn(session: Session, params: NoParams) -> Iterator[Finding]:
    def stop(turn) -> bool:
        if isinstance(turn, EventTurn):
            return turn.event in STOP_EVENTS
        return (isinstance(turn, ToolResultTurn) and turn.aborted
                and not user_stopped(analysis_of(session).rest_of_exchange(turn.ordinal)))

    seen: set[str] = set()
    for run in event_runs(session, stop):
        for turn in run:
            if turn.anchor in seen:
                continue  # opencode: the aborted message and its abort event are one record
            seen.add(turn.anchor)
            yield _finding(session, turn)


def _finding(session: Session, turn) -> Finding:
    cut = last_assistant_before(session, turn.ordinal)
    evidence = [cut.ordinal] if cut is not None and cut.ordinal != turn.ordinal else []
    facts: list[Evidence] = []
    if cut is not None and cut.ordinal != turn.ordinal:
        facts.append(Evidence(kind="reply", role="cut short", turn=cut.ordinal, anchor=cut.anchor,
                              quote=shorten(cut.text, 160)))
    if isinstance(turn, ToolResultTurn):
        owner = session.call_for(turn)
        what = _call_words(owner[1]) if owner else f"the {turn.name or 'tool'} call"
        message = f"The user rejected {what}."
        if owner:
            facts.append(Evidence(kind="call", role="rejected call", turn=owner[0].ordinal,
                                  anchor=owner[1].anchor,
                                  command=command_of(owner[1]) or owner[1].name))
        facts.append(Evidence(kind="result", role="rejection", turn=turn.ordinal,
                              anchor=turn.anchor, quote=shorten(turn.error or turn.output, 160)))
    else:
        doing = "while the assistant was working"
        if cut is not None and cut.tool_calls:
            doing = f"during {_call_words(cut.tool_calls[-1])}"
        elif cut is not None and cut.text.strip():
            doing = "while the assistant was writing its reply"
        said = f" (\"{shorten(turn.text, 60)}\")" if turn.text.strip() else ""
        message = f"The user interrupted the turn {doing}{said}."
        facts.append(Evidence(kind="event", role="interruption", turn=turn.ordinal,
                              anchor=turn.anchor, quote=shorten(turn.text, 160)))
    facts.sort(key=lambda f: f.turn)
    return Finding(turn=turn.ordinal, anchor=turn.anchor, severity="low",
                   severity_reason="a harness event, counted: not the assistant's mistake",
                   message=message, evidence=evidence, facts=facts)


def _call_words(call) -> str:
    command = command_of(call)
    return f"`{shorten(command, 70)}`" if command else f"the {call.name} call"
