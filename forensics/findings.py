"""What rules yield (``Finding``) and what reports show (``Incident``).

A ``Finding`` is the bare observation a rule makes about one turn. The engine turns it into an
``Incident`` by adding the rule's identity and the session's, plus a stable fingerprint so that a
batch rerun can tell an old incident from a new one.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["high", "medium", "low"]
SEVERITY_ORDER: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


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

    @staticmethod
    def make_fingerprint(code: str, session_id: str, anchor: str, content: str) -> str:
        """Stable across an append to the transcript and a rerun elsewhere: built from what the
        record is (``content``: a digest of the flagged record, ``record_digest``), never from
        turn ordinals, which move when a reader types a record differently, nor from paths."""
        raw = f"{code}\x00{session_id}\x00{anchor}\x00{content}".encode()
        return hashlib.blake2b(raw, digest_size=8).hexdigest()


def record_digest(turn: object) -> str:
    """A digest of a turn's content: everything but its ordinal and where it was read from."""
    import orjson

    dump = turn.model_dump(mode="json", exclude={"ordinal", "line", "file"})  # type: ignore
    return hashlib.blake2b(orjson.dumps(dump, option=orjson.OPT_SORT_KEYS),
                           digest_size=8).hexdigest()
