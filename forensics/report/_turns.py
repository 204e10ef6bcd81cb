"""Turn-level helpers for case studies: where a turn is, what it did, how to name it in a row."""

from __future__ import annotations


from forensics.model import (
    AssistantTurn,
    EventTurn,
    Session,
    ToolCall,
    ToolResultTurn,
    Turn,
    UserTurn,
)
from forensics.report._prose import norm, shorten
from forensics.analysis.session import analysis_of
from forensics.findings import Incident
from forensics.timeline import utc_text
from forensics.report._shell import (
    result_failed,
    result_status,
    strip_env,
    telling_lines,
)


def when(turn: Turn) -> str:
    return utc_text(turn.time, "%Y-%m-%d %H:%M:%S UTC")


def message_number(session: Session, turn: Turn) -> int | None:
    """The flagged message's place among the transcript's own messages (distinct anchors)."""
    return SessionMemo(session).message_number(turn)


def location(session: Session, turn: Turn) -> str:
    if turn.line is not None:
        return f"{turn.file or session.source}:{turn.line}"
    return turn.file or session.source


def calls_of(turn: Turn) -> list[ToolCall]:
    return turn.tool_calls if isinstance(turn, AssistantTurn) else []


def commands_of(turn: Turn) -> list[str]:
    return [c.command for c in calls_of(turn) if c.command]


def user_words(turn: UserTurn) -> str:
    if turn.command:
        return f"{turn.command} {turn.arguments or ''}".strip()
    return turn.text


def summarize_call(call: ToolCall) -> str:
    return ", ".join(f"{k}={shorten(str(v), 60)}" for k, v in list(call.input.items())[:2])


_FACT_LABELS = {"launch": "launch", "kill": "kill", "check": "check"}


def fact_labels(incident: Incident) -> dict[int, str]:
    """Labels the finding's typed evidence gives its turns (launch, kill, check, result)."""
    out: dict[int, str] = {}
    for fact in incident.facts:
        label = _FACT_LABELS.get(fact.kind)
        if label and fact.turn not in out:
            out[fact.turn] = label
    return out


def ledger_labels(session: Session) -> dict[int, str]:
    """Launch, kill and check labels from the session's process ledger (built by the scan)."""
    ledger = analysis_of(session).latest_ledger()
    out: dict[int, str] = {}
    if ledger is None:
        return out
    for check in ledger.checks:
        out.setdefault(check.ordinal, "check")
    for launch in ledger.launches:
        out[launch.turn] = "launch"
        if launch.result is not None:
            out.setdefault(launch.result, "result")
    for kill in ledger.kills:
        out[kill.ordinal] = "kill"
    return out


def label_of(session: Session, turn: Turn, ledger: dict[int, str] | None = None) -> str | None:
    """Why a turn belongs in the chain of events, or None when it does not."""
    named = (ledger or {}).get(turn.ordinal)
    if named and not (isinstance(turn, ToolResultTurn) and result_failed(session, turn)):
        return named
    if isinstance(turn, UserTurn):
        return "user"
    if isinstance(turn, AssistantTurn):
        if turn.aborted:
            return "aborted reply"
        if turn.error is not None:
            return "provider error"
        if not turn.visible:
            return "empty reply"
        if turn.tool_calls:
            results = [session.result_for(c) for c in turn.tool_calls]
            return "call" if any(r is not None and result_failed(session, r) for r in results) else None
        return "reply"
    if isinstance(turn, ToolResultTurn):
        if turn.aborted:
            return "aborted call"
        if result_failed(session, turn):
            return "failed call"
        return None
    if isinstance(turn, EventTurn):
        if turn.event in ("abort", "interrupt", "api_error", "retry", "compaction",
                          "notification", "shell"):
            return turn.event.replace("_", " ")
        if turn.event == "turn_complete":
            return "turn ended"
        return None
    return None


def step_text(session: Session, turn: Turn) -> str:
    if isinstance(turn, AssistantTurn) and turn.tool_calls:
        bits = []
        if turn.text.strip():
            bits.append(shorten(turn.text, 90))
        for c in turn.tool_calls[:3]:
            shown = strip_env(c.command) if c.command else summarize_call(c)
            bits.append(f"{c.name}: {shorten(shown, 110)}")
        return " · ".join(bits)
    if isinstance(turn, AssistantTurn) and not turn.visible:
        parts = ", ".join(turn.part_kinds) if turn.part_kinds else "no parts"
        if turn.reasoning.strip():
            return f"(nothing visible; reasoning only, {len(turn.reasoning)} characters)"
        return f"(nothing visible; {parts})"
    if isinstance(turn, ToolResultTurn):
        lines = telling_lines(turn.error or turn.output, 1)
        tail = f": {lines[0]}" if lines else ""
        return f"{turn.name or 'tool'} {result_status(session, turn)}{tail}"
    if isinstance(turn, UserTurn):
        return shorten(user_words(turn), 160) or "(empty)"
    if isinstance(turn, AssistantTurn):
        bits = [f"[{turn.error.name}]"] if turn.error else []
        bits += ["[aborted]"] if turn.aborted else []
        return shorten(" ".join(bits + [turn.text]), 160)
    if isinstance(turn, EventTurn):
        return shorten(f"{turn.event}: {turn.text}" if turn.text else turn.event, 160)
    return shorten(getattr(turn, "text", ""), 160)


def previous(session: Session, ordinal: int, kinds: tuple[type, ...]) -> Turn | None:
    for turn in reversed(session.turns[: ordinal - 1]):
        if isinstance(turn, kinds):
            return turn
    return None


def same_as_earlier(session: Session, user: UserTurn) -> UserTurn | None:
    raw = user_words(user)
    words = norm(raw)
    if len(words) < 2:
        return None
    for turn in reversed(session.turns[: user.ordinal - 1]):
        if not isinstance(turn, UserTurn):
            continue
        other = user_words(turn)
        if abs(len(other) - len(raw)) > len(raw) // 4 + 16:
            continue  # whitespace alone cannot bridge that difference; skip the normalising
        if norm(other) == words:
            return turn
    return None


class SessionMemo:
    """Answers every case study of one session asks for, computed once per session: a report of
    a session with many incidents must not re-label the same turns for each of them."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._labels: dict[int, str | None] = {}
        self._numbers: dict[str, int] | None = None
        self._counts: dict[str, int] | None = None
        self._ledger: dict[int, str] | None = None

    def label(self, turn: Turn) -> str | None:
        if self._ledger is None:
            self._ledger = ledger_labels(self.session)
        if turn.ordinal not in self._labels:
            self._labels[turn.ordinal] = label_of(self.session, turn, self._ledger)
        return self._labels[turn.ordinal]

    def message_number(self, turn: Turn) -> int | None:
        if self.session.agent == "codex" or turn.anchor.startswith("L"):
            return None
        if self._numbers is None:
            self._numbers = {}
            for t in self.session.turns:
                self._numbers.setdefault(t.anchor, len(self._numbers) + 1)
        return self._numbers.get(turn.anchor)

    @property
    def counts(self) -> dict[str, int]:
        if self._counts is None:
            self._counts = self.session.counts()
        return self._counts
