"""SARIF 2.1.0: what code-scanning services (GitHub, GitLab, Azure DevOps) and IDE viewers read.

Where the source has lines (JSONL transcripts: Claude Code, Codex, ``opencode run`` streams) a
result points at the file and line of the flagged record; every result also names the session
and message as a logical location, the only address a record in a database or a JSON export
has. ``partialFingerprints`` carries forensics' own fingerprint, so a code-scanning service
tracks an incident across runs as ``--baseline`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from forensics.engine import ScanResult
from forensics.output import Located, Rendering, clean, located

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


def _result(loc: Located, index: dict[str, int], opts: Rendering) -> dict[str, Any]:
    i = loc.incident
    return {
        "ruleId": i.code,
        "ruleIndex": index[i.code],
        "level": LEVELS.get(i.severity, "warning"),
        "message": {"text": clean(i.message, opts)},
        "locations": [_location(loc)],
        "partialFingerprints": {FINGERPRINT_KEY: i.fingerprint},
        "properties": {"rule": i.rule, "severity": i.severity,
                       "severityReason": clean(i.severity_reason, opts), "sessionId": i.session_id,
                       "anchor": i.anchor, "turn": i.turn, "evidence": i.evidence},
    }


def render_sarif(results: Sequence[ScanResult], opts: Rendering) -> str:
    from forensics import __version__

    locs = located(results)
    rules = _rules({loc.incident.code for loc in locs})
    index = {r["id"]: n for n, r in enumerate(rules)}
    notifications = [{"level": "warning", "message": {"text": str(e)}} for e in opts.errors]
    notifications += [{"level": "warning", "message": {"text": str(issue)}}
                      for r in results for issue in r.session.issues[:50]]
    notifications += [{"level": "error", "message": {"text": str(c)}}
                      for r in results for c in r.crashes]
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "forensics", "version": __version__,
                                "semanticVersion": __version__, "rules": rules}},
            "invocations": [{"executionSuccessful": True,
                             "toolExecutionNotifications": notifications}],
            "results": [_result(loc, index, opts) for loc in locs],
        }],
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
