"""Baselines: accept today's findings so that later scans show only new ones (semgrep's and
ruff's habit for adopting a linter on an existing code base).

``forensics baseline PATH… -o forensics-baseline.json`` records the fingerprints of the findings;
``scan --baseline FILE`` hides every finding whose fingerprint is in it. Fingerprints
(``Incident.make_fingerprint``) come from the rule, the session id, the anchor and a digest of the
flagged record, so they survive an append to the transcript and a rerun on another machine.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import orjson

from forensics.engine import ScanResult
from forensics.errors import ConfigError

BASELINE_VERSION = 1
DEFAULT_BASELINE = "forensics-baseline.json"


def baseline_doc(results: Sequence[ScanResult]) -> dict:
    findings = sorted(
        ({"fingerprint": i.fingerprint, "code": i.code, "rule": i.rule,
          "session_id": i.session_id, "anchor": i.anchor}
         for r in results for i in r.incidents),
        key=lambda f: (f["session_id"], f["code"], f["anchor"], f["fingerprint"]))
    unique = list({f["fingerprint"]: f for f in findings}.values())
    return {"forensics_baseline": BASELINE_VERSION,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "findings": unique}


def write_baseline(results: Sequence[ScanResult], path: Path) -> int:
    """Write the baseline file; returns how many findings it records."""
    doc = baseline_doc(results)
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return len(doc["findings"])


def load_baseline(path: Path) -> set[str]:
    """The fingerprints a baseline file accepts; a file that is not one is a ``ConfigError``."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not a forensics baseline ({exc})") from None
    if not isinstance(doc, dict) or doc.get("forensics_baseline") != BASELINE_VERSION \
            or not isinstance(doc.get("findings"), list):
        raise ConfigError(f"{path}: not a forensics baseline (write one with "
                          "`forensics baseline PATH -o FILE`)")
    return {f["fingerprint"] for f in doc["findings"]
            if isinstance(f, dict) and isinstance(f.get("fingerprint"), str)}


def only_new(results: Sequence[ScanResult], known: set[str]) -> tuple[list[ScanResult], int]:
    """The results with the baseline's findings removed, and how many were removed."""
    out, hidden = [], 0
    for r in results:
        new = [i for i in r.incidents if i.fingerprint not in known]
        hidden += len(r.incidents) - len(new)
        out.append(ScanResult(session=r.session, incidents=new, crashes=r.crashes))
    return out, hidden
