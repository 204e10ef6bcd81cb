"""What ``forensics scan`` prints: one renderer per output format, over the same scan results.

    render(fmt, results, errors, ...)     the whole document for one format

Every format starts from ``locate``: each incident with the file and line its flagged turn came
from (when the format has lines), so that ``text``, ``github`` and ``sarif`` point at the same
place. Case-study formats (``markdown``, ``html``) are ``forensics.report``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports ``Format`` at start-up: the engine loads when a scan runs
    from forensics.engine import ScanResult
    from forensics.findings import Incident

__all__ = ["Format", "Located", "Rendering", "locate", "located", "render", "rule_counts"]


class Format(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"
    sarif = "sarif"
    github = "github"
    markdown = "markdown"
    html = "html"


@dataclass(frozen=True)
class Located:
    """An incident and where its flagged record is: a file and, for line formats, a line."""

    incident: Incident
    path: str
    line: int | None
    """None for a database or a JSON document: only the session and anchor name the record."""


def locate(result: ScanResult) -> list[Located]:
    """The incidents of one session with their file and line, in turn order."""
    session = result.session
    out = []
    for incident in result.incidents:
        turns = session.turns
        turn = turns[incident.turn - 1] if 0 < incident.turn <= len(turns) else None
        path = (turn.file if turn is not None and turn.file else None) or session.source
        out.append(Located(incident, path, turn.line if turn is not None else None))
    return out


def located(results: Sequence[ScanResult]) -> list[Located]:
    return [loc for r in results for loc in locate(r)]


def rule_counts(results: Sequence[ScanResult]) -> list[tuple[str, str, int]]:
    """``(code, slug, count)`` per rule that found something, most frequent first."""
    counts: dict[tuple[str, str], int] = {}
    for r in results:
        for i in r.incidents:
            counts[(i.code, i.rule)] = counts.get((i.code, i.rule), 0) + 1
    return sorted(((c, s, n) for (c, s), n in counts.items()), key=lambda t: (-t[2], t[0]))


@dataclass
class Rendering:
    """What a renderer needs besides the results."""

    errors: Sequence[object] = ()
    """Sources that could not be read (their ``str()`` names path and line)."""
    redact: bool = True
    color: bool = False
    verbose: bool = False
    statistics: bool = False
    baseline: dict[str, object] | None = None
    """When a baseline filtered the findings: counts of what it hid."""
    hidden: int = 0
    """Findings the baseline hid."""


def render(fmt: Format | str, results: Sequence[ScanResult], opts: Rendering) -> str:
    fmt = Format(fmt)
    if opts.statistics:  # ruff's --statistics: counts per rule instead of the findings
        from forensics.output.machine import render_statistics_json
        from forensics.output.text import render_statistics

        if fmt in (Format.json, Format.jsonl):
            return render_statistics_json(results, opts)
        return render_statistics(results, opts)
    if fmt is Format.text:
        from forensics.output.text import render_text

        return render_text(results, opts)
    if fmt is Format.json:
        from forensics.output.machine import render_json

        return render_json(results, opts)
    if fmt is Format.jsonl:
        from forensics.output.machine import render_jsonl

        return render_jsonl(results, opts)
    if fmt is Format.sarif:
        from forensics.output.sarif import render_sarif

        return render_sarif(results, opts)
    if fmt is Format.github:
        from forensics.output.github import render_github

        return render_github(results, opts)
    from forensics import report

    return report.render_sessions(results, fmt=fmt.value, redact=opts.redact)


def clean(text: str, opts: Rendering) -> str:
    """Transcript text as an output may quote it: secrets hidden unless ``--no-redact``."""
    if not opts.redact:
        return text
    from forensics.redact import redact

    return redact(text)
