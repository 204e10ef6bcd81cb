"""What ``forensics scan`` prints: one printer per output format, over the same scan results.

    printer_for(fmt, opts)               a format written as the scan goes: add(result), end()
    render(fmt, results, opts)           the whole document for one format, at once

A printer is given each session's result as soon as it is scanned and returns its text then
(line formats) or keeps it in a spool until ``end`` (document formats, whose findings come after
every session), so ``scan`` holds one session at a time, however many it reads.

Every format starts from ``locate``: each incident with the file and line its flagged turn came
from (when the format has lines), so that ``text``, ``github`` and ``sarif`` point at the same
place. Case-study formats (``markdown``, ``html``) are ``forensics.report``'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports ``Format`` at start-up: the engine loads when a scan runs
    from forensics.engine import ScanResult
    from forensics.findings import Incident

__all__ = ["CountingPrinter", "Format", "Located", "Printer", "RuleCounts", "Rendering", "locate",
           "located", "printer_for", "render"]


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


@dataclass
class RuleCounts:
    """How many sessions were printed, how many were clean, and the findings per rule: what a
    summary says, counted as the results go by."""

    sessions: int = 0
    clean: int = 0
    per_rule: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, result: ScanResult) -> None:
        self.sessions += 1
        self.clean += not result.incidents
        for i in result.incidents:
            self.per_rule[(i.code, i.rule)] = self.per_rule.get((i.code, i.rule), 0) + 1

    @property
    def incidents(self) -> int:
        return sum(self.per_rule.values())

    def most_frequent(self) -> list[tuple[str, str, int]]:
        """``(code, slug, count)`` per rule that found something, most frequent first."""
        return sorted(((c, s, n) for (c, s), n in self.per_rule.items()),
                      key=lambda t: (-t[2], t[0]))


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

    # ``errors``, ``baseline`` and ``hidden`` are read when a printer ends: a scan that streams
    # learns them only once every source is read.


class Printer:
    """One output format, written as the results come: ``add`` is the text of one session's
    result, given as soon as it is scanned; ``end`` is the rest, once every result is in."""

    def __init__(self, opts: Rendering) -> None:
        self.opts = opts

    def add(self, result: ScanResult) -> str:
        return ""

    def end(self) -> Iterator[str]:
        return iter(())


class CountingPrinter(Printer):
    """A printer whose end tells counts per rule (the summary line, ``--statistics``)."""

    def __init__(self, opts: Rendering) -> None:
        super().__init__(opts)
        self.counts = RuleCounts()

    def add(self, result: ScanResult) -> str:
        self.counts.add(result)
        return ""


def printer_for(fmt: Format | str, opts: Rendering) -> Printer:
    """The printer of a line or document format (not the case studies: ``forensics.report``)."""
    fmt = Format(fmt)
    if opts.statistics:  # ruff's --statistics: counts per rule instead of the findings
        if fmt in (Format.json, Format.jsonl):
            from forensics.output.machine import StatisticsJsonPrinter

            return StatisticsJsonPrinter(opts)
        from forensics.output.text import StatisticsPrinter

        return StatisticsPrinter(opts)
    if fmt is Format.text:
        from forensics.output.text import TextPrinter

        return TextPrinter(opts)
    if fmt is Format.json:
        from forensics.output.machine import JsonPrinter

        return JsonPrinter(opts)
    if fmt is Format.jsonl:
        from forensics.output.machine import JsonLinesPrinter

        return JsonLinesPrinter(opts)
    if fmt is Format.sarif:
        from forensics.output.sarif import SarifPrinter

        return SarifPrinter(opts)
    if fmt is Format.github:
        from forensics.output.github import GithubPrinter

        return GithubPrinter(opts)
    raise ValueError(f"{fmt.value} is a case-study format: forensics.report writes it")


def render(fmt: Format | str, results: Sequence[ScanResult], opts: Rendering) -> str:
    """The whole output of ``results`` in one format, as ``scan`` would stream it."""
    fmt = Format(fmt)
    if fmt in (Format.markdown, Format.html) and not opts.statistics:
        from forensics import report

        return report.render_sessions(results, fmt=fmt.value, redact=opts.redact)
    printer = printer_for(fmt, opts)
    parts = [printer.add(r) for r in results]
    parts.extend(printer.end())
    return "".join(parts)


def clean(text: str, opts: Rendering) -> str:
    """Transcript text as an output may quote it: secrets hidden unless ``--no-redact``."""
    if not opts.redact:
        return text
    from forensics.redact import redact

    return redact(text)
