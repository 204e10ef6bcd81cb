"""Run the selected rules over a session; a rule that raises is reported, the others still run."""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from forensics.analysis.session_cache import new_session
from forensics.config import Config
from forensics.findings import Finding, Incident, record_digest
from forensics.ingest._source import fewer_collections
from forensics.model import Session, Turn
from forensics.rules import RuleSpec


@dataclass
class RuleCrash:
    """A rule raised on a session: reported in every output, never fatal."""

    code: str
    slug: str
    session_id: str
    source: str
    error: str

    def __str__(self) -> str:
        return f"{self.source}: rule {self.code} ({self.slug}) crashed: {self.error}"


@dataclass
class ScanResult:
    session: Session
    incidents: list[Incident] = field(default_factory=list)
    crashes: list[RuleCrash] = field(default_factory=list)

    def released(self) -> ScanResult:
        """This result with its session's turns let go but for the ones its incidents name.

        What ``scan``'s line and document formats print (each finding's file and line, the
        session's facts and turn count) survives, so a run over an archive holds one source's
        turns at a time instead of every session's until the end."""
        session = self.session
        if isinstance(session.turns, KeptTurns):
            return self
        keep = {o for i in self.incidents for o in (i.turn, *i.evidence_turns)}
        slim = replace(session, turns=KeptTurns(session.turns, keep))
        return ScanResult(session=slim, incidents=self.incidents, crashes=self.crashes)


class KeptTurns(Sequence[Turn]):
    """A released session's turns: their number, and the turns its incidents name."""

    def __init__(self, turns: Sequence[Turn], ordinals: Iterable[int]) -> None:
        self._count = len(turns)
        self._kept = {o: turns[o - 1] for o in ordinals if 0 < o <= len(turns)}

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            raise TypeError("a released session keeps only the turns its incidents name")
        ordinal = (index + self._count if index < 0 else index) + 1
        if not 0 < ordinal <= self._count:
            raise IndexError(index)
        try:
            return self._kept[ordinal]
        except KeyError:
            raise LookupError(f"turn {ordinal} was released after the scan (only the turns "
                              "incidents name are kept)") from None

    def __iter__(self) -> Iterator[Turn]:
        raise TypeError("a released session keeps only the turns its incidents name")


def scan_session(session: Session, config: Config | None = None,
                 rules: Iterable[RuleSpec] | None = None) -> ScanResult:
    """Every incident the selected rules find in ``session``, in turn order."""
    config = config or Config()
    new_session()  # the last session's parsed texts go (analysis/session_cache.py)
    result = ScanResult(session=session)
    with fewer_collections():
        _run_rules(session, config, rules, result)
    result.incidents.sort(key=lambda i: (i.turn, i.code))
    return result


def _run_rules(session: Session, config: Config, rules: Iterable[RuleSpec] | None,
               result: ScanResult) -> None:
    for spec in rules if rules is not None else config.rules():
        try:
            findings = list(spec.run(session, config.params_for(spec)))
        except Exception as exc:  # a crashing rule must not stop the scan
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
            result.crashes.append(RuleCrash(spec.code, spec.slug, session.id, session.source,
                                            f"{type(exc).__name__} at {where}"))
            continue
        result.incidents.extend(to_incident(spec, session, f) for f in findings)


def scan_sessions(sessions: Iterable[Session], config: Config | None = None) -> list[ScanResult]:
    config = config or Config()
    rules = config.rules()
    return [scan_session(s, config, rules) for s in sessions]


def to_incident(spec: RuleSpec, session: Session, finding: Finding) -> Incident:
    turns = session.turns
    evidence: list[str] = []
    for o in finding.evidence:
        anchor = turns[o - 1].anchor if 0 < o <= len(turns) else None
        # opencode keeps a call and its result in one message: name each message once
        if anchor and anchor != finding.anchor and anchor not in evidence:
            evidence.append(anchor)
    return Incident(
        rule=spec.slug,
        code=spec.code,
        title=spec.title,
        severity=finding.severity,
        severity_reason=finding.severity_reason,
        session_id=session.id,
        source=session.source,
        agent=session.agent,
        turn=finding.turn,
        anchor=finding.anchor,
        evidence=evidence,
        evidence_turns=list(finding.evidence),
        message=finding.message,
        fingerprint=Incident.make_fingerprint(
            spec.code, session.id, finding.anchor,
            record_digest(turns[finding.turn - 1]) if 0 < finding.turn <= len(turns) else ""),
        facts=list(finding.facts),
    )
