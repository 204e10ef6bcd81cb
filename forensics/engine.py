"""Run the selected rules over a session; a rule that raises is reported, the others still run."""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field

from forensics.config import Config
from forensics.findings import Finding, Incident, record_digest
from forensics.model import Session
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


def scan_session(session: Session, config: Config | None = None,
                 rules: Iterable[RuleSpec] | None = None) -> ScanResult:
    """Every incident the selected rules find in ``session``, in turn order."""
    config = config or Config()
    result = ScanResult(session=session)
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
    result.incidents.sort(key=lambda i: (i.turn, i.code))
    return result


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
    )
