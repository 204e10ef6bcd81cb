"""The terminal output, after ruff: one line per finding, ``path:line`` first so an editor or a
terminal can jump to it, then a summary with the count per rule. Clean sessions are listed only
with ``-v``; colour only when asked for (the CLI decides: a terminal, no ``NO_COLOR``)."""

from __future__ import annotations

from collections.abc import Iterator

import typer

from forensics.engine import ScanResult
from forensics.output import CountingPrinter, Located, Rendering, RuleCounts, clean, locate

SEVERITY_COLOURS = {"high": "red", "medium": "yellow", "low": "blue"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def where(loc: Located) -> str:
    """``path:line`` where the source has lines, else the path."""
    return f"{loc.path}:{loc.line}" if loc.line is not None else loc.path


def finding_line(loc: Located, opts: Rendering) -> str:
    i = loc.incident

    def style(text: str, **kw) -> str:
        return typer.style(text, **kw) if opts.color else text

    head = style(f"{where(loc)}:", bold=True)
    code = style(i.code, fg="red", bold=True)
    severity = style(i.severity, fg=SEVERITY_COLOURS.get(i.severity))
    tail = style(f"[{i.session_id} {i.anchor}]", dim=True)
    return f"{head} {code} {i.rule} ({severity}) {clean(i.message, opts)} {tail}"


class TextPrinter(CountingPrinter):
    """Each session's findings as it is scanned, the summary at the end."""

    def add(self, result: ScanResult) -> str:
        super().add(result)
        opts, lines = self.opts, []
        for loc in locate(result):
            lines.append(finding_line(loc, opts))
            if opts.verbose:
                i = loc.incident
                if i.evidence:
                    more = " …" if len(i.evidence) > 6 else ""
                    lines.append(f"    evidence: {', '.join(i.evidence[:6])}{more}")
                lines.append(f"    severity: {clean(i.severity_reason, opts)}")
        if opts.verbose and not result.incidents:
            s = result.session
            parent = f", subagent of {s.parent_id}" if s.parent_id else ""
            lines.append(f"{s.source}: clean [{s.id}] ({s.agent}, "
                         f"{_plural(len(s.turns), 'turn')}{parent})")
        return "".join(line + "\n" for line in lines)

    def end(self) -> Iterator[str]:
        yield summary(self.counts, self.opts) + "\n"


def summary(counts: RuleCounts, opts: Rendering) -> str:
    """``Found 3 incidents in 1 session (FX002 duplicate-launch: 2, …)`` or ``No incidents``."""
    total = counts.incidents
    sessions = _plural(counts.sessions, "session")
    if total:
        per_rule = ", ".join(f"{code} {slug}: {n}" for code, slug, n in counts.most_frequent())
        text = f"Found {_plural(total, 'incident')} in {sessions} ({per_rule})"
        if counts.clean and not opts.verbose:
            text += f"; {counts.clean} clean (-v lists them)"
    else:
        text = f"No incidents in {sessions}"
    if opts.errors:
        text += f"; {len(opts.errors)} unreadable"
    if opts.hidden:
        text += f"; {opts.hidden} known in the baseline not shown"
    text += "."
    return typer.style(text, bold=True) if opts.color else text


class StatisticsPrinter(CountingPrinter):
    """ruff's ``--statistics``: a count per rule, most frequent first, then the summary."""

    def end(self) -> Iterator[str]:
        rows = self.counts.most_frequent()
        width = max((len(str(n)) for _c, _s, n in rows), default=1)
        lines = [f"{n:>{width}}\t{code}\t{slug}" for code, slug, n in rows]
        lines.append(summary(self.counts, self.opts))
        yield "\n".join(lines) + "\n"
