"""GitHub Actions workflow commands: each finding becomes an annotation on the run's summary
(and on the file, when the transcript is part of the checkout)."""

from __future__ import annotations

from collections.abc import Iterator

from forensics.engine import ScanResult
from forensics.output import Printer, clean, locate

LEVELS = {"high": "error", "medium": "warning", "low": "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubPrinter(Printer):
    """An annotation per finding as its session is scanned; the unreadable sources at the end."""

    def add(self, result: ScanResult) -> str:
        lines = []
        for loc in locate(result):
            i = loc.incident
            props = [f"file={_escape_property(loc.path)}"]
            if loc.line is not None:
                props.append(f"line={loc.line}")
            props.append(f"title={_escape_property(f'{i.code} {i.rule}')}")
            message = f"{clean(i.message, self.opts)} (session {i.session_id}, {i.anchor})"
            lines.append(f"::{LEVELS.get(i.severity, 'warning')} {','.join(props)}::"
                         f"{_escape_data(message)}\n")
        return "".join(lines)

    def end(self) -> Iterator[str]:
        for err in self.opts.errors:
            yield f"::warning title=forensics::{_escape_data(str(err))}\n"
