"""``json`` (one document, the contract scripts rely on) and ``jsonl`` (one finding a line)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from forensics.engine import ScanResult
from forensics.findings import Evidence
from forensics.output import CountingPrinter, Located, Printer, Rendering, clean, locate
from forensics.output.spool import Spool, Streamed, write_json

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


class JsonPrinter(Printer):
    """The one document: sessions, then findings, then what could not be read."""

    def __init__(self, opts: Rendering) -> None:
        super().__init__(opts)
        self._sessions, self._findings = Spool(), Spool()

    def add(self, result: ScanResult) -> str:
        self._sessions.add(session_doc(result))
        for loc in locate(result):
            self._findings.add(finding_doc(loc, self.opts))
        return ""

    def end(self) -> Iterator[str]:
        doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "sessions": Streamed(self._sessions),
            "findings": Streamed(self._findings),
            "errors": [str(e) for e in self.opts.errors],
        }
        if self.opts.baseline is not None:
            doc["baseline"] = self.opts.baseline
        try:
            yield from write_json(doc)
            yield "\n"
        finally:
            self._sessions.close()
            self._findings.close()


class JsonLinesPrinter(Printer):
    """One finding per line, nothing else: ``jq``, ``grep`` and log shippers read it as is."""

    def add(self, result: ScanResult) -> str:
        return "".join(orjson.dumps(finding_doc(loc, self.opts)).decode() + "\n"
                       for loc in locate(result))


class StatisticsJsonPrinter(CountingPrinter):
    """``--statistics`` as JSON: a count per rule, most frequent first."""

    def end(self) -> Iterator[str]:
        rows = [{"code": c, "rule": s, "count": n} for c, s, n in self.counts.most_frequent()]
        yield orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n"
