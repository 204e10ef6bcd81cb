"""SARIF 2.1.0: what code-scanning services (GitHub, GitLab, Azure DevOps) and IDE viewers read.

Where the source has lines (JSONL transcripts: Claude Code, Codex, ``opencode run`` streams) a
result points at the file and line of the flagged record; every result also names the session
and message as a logical location, the only address a record in a database or a JSON export
has. ``partialFingerprints`` carries forensics' own fingerprint, so a code-scanning service
tracks an incident across runs as ``--baseline`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import quote

from forensics.engine import ScanResult
from forensics.output import Located, Printer, Rendering, clean, locate
from forensics.output.spool import Spool, Streamed, write_json

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"high": "error", "medium": "warning", "low": "note"}
FINGERPRINT_KEY = "forensics/v1"


def artifact_uri(path: str) -> str:
    """A file as a SARIF URI: ``file://`` for an absolute path, a relative reference else."""
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    return quote(path.replace("\\", "/"))


def _rules(codes: set[str]) -> list[dict[str, Any]]:
    from forensics.rules import registry

    out = []
    for spec in sorted(registry().values(), key=lambda s: s.code):
        if spec.code not in codes:
            continue
        rule: dict[str, Any] = {
            "id": spec.code,
            "name": spec.slug,
            "shortDescription": {"text": spec.title},
            "fullDescription": {"text": spec.summary.strip() or spec.title},
            "defaultConfiguration": {"level": LEVELS.get(spec.severity, "warning")},
            "properties": {"tags": ["agent-session", spec.slug]},
        }
        if spec.remediation:
            rule["help"] = {"text": spec.remediation.strip()}
        out.append(rule)
    return out


def _location(loc: Located) -> dict[str, Any]:
    i = loc.incident
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(loc.path)}}
    if loc.line is not None:
        physical["region"] = {"startLine": loc.line}
    return {
        "physicalLocation": physical,
        "logicalLocations": [{"name": i.anchor, "fullyQualifiedName": f"{i.session_id}/{i.anchor}",
                              "kind": "object"}],
    }


def _result(loc: Located, opts: Rendering) -> dict[str, Any]:
    """One result, but for its ``ruleIndex``: the rules listed are known only at the end."""
    i = loc.incident
    return {
        "ruleId": i.code,
        "level": LEVELS.get(i.severity, "warning"),
        "message": {"text": clean(i.message, opts)},
        "locations": [_location(loc)],
        "partialFingerprints": {FINGERPRINT_KEY: i.fingerprint},
        "properties": {"rule": i.rule, "severity": i.severity,
                       "severityReason": clean(i.severity_reason, opts), "sessionId": i.session_id,
                       "anchor": i.anchor, "turn": i.turn, "evidence": i.evidence},
    }


def _indexed(results: Iterable[dict[str, Any]], index: dict[str, int]) -> Iterator[dict]:
    """Each result with its rule's place in the rules listed, right after its ``ruleId``."""
    for result in results:
        code = result.pop("ruleId")
        yield {"ruleId": code, "ruleIndex": index[code], **result}


class SarifPrinter(Printer):
    """One run: the rules that fired and the notifications come first, so results, record
    issues and crashed rules wait in spools until every session is scanned."""

    def __init__(self, opts: Rendering) -> None:
        super().__init__(opts)
        self._codes: set[str] = set()
        self._results, self._issues, self._crashes = Spool(), Spool(), Spool()

    def add(self, result: ScanResult) -> str:
        for loc in locate(result):
            self._codes.add(loc.incident.code)
            self._results.add(_result(loc, self.opts))
        for issue in result.session.issues[:50]:
            self._issues.add({"level": "warning", "message": {"text": str(issue)}})
        for crash in result.crashes:
            self._crashes.add({"level": "error", "message": {"text": str(crash)}})
        return ""

    def end(self) -> Iterator[str]:
        from forensics import __version__

        rules = _rules(self._codes)
        index = {r["id"]: n for n, r in enumerate(rules)}
        unreadable = [{"level": "warning", "message": {"text": str(e)}} for e in self.opts.errors]
        doc = {
            "$schema": SARIF_SCHEMA,
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {"name": "forensics", "version": __version__,
                                    "semanticVersion": __version__, "rules": rules}},
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications":
                                 Streamed(chain(unreadable, self._issues, self._crashes))}],
                "results": Streamed(_indexed(self._results, index)),
            }],
        }
        try:
            yield from write_json(doc)
            yield "\n"
        finally:
            for spool in (self._results, self._issues, self._crashes):
                spool.close()
