"""FX001 empty-response: the assistant said nothing the user could see."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from forensics.findings import Finding
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, UserTurn
from forensics.rules import rule
from forensics.rules._walk import STOP_EVENTS
from forensics.timeline import shorten


@rule("FX001")
def empty_response(session: Session, *, placeholder_texts: Sequence[str]) -> Iterator[Finding]:
    placeholders = {p.strip() for p in placeholder_texts}
    for turn in session.turns:
        if isinstance(turn, AssistantTurn):
            if _is_empty(turn, placeholders) and not _dealt_elsewhere(session, turn):
                yield _finding(session, turn)
        elif isinstance(turn, EventTurn) and turn.event == "turn_complete":
            # Codex: the turn closed right after a tool result with no assistant message at all.
            if _completed_silently(session, turn):
                yield _finding(session, turn, no_message=True)


def _is_empty(turn: AssistantTurn, placeholders: set[str]) -> bool:
    if turn.tool_calls or turn.aborted or turn.error is not None:
        return False
    text = turn.text.strip()
    return not text or text in placeholders


def _dealt_elsewhere(session: Session, turn: AssistantTurn) -> bool:
    """Not silence: the user stopped it, or a later step showed content before the user spoke."""
    for later in session.turns[turn.ordinal:]:
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
    for prev in reversed(session.turns[: event.ordinal - 1]):
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
    what = "an empty reply"
    if isinstance(turn, AssistantTurn) and turn.reasoning.strip():
        what = "a reply with reasoning only (nothing visible)"
    if no_message:
        what = "no reply at all (the turn completed with no assistant message)"
    context = ""
    if after_result is not None:
        evidence.append(after_result.ordinal)
        status = _result_status(after_result)
        context = f" after the {after_result.name or 'tool'} result ({status})"
    if user_next is not None:
        evidence.append(user_next.ordinal)
        severity, reason = "high", (
            "the empty reply was the last thing the user saw before they wrote again "
            f"(turn {user_next.ordinal}: \"{shorten(user_next.text, 60)}\")")
    else:
        severity, reason = "medium", "the session went on or ended without the user writing again"
    message = f"The assistant gave {what}{context}."
    if user_next is not None:
        message += f" The user then wrote: \"{shorten(user_next.text, 80)}\""
    return Finding(turn=turn.ordinal, anchor=turn.anchor, severity=severity,
                   severity_reason=reason, message=message, evidence=evidence)


def _previous_result(session: Session, ordinal: int) -> ToolResultTurn | None:
    prev = session.turns[ordinal - 2] if ordinal >= 2 else None
    return prev if isinstance(prev, ToolResultTurn) else None


def _user_wrote_next(session: Session, ordinal: int) -> UserTurn | None:
    """The user's next message if nothing but harness events came between."""
    for later in session.turns[ordinal:]:
        if isinstance(later, UserTurn):
            return later
        if isinstance(later, EventTurn) and later.event not in STOP_EVENTS:
            continue
        return None
    return None


_DEATH = re.compile(r"\bKilled\b|Segmentation fault|core dumped|OOMKilled")


def _result_status(result: ToolResultTurn) -> str:
    if result.killed or _DEATH.search(result.output):
        return "killed"
    if result.timed_out:
        return "timed out"
    if result.exit_code not in (None, 0):
        return f"exit {result.exit_code}"
    if result.is_error:
        return "error"
    tail = result.output.strip().splitlines()[-1:] or [""]
    return f"\"{shorten(tail[0], 50)}\"" if tail[0] else "no output"
