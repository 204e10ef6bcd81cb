"""Case studies for batch incidents, written by ``forensics.report`` when it is installed.

The batch works without the reporter; when ``forensics.report.write_reports`` exists, each
session with incidents gets its case studies under ``OUT/cases/`` and every incident row links
to its page. This module is the one place that knows the reporter's entry point.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from forensics.remote import is_url


def _reporter() -> Any | None:
    try:
        from forensics import report
    except ImportError:
        return None
    return report if hasattr(report, "write_reports") else None


def available() -> bool:
    return _reporter() is not None


def write_cases(result: Any, cases_dir: Path | str, *, origin: str = "",
                redact: bool = True) -> dict[str, str]:
    """Write the case studies of one scanned session; fingerprint -> path relative to OUT.

    Each source gets its own folder under ``cases_dir`` (two sources may hold sessions with the
    same id); ``cases_dir`` may be an fsspec URL (``forensics.destination``). A reporter or
    upload failure costs this session its links, never the batch.
    """
    report = _reporter()
    if report is None or not result.incidents:
        return {}
    if is_url(cases_dir):
        from forensics.destination import write_through

        try:
            return write_through(str(cases_dir), lambda local: write_cases(
                result, local, origin=origin, redact=redact))
        except Exception:
            return {}
    cases_dir = Path(cases_dir)
    folder = cases_dir / hashlib.blake2b(origin.encode(), digest_size=6).hexdigest()
    try:
        # a case page links back to OUT/index.html: from OUT/cases/<hash>/<session>/
        written = [Path(p) for p in report.write_reports([result], folder, redact=redact,
                                                         index_href="../../../index.{ext}")]
    except Exception:
        return {}
    listed = {i.fingerprint for i in report.harness_events(result)}
    return _links(result.incidents, written, cases_dir.parent, listed)


def _links(incidents: list[Any], written: list[Path], base: Path,
           listed: set[str] = frozenset()) -> dict[str, str]:
    """Incident -> its page. The reporter writes, per session folder, ``index.*`` and then one
    file per format for each told incident in order; prefer the HTML page. Harness events
    (``listed``) have no page of their own: they link to the session page that lists them."""
    def rel(p: Path) -> str:
        return p.relative_to(base).as_posix()

    index = [p for p in written if p.name.startswith("index.")]
    pages = [p for p in written if p.suffix in (".md", ".html") and p not in index]
    formats = max(1, len(index))
    fallback = next((p for p in index if p.suffix == ".html"), index[0] if index else None)
    out: dict[str, str] = {}
    if fallback is not None:
        out.update({inc.fingerprint: rel(fallback) for inc in incidents
                    if inc.fingerprint in listed})
    told = [inc for inc in incidents if inc.fingerprint not in listed]
    for i, inc in enumerate(told):
        group = pages[i * formats:(i + 1) * formats] if len(pages) == formats * len(told) \
            else []
        page = next((p for p in group if p.suffix == ".html"), group[0] if group else fallback)
        if page is not None:
            out[inc.fingerprint] = rel(page)
    return out
