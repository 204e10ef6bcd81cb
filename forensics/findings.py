"""What rules yield (``Finding``) and what reports show (``Incident``).

A ``Finding`` is the bare observation a rule makes about one turn. The engine turns it into an
``Incident`` by adding the rule's identity and the session's, plus a stable fingerprint so that a
batch rerun can tell an old incident from a new one.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from forensics.model import Turn

Severity = Literal["high", "medium", "low"]
SEVERITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}

EvidenceKind = Literal[
    "launch",  # a process the assistant started (command, port)
    "kill",  # a command or harness call aimed at stopping one
    "check",  # a health check, log read or process listing, and what it answered
    "port",  # the port two launches compete for, and how it is known
    "result",  # what a tool call's own result showed (exit, conflict, crash, ready line)
    "failure",  # a failed tool call: how it failed, in its own words
    "claim",  # the assistant's words claiming something
    "message",  # the user's words
    "reply",  # what the assistant did or said next (an empty reply, moving on)
    "call",  # a tool call: the one that never came back, the corrected or destructive one
    "edit",  # a file the assistant changed
    "event",  # a harness event: an interruption, a provider error, a compaction
]


class Evidence(BaseModel):
    """One piece of typed evidence: what it is, where it is, and the words that proved it."""

    model_config = ConfigDict(extra="forbid")

    kind: EvidenceKind
    role: str
    """What it is to this finding: ``earlier launch``, ``relaunch``, ``kill that missed``,
    ``health check that answered``, ``user said it was up``…"""
    turn: int
    anchor: str
    quote: str = ""
    """The words that proved it, from the transcript (shortened), or empty."""
    command: str | None = None
    port: int | None = None
    status: str | None = None
    """How a call or check ended, in words (``exited with status 1``, ``timed out``), as the
    rule judged it; None when the fact is not a run."""


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int
    """Ordinal of the flagged turn."""
    anchor: str
    severity: Severity
    severity_reason: str
    message: str
    """One sentence in this session's own terms: the command, the port, the quoted words."""
    evidence: list[int] = Field(default_factory=list)
    """Ordinals of the other turns the finding relies on, in order."""
    facts: list[Evidence] = Field(default_factory=list)
    """The typed evidence, in transcript order; reports render it instead of re-detecting."""


class Incident(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str
    """The rule's slug, e.g. ``empty-response``."""
    code: str
    """The rule's code, e.g. ``FX001``."""
    title: str
    severity: Severity
    severity_reason: str
    session_id: str
    source: str
    agent: str
    turn: int
    anchor: str
    evidence: list[str]
    """Anchors of the evidence turns."""
    evidence_turns: list[int]
    message: str
    fingerprint: str
    facts: list[Evidence] = Field(default_factory=list)
    """The finding's typed evidence."""

    @staticmethod
    def make_fingerprint(code: str, session_id: str, anchor: str, content: str) -> str:
        """Stable across an append to the transcript and a rerun elsewhere: built from what the
        record is (``content``: a digest of the flagged record, ``record_digest``), never from
        turn ordinals, which move when a reader types a record differently, nor from paths."""
        raw = f"{code}\x00{session_id}\x00{anchor}\x00{content}".encode()
        return hashlib.blake2b(raw, digest_size=8).hexdigest()


_NOT_CONTENT = frozenset({"ordinal", "line", "file"})
"""Where a turn was read from and its place in the session: not what the record is."""


def record_digest(turn: Turn) -> str:
    """A digest of a turn's content: everything but its ordinal and where it was read from."""
    import orjson

    dump = {k: v for k, v in turn.dump().items() if k not in _NOT_CONTENT}
    return hashlib.blake2b(orjson.dumps(dump, option=orjson.OPT_SORT_KEYS),
                           digest_size=8).hexdigest()
