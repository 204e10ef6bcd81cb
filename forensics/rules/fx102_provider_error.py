"""FX102 provider-error: the provider refused or failed the request (a harness event worth a row).

One finding per outage the user saw: an error record (Claude Code's ``<synthetic>`` API-error
line, opencode's ``APIError`` message, Codex's ``error`` event), with the harness's retries of it
as evidence; retries that recovered with no error shown are one finding too. The kind (rate
limit, auth, overload, …) comes from the error's words, listed in the rule file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from forensics.findings import Evidence, Finding
from forensics.model import AssistantTurn, EventTurn, Session
from forensics.rules import rule
from forensics.rules._harness import event_runs
from forensics.analysis.phrases import compile_later
from forensics.analysis.text import shorten


@dataclass(frozen=True)
class ProviderErrorParams:
    """FX102's ``[params]``: each kind of provider error and the words that say it."""

    param_names: ClassVar[frozenset[str]] = frozenset({"error_kinds"})
    kinds: tuple[tuple[str, re.Pattern[str]], ...]
    """(kind, its words as one pattern), in the rule file's order: the first that matches."""

    @classmethod
    def from_params(cls, raw: Mapping[str, Any]) -> "ProviderErrorParams":
        return cls(tuple((name, compile_later("|".join(f"(?:{w})" for w in words), re.I))
                         for name, words in raw["error_kinds"].items() if words))


@rule("FX102")
def provider_error(session: Session, params: ProviderErrorParams) -> Iterator[Finding]:
    kinds = params.kinds

    def wanted(turn) -> bool:
        if isinstance(turn, EventTurn):
            return turn.event in ("api_error", "retry")
        # an error carried only by the message, with no event record of its own
        return (isinstance(turn, AssistantTurn) and turn.error is not None and not turn.aborted
                and not _event_follows(session, turn))

    for run in event_runs(session, wanted):
        errors = [t for t in run if not (isinstance(t, EventTurn) and t.event == "retry")]
        groups = [[t] for t in errors] or [run[:1]]
        if errors:
            groups[0] = [t for t in run if t.ordinal <= errors[0].ordinal]
        for group in groups:
            yield _finding(group, kinds)


def _event_follows(session: Session, turn: AssistantTurn) -> bool:
    """The harness wrote the same error as an event of its own right after the message."""
    nxt = session.turns[turn.ordinal] if turn.ordinal < len(session.turns) else None
    return isinstance(nxt, EventTurn) and nxt.event == "api_error"


def _finding(group, kinds) -> Finding:
    head = group[-1]
    retries = sum(1 for t in group if isinstance(t, EventTurn) and t.event == "retry")
    text = _text(head)
    kind = next((name for name, pattern in kinds if pattern.search(text)), "other")
    status = head.detail.get("status") if isinstance(head, EventTurn) else None
    what = kind.replace("_", " ")
    if status:
        what += f", status {status}"
    if isinstance(head, EventTurn) and head.event == "retry":
        message = f"The provider failed ({what}) and the harness retried"
    else:
        message = f"The provider returned an error ({what})"
    if retries and not (isinstance(head, EventTurn) and head.event == "retry"):
        message += f" after {retries} retr{'y' if retries == 1 else 'ies'}"
    if text:
        message += f": \"{shorten(text, 90)}\""
    facts = [Evidence(kind="event", role="retry", turn=t.ordinal, anchor=t.anchor,
                      quote=shorten(_text(t), 160))
             for t in group if t is not head and isinstance(t, EventTurn) and t.event == "retry"]
    facts.append(Evidence(kind="event", role=f"provider error ({what})", turn=head.ordinal,
                          anchor=head.anchor, quote=shorten(text, 160)))
    return Finding(turn=head.ordinal, anchor=head.anchor, severity="low",
                   severity_reason="a harness event, counted: not the assistant's mistake",
                   message=message + ".",
                   evidence=[t.ordinal for t in group if t is not head], facts=facts)


def _text(turn) -> str:
    if isinstance(turn, AssistantTurn):
        return f"{turn.error.name}: {turn.error.message}" if turn.error else ""
    extra = turn.detail.get("error")
    return " ".join(x for x in (turn.text, extra if isinstance(extra, str) else "") if x).strip()
