"""What rules yield (``Finding``) and what reports show (``Incident``).

A ``Finding`` is the bare observation a rule makes about one turn. The engine turns it into an
``Incident`` by adding the rule's identity and the session's, plus a stable fingerprint so that a
batch rerun can tell an old incident from a new one.

They are dataclasses, keyword-only, that refuse a severity or evidence kind outside their
``Literal`` and keep their lists as lists, as the pydantic models they replace did: a scan
then needs no pydantic once the turns do not (importing it and building its validators was
about a third of a small scan's start-up).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

try:  # the very function hashlib hands out, without hashlib loading OpenSSL's digests (3 ms)
    from _blake2 import blake2b
except ImportError:  # a Python without CPython's built-in module
    from hashlib import blake2b

from forensics.model import Record, Turn

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

EVIDENCE_KINDS = frozenset(get_args(EvidenceKind))


def _refuse(value: Any, allowed: frozenset[str] | dict[str, int], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(sorted(allowed))}, not {value!r}")


@dataclass(kw_only=True)
class Evidence(Record):
    """One piece of typed evidence: what it is, where it is, and the words that proved it."""

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

    def __post_init__(self) -> None:
        _refuse(self.kind, EVIDENCE_KINDS, "evidence kind")


@dataclass(kw_only=True)
class Finding(Record):
    turn: int
    """Ordinal of the flagged turn."""
    anchor: str
    severity: Severity
    severity_reason: str
    message: str
    """One sentence in this session's own terms: the command, the port, the quoted words."""
    evidence: list[int] = field(default_factory=list)
    """Ordinals of the other turns the finding relies on, in order."""
    facts: list[Evidence] = field(default_factory=list)
    """The typed evidence, in transcript order; reports render it instead of re-detecting."""

    def __post_init__(self) -> None:
        _refuse(self.severity, SEVERITY_ORDER, "severity")
        self.evidence, self.facts = list(self.evidence), list(self.facts)


@dataclass(kw_only=True)
class Incident(Record):
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
    facts: list[Evidence] = field(default_factory=list)
    """The finding's typed evidence."""

    def __post_init__(self) -> None:
        _refuse(self.severity, SEVERITY_ORDER, "severity")
        self.evidence, self.evidence_turns = list(self.evidence), list(self.evidence_turns)
        self.facts = list(self.facts)

    @staticmethod
    def make_fingerprint(code: str, session_id: str, anchor: str, content: str) -> str:
        """Stable across an append to the transcript and a rerun elsewhere: built from what the
        record is (``content``: a digest of the flagged record, ``record_digest``), never from
        turn ordinals, which move when a reader types a record differently, nor from paths."""
        raw = f"{code}\x00{session_id}\x00{anchor}\x00{content}".encode()
        return blake2b(raw, digest_size=8).hexdigest()


_NOT_CONTENT = frozenset({"ordinal", "line", "file"})
"""Where a turn was read from and its place in the session: not what the record is."""


def record_digest(turn: Turn) -> str:
    """A digest of a turn's content: everything but its ordinal and where it was read from."""
    import orjson

    dump = turn.dump(exclude=_NOT_CONTENT)
    return blake2b(orjson.dumps(dump, option=orjson.OPT_SORT_KEYS), digest_size=8).hexdigest()
