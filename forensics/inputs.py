"""From what a user names on the command line to sessions: one way for every command.

A name is a session file, a folder (any tree of sessions, an agent data dir), an archive
(``.zip``, ``.tar``, ``.tar.gz``, ``.tar.zst``…, read in place as ``batch`` reads it, through
``forensics.archive``), an ``archive!member`` label as outputs print it, or ``-`` for standard
input. ``~`` is expanded even when the shell did not (a quoted ``'~/.claude/projects'``). No name
at all means every agent's default location (``forensics.locations``).

What cannot be read is collected as ``IngestError``s, never raised, so that one bad input does not
hide the others; the caller decides what an empty result means.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from forensics import knowledge_cache
from forensics.errors import ForensicsError, IngestError
from forensics.model import Session

STDIN = "-"
STDIN_SOURCE = "<stdin>"


def expand(name: str) -> str:
    """``~`` and ``~user`` expanded; ``-`` and everything else unchanged."""
    return os.path.expanduser(name) if name.startswith("~") else name


def read_inputs(names: Sequence[str], *, format: str | None = None,
                errors: list[IngestError], stdin: BinaryIO | None = None) -> Iterator[Session]:
    """Every session under ``names``, in order; unreadable inputs go to ``errors``."""
    from forensics.ingest import handover

    for raw in names:
        name = expand(raw)
        if name == STDIN:
            yield from _stdin(stdin or sys.stdin.buffer, format, errors)
        elif _is_archive_name(name):
            yield from _archive(name, errors)
        else:
            yield from _path(Path(name), format, errors)
    handover.forget()  # a subagent file named alone: its parent's read of it is not wanted


def _is_archive_name(name: str) -> bool:
    from forensics.ingest import is_archive

    p = Path(name)
    if p.is_file():
        return is_archive(p.name)
    return not p.exists() and "!" in name and is_archive(name.partition("!")[0])


def _stdin(stream: BinaryIO, format: str | None, errors: list[IngestError]) -> list[Session]:
    from forensics.ingest import read_bytes

    try:
        return read_bytes(stream.read(), source=STDIN_SOURCE, format=format)
    except IngestError as exc:
        errors.append(exc)
        return []


def _archive(name: str, errors: list[IngestError]) -> Iterator[Session]:
    from forensics.archive import Problem, iter_units
    from forensics.batch import read_unit

    problems: list[Problem] = []
    found = False
    for unit in iter_units([name], problems):
        try:
            read = read_unit(unit)
        except IngestError as exc:
            errors.append(exc)
            continue
        errors.extend(read.errors)
        for s in read.sessions or ():
            found = True
            yield s
    errors.extend(IngestError(p.label, p.reason) for p in problems)
    if not found and not problems:
        errors.append(IngestError(name, "no agent sessions found in this archive"))


def _path(p: Path, format: str | None, errors: list[IngestError]) -> Iterator[Session]:
    from forensics.ingest import iter_sessions

    found = False
    try:
        for s in iter_sessions(p, format=format, errors=errors):
            found = True
            yield s
    except IngestError as exc:
        errors.append(exc)
        return
    except ForensicsError as exc:  # an unknown --input-format
        errors.append(IngestError(str(p), str(exc).lstrip(": ")))
        return
    if p.is_dir():  # archives in the folder are read as batch reads them
        for archive in _archives_under(p):
            for s in _archive(str(archive), errors):
                found = True
                yield s
    if not found and p.is_dir():
        errors.append(IngestError(str(p), "no agent sessions found in this folder"))


def _archives_under(root: Path) -> list[Path]:
    """Archives in a folder tree, not looking inside opencode data dirs (their storage trees
    and snapshot repositories hold many files and no archives)."""
    from forensics.ingest import is_archive
    from forensics.ingest.sniff import is_opencode_tree

    out = []
    for dirpath, dirs, names in os.walk(root):
        here = Path(dirpath)
        if is_opencode_tree(here) or any(n.startswith("opencode") and n.endswith(".db")
                                         for n in names):
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d != ".git")
        out.extend(here / n for n in sorted(names) if is_archive(n))
    return out


# -- filters ------------------------------------------------------------------------------------


_RELATIVE = knowledge_cache.compile(r"^(\d+)([dhw])$")


def parse_when(text: str, *, end_of_day: bool = False, now: dt.datetime | None = None) -> float:
    """A ``--since``/``--until`` value as Unix time: ``2026-11-30``, ``20261130``, an ISO
    date-time, or ``7d`` / ``12h`` / ``2w`` ago. A date alone means its start (``--until``: its
    end), in local time."""
    text = text.strip()
    now = now or dt.datetime.now().astimezone()
    m = _RELATIVE.match(text)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        delta = {"d": dt.timedelta(days=n), "h": dt.timedelta(hours=n),
                 "w": dt.timedelta(weeks=n)}[unit]
        return (now - delta).timestamp()
    if re.fullmatch(r"\d{8}", text):
        text = f"{text[:4]}-{text[4:6]}-{text[6:]}"
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            day = dt.datetime.fromisoformat(text).astimezone()
            if end_of_day:
                day += dt.timedelta(days=1)
            return day.timestamp()
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ForensicsError(f"{text!r} is not a date: use 2026-11-30, 20261130, an ISO "
                             "date-time or 7d / 12h / 2w") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.timestamp()


AGENT_ALIASES = {"claude": "claude-code", "claude-code": "claude-code", "codex": "codex",
                 "opencode": "opencode", "gemini": "gemini-cli", "qwen": "qwen-code",
                 "copilot": "copilot-cli", "roo": "cline", "kilo": "cline"}


@dataclass
class SessionFilter:
    """``--since``, ``--until``, ``--project``, ``--agent``: which sessions a command keeps."""

    since: float | None = None
    until: float | None = None
    projects: tuple[str, ...] = ()
    """Substrings of the session's project folder (or of its source path)."""
    agents: tuple[str, ...] = ()

    @classmethod
    def parse(cls, since: str | None, until: str | None, projects: Sequence[str] | None,
              agents: Sequence[str] | None) -> SessionFilter:
        return cls(since=parse_when(since) if since else None,
                   until=parse_when(until, end_of_day=True) if until else None,
                   projects=tuple(expand(p) for p in projects or ()),
                   agents=tuple(AGENT_ALIASES.get(a.lower(), a.lower()) for a in agents or ()))

    @property
    def active(self) -> bool:
        return bool(self.since or self.until or self.projects or self.agents)

    def keeps(self, s: Session) -> bool:
        if self.agents and s.agent not in self.agents:
            return False
        if self.projects:
            where = s.project_dir or s.source
            if not any(p in where for p in self.projects):
                return False
        last = s.ended if s.ended is not None else s.started
        if self.since is not None and (last is None or last < self.since):
            return False
        if self.until is not None and (s.started is None or s.started >= self.until):
            return False
        return True


def inputs_or_defaults(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``names``, or the default locations found here; the second item says what was found
    where (empty when names were given)."""
    if names:
        return list(names), []
    from forensics.locations import describe, discover

    found = discover()
    if not found:
        from forensics.locations import table

        looked = sorted({str(p) for loc in table() for p in _expanded(loc)})
        raise ForensicsError("no path given and no agent data in the default locations "
                             f"(looked in {', '.join(looked)})")
    return [str(f.path) for f in found], [describe(found)]


def _expanded(loc) -> list[Path]:
    from forensics.locations import expand as expand_template
    from forensics.locations import platform_family

    if platform_family() not in loc.platforms:
        return []
    return expand_template(loc.template, os.environ, several=loc.several)
