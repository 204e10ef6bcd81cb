"""``json`` (one document, the contract scripts rely on) and ``jsonl`` (one finding a line)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from forensics.engine import ScanResult
from forensics.findings import Evidence
from forensics.output import Located, Rendering, clean, located, rule_counts

SCHEMA_VERSION = 1
"""Version of the ``scan --format json`` document; bumped only on breaking changes."""


def finding_doc(loc: Located, opts: Rendering) -> dict[str, Any]:
    """One finding as both JSON formats write it (fields documented in the README)."""
    i = loc.incident
    return {
        "rule": i.rule,
        "code": i.code,
        "severity": i.severity,
        "severity_reason": clean(i.severity_reason, opts),
        "session_id": i.session_id,
        "source": i.source,
        "path": loc.path,
        "line": loc.line,
        "turn": i.turn,
        "anchor": i.anchor,
        "evidence": i.evidence,
        "message": clean(i.message, opts),
        "fingerprint": i.fingerprint,
        "facts": [fact_doc(f, opts) for f in i.facts],
    }


def fact_doc(fact: Evidence, opts: Rendering) -> dict[str, Any]:
    """One piece of a finding's typed evidence; transcript words (quote, command) redacted."""
    return {
        "kind": fact.kind,
        "role": fact.role,
        "turn": fact.turn,
        "anchor": fact.anchor,
        "quote": clean(fact.quote, opts),
        "command": clean(fact.command, opts) if fact.command is not None else None,
        "port": fact.port,
        "status": clean(fact.status, opts) if fact.status is not None else None,
    }


def session_doc(r: ScanResult) -> dict[str, Any]:
    s = r.session
    return {
        "id": s.id,
        "source": s.source,
        "agent": s.agent,
        "format": s.format,
        "parent_id": s.parent_id,
        "turns": len(s.turns),
        "issues": [str(i) for i in s.issues],
        "notes": s.notes,
        "rule_errors": [str(c) for c in r.crashes],
    }


def render_json(results: Sequence[ScanResult], opts: Rendering) -> str:
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "sessions": [session_doc(r) for r in results],
        "findings": [finding_doc(loc, opts) for loc in located(results)],
        "errors": [str(e) for e in opts.errors],
    }
    if opts.baseline is not None:
        doc["baseline"] = opts.baseline
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def render_jsonl(results: Sequence[ScanResult], opts: Rendering) -> str:
    """One finding per line, nothing else: ``jq``, ``grep`` and log shippers read it as is."""
    return "".join(orjson.dumps(finding_doc(loc, opts)).decode() + "\n"
                   for loc in located(results))


def render_statistics_json(results: Sequence[ScanResult], opts: Rendering) -> str:
    rows = [{"code": c, "rule": s, "count": n} for c, s, n in rule_counts(results)]
    return orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n"
