"""FX001 empty-response: the assistant said nothing the user could see."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forensics.analysis.session import STOP_EVENTS, analysis_of
from forensics.analysis.outcome import telling_lines
from forensics.analysis.text import shorten
from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, UserTurn
from forensics.rules import rule


@dataclass(frozen=True)
class EmptyResponseParams:
    """FX001's ``[params]``."""

    param_names: ClassVar[frozenset[str]] = frozenset({"placeholder_texts"})
    placeholders: frozenset[str]
    """Texts that stand for nothing (Claude Code's ``(no content)``)."""

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "EmptyResponseParams":
        return cls(frozenset(p.strip() for p in raw["placeholder_texts"]))


@rule("FX001")
def empty_response(session: Session, params: EmptyResponseParams) -> Iterator[Finding]:
    placeholders = params.placeholders
    for turn in session.turns:
        if isinstance(turn, AssistantTurn):
            if _is_empty(turn, placeholders) and not _dealt_elsewhere(session, turn):
                yield _finding(session, turn)
        elif isinstance(turn, EventTurn) and turn.event == "turn_complete":
            # Codex: the turn closed right after a tool result with no assistant message at all.
            if _completed_silently(session, turn):
                yield _finding(session, turn, no_message=True)


def _is_empty(turn: AssistantTurn, placeholders: frozenset[str]) -> bool:
    if turn.tool_calls or turn.aborted or turn.error is not None:
        return False
    text = turn.text.strip()
    return not text or text in placeholders


def _dealt_elsewhere(session: Session, turn: AssistantTurn) -> bool:
    """Not silence: the user stopped it, or a later step showed content before the user spoke."""
    for later in session.turns_after(turn.ordinal):
        if isinstance(later, UserTurn):
            return False
        if isinstance(later, EventTurn) and later.event in STOP_EVENTS:
            return True
        if isinstance(later, EventTurn) and later.event == "api_error":
            return True
        if isinstance(later, AssistantTurn):
            return later.visible or later.aborted
    return False


def _completed_silently(session: Session, event: EventTurn) -> bool:
    """A Codex turn_complete with no reply since the user's message or the last tool result."""
    last = event.detail.get("last_agent_message")
    if isinstance(last, str) and last.strip():
        return False
    for prev in session.turns_before(event.ordinal):
        if isinstance(prev, EventTurn) and prev.event == "api_error":
            return False  # the user was shown a provider error: reported under its own rule
        if isinstance(prev, EventTurn) and prev.event not in STOP_EVENTS:
            continue
        if isinstance(prev, ToolResultTurn):
            return not prev.aborted
        return isinstance(prev, UserTurn)
    return False


def _finding(session: Session, turn, *, no_message: bool = False) -> Finding:
    after_result = _previous_result(session, turn.ordinal)
    user_next = _user_wrote_next(session, turn.ordinal)
    evidence = []
    facts: list[Evidence] = []
    what = "an empty reply"
    if isinstance(turn, AssistantTurn) and turn.reasoning.strip():
        what = "a reply with reasoning only (nothing visible)"
    if no_message:
        what = "no reply at all (the turn completed with no assistant message)"
    facts.append(Evidence(
        kind="event" if no_message else "reply",
        role="turn completed with no reply" if no_message else
        "reasoning only" if "reasoning" in what else "empty reply",
        turn=turn.ordinal, anchor=turn.anchor,
        quote=shorten(turn.reasoning, 160) if isinstance(turn, AssistantTurn) and
        turn.reasoning.strip() else turn.text.strip() if isinstance(turn, AssistantTurn) else ""))
    context = ""
    if after_result is not None:
        evidence.append(after_result.ordinal)
        status = _result_status(session, after_result)
        context = f" after the {after_result.name or 'tool'} result ({status})"
        outcome = analysis_of(session).outcome(after_result)
        lines = telling_lines(after_result.error or after_result.output, 2)
        facts.append(Evidence(kind="failure" if outcome.failed else "result",
                              role="result before the silence", turn=after_result.ordinal,
                              anchor=after_result.anchor, status=outcome.status() or "ok",
                              quote="\n".join(lines)))
    if user_next is not None:
        evidence.append(user_next.ordinal)
        facts.append(Evidence(kind="message", role="user wrote next", turn=user_next.ordinal,
                              anchor=user_next.anchor, quote=shorten(user_next.text, 80)))
        severity, reason = "high", (
            "the empty reply was the last thing the user saw before they wrote again "
            f"(turn {user_next.ordinal}: \"{shorten(user_next.text, 60)}\")")
    else:
        severity, reason = "medium", "the session went on or ended without the user writing again"
    message = f"The assistant gave {what}{context}."
    if user_next is not None:
        message += f" The user then wrote: \"{shorten(user_next.text, 80)}\""
    facts.sort(key=lambda f: f.turn)
    return Finding(turn=turn.ordinal, anchor=turn.anchor, severity=severity,
                   severity_reason=reason, message=message, evidence=evidence, facts=facts)


def _previous_result(session: Session, ordinal: int) -> ToolResultTurn | None:
    prev = session.turns[ordinal - 2] if ordinal >= 2 else None
    return prev if isinstance(prev, ToolResultTurn) else None


def _user_wrote_next(session: Session, ordinal: int) -> UserTurn | None:
    """The user's next message if nothing but harness events came between."""
    for later in session.turns_after(ordinal):
        if isinstance(later, UserTurn):
            return later
        if isinstance(later, EventTurn) and later.event not in STOP_EVENTS:
            continue
        return None
    return None


def _result_status(session: Session, result: ToolResultTurn) -> str:
    status = analysis_of(session).outcome(result).status()
    if status and status != "aborted":
        return status
    tail = result.output.strip().splitlines()[-1:] or [""]
    return f"\"{shorten(tail[0], 50)}\"" if tail[0] else "no output"
