"""The notebook API: sessions, incidents and turns as objects and polars DataFrames.

    >>> import forensics
    >>> report = forensics.scan("~/.claude/projects")     # a file, folder or archive
    >>> report.incidents.group_by("rule").len()
    >>> forensics.read_incidents(["sessions.tar.gz", "old.zip"], workers=2)

Everything reads the same inputs as ``forensics batch`` (files, folders, ``.zip``/``.tar``/
``.tar.gz``/``.tar.zst`` archives, read in place) and returns the tables documented in
``docs/schema.md``. Sessions and scan reports show as compact HTML tables in Jupyter.
"""

from __future__ import annotations

import forensics.model as _model

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.config import Config, load_config
from forensics.model import Session

if TYPE_CHECKING:
    import polars as pl

    from forensics.batch import Collected
    from forensics.engine import ScanResult

PathLike = str | os.PathLike[str]
PREVIEW_ROWS = 20
"""Rows shown by the HTML previews; the DataFrames hold everything."""


def _paths(paths: PathLike | Iterable[PathLike]) -> list[PathLike]:
    if isinstance(paths, (str, os.PathLike)):
        return [paths]
    return list(paths)


def _expand(p: PathLike) -> Path:
    return Path(os.path.expanduser(os.fspath(p)))


def iter_read(paths: PathLike | Iterable[PathLike], *,
              errors: list[dict[str, Any]] | None = None) -> Iterator[tuple[str, Session]]:
    """``(origin, session)`` for every session under ``paths``, one unit at a time.

    Units that cannot be read are appended to ``errors`` (rows of the ``errors`` table) when
    given, and skipped.
    """
    from forensics.archive import iter_units
    from forensics.batch import read_unit
    from forensics.errors import IngestError
    from forensics.ingest import handover

    problems: list = []
    for unit in iter_units([_expand(p) for p in _paths(paths)], problems):
        try:
            read = read_unit(unit)
        except IngestError as exc:
            if errors is not None:
                errors.append({"origin": unit.label, "path": exc.path, "line": exc.line,
                               "kind": "unreadable", "reason": exc.reason})
            continue
        if errors is not None:
            errors.extend({"origin": unit.label, "path": e.path, "line": e.line,
                           "kind": "unreadable", "reason": e.reason} for e in read.errors)
        for session in read.sessions or ():
            yield unit.label, session
    handover.forget()  # a subagent's read its file was not listed for: nothing is kept after
    if errors is not None:
        errors.extend({"origin": p.label, "path": p.label, "line": None, "kind": "archive",
                       "reason": p.reason} for p in problems)


def load(path: PathLike, *, format: str | None = None) -> list[Session]:
    """Every session in a file, folder or archive.

    Parameters
    ----------
    path
        A session file, a folder (agent data dir or any tree), or a ``.zip``/``.tar``/
        ``.tar.gz``/``.tar.zst`` archive, read in place.
    format
        Skip sniffing for a single file or folder (``claude-code``, ``codex``,
        ``opencode-export``…); archives are always sniffed member by member.

    Returns
    -------
    list of Session
        In source order.

    Raises
    ------
    IngestError
        When nothing could be read.
    """
    from forensics import ingest
    from forensics.archive import is_archive
    from forensics.errors import IngestError

    p = _expand(path)
    if not (p.is_file() and is_archive(p.name)):
        return ingest.load(p, format=format)
    errors: list[dict[str, Any]] = []
    sessions = [s for _origin, s in iter_read(p, errors=errors)]
    if not sessions:
        reason = errors[0]["reason"] if errors else "no agent sessions found in this archive"
        raise IngestError(str(p), reason)
    return sessions


def make_config(config: Config | PathLike | None = None, *,
                select: str | Sequence[str] | None = None,
                ignore: str | Sequence[str] | None = None) -> Config:
    """A ``Config`` from a config object or file, with rule selection applied on top."""
    if config is None:
        cfg = load_config(None)
    elif isinstance(config, Config):
        cfg = Config(select=list(config.select), ignore=list(config.ignore),
                     params=dict(config.params), source=config.source)
    else:
        cfg = load_config(Path(config))
    if select is not None:
        cfg.select = [select] if isinstance(select, str) else list(select)
    if ignore is not None:
        cfg.ignore = cfg.ignore + ([ignore] if isinstance(ignore, str) else list(ignore))
    cfg.rule_files()  # unknown rule names fail here, not later
    return cfg


@dataclass
class ScanReport:
    """Scanned sessions with their incidents; the tables are polars DataFrames.

    Attributes
    ----------
    results
        One ``forensics.engine.ScanResult`` per session (session, incidents, rule crashes).
    errors
        Sources that could not be read, as rows of the ``errors`` table.
    """

    results: list[ScanResult]
    errors: list[dict[str, Any]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    redact: bool = False
    """Pass text columns through the redaction helper (frames keep raw text by default: a
    notebook is where you look at what was really said)."""

    def _rows(self, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.redact:
            return list(rows)
        from forensics.frame import redact_row

        return [redact_row(r) for r in rows]

    @cached_property
    def incidents(self) -> pl.DataFrame:
        """One row per incident (``docs/schema.md``, table ``incidents``)."""
        from forensics.frame import INCIDENT_COLUMNS, frame, incident_rows

        return frame(self._rows(row for r, o in zip(self.results, self._origins())
                                for row in incident_rows(r, origin=o)), INCIDENT_COLUMNS)

    @property
    def harness_events(self) -> pl.DataFrame:
        """The incidents that are harness events (interruptions, provider errors, compactions:
        ``kind == "harness"``), not the assistant's mistakes."""
        import polars as pl

        return self.incidents.filter(pl.col("kind") == "harness")

    def harness_counts(self, by: str = "agent") -> pl.DataFrame:
        """Harness events per ``agent``, ``model`` or ``week``, one column per event."""
        return harness_counts(self.incidents, by)

    @cached_property
    def sessions(self) -> pl.DataFrame:
        """One row per session (table ``sessions``)."""
        from forensics.frame import SESSION_COLUMNS, frame, session_row

        return frame(self._rows(session_row(r, origin=o)
                                for r, o in zip(self.results, self._origins())),
                     SESSION_COLUMNS)

    @cached_property
    def turns(self) -> pl.DataFrame:
        """One row per turn of every session (table ``turns``)."""
        from forensics.frame import TURN_COLUMNS, frame, turn_rows

        return frame(self._rows(row for r in self.results for row in turn_rows(r.session)),
                     TURN_COLUMNS)

    def _origins(self) -> list[str]:
        return self.origins or [r.session.source for r in self.results]

    def session(self, session_id: str) -> Session:
        """The session with this id (prefix accepted when unambiguous)."""
        found = [r.session for r in self.results if r.session.id.startswith(session_id)]
        exact = [s for s in found if s.id == session_id]
        if len(exact) == 1 or len(found) == 1:
            return (exact or found)[0]
        raise KeyError(session_id if not found else f"{session_id} matches {len(found)} sessions")

    def result(self, session_id: str) -> ScanResult:
        """The scan result of one session (for ``forensics.report.render_incident``)."""
        target = self.session(session_id)
        return next(r for r in self.results if r.session is target)

    def __len__(self) -> int:
        return len(self.results)

    def __repr__(self) -> str:
        n = sum(len(r.incidents) for r in self.results)
        return (f"<ScanReport: {len(self.results)} sessions, {n} incidents, "
                f"{len(self.errors)} unreadable>")

    def _repr_html_(self) -> str:
        return report_html(self)


def harness_counts(incidents: pl.DataFrame, by: str = "agent") -> pl.DataFrame:
    """Harness events of an ``incidents`` table (``scan(…).incidents``, ``read_incidents``,
    ``incidents.parquet``) per ``agent``, ``model`` or ``week``: the batch index's tables."""
    from forensics.index import HARNESS_KEYS
    from forensics.index import harness_counts as count

    if by not in HARNESS_KEYS:
        raise ValueError(f"by must be one of {', '.join(HARNESS_KEYS)}, not {by!r}")
    return count(incidents, by)


def scan(path: PathLike | Iterable[PathLike], *, config: Config | PathLike | None = None,
         select: str | Sequence[str] | None = None,
         ignore: str | Sequence[str] | None = None, redact: bool = False) -> ScanReport:
    """Read and scan every session under ``path``.

    Parameters
    ----------
    path
        A session file, folder or archive (or several).
    config
        A ``Config``, or a ``forensics.toml``/``pyproject.toml`` path; default: the one found
        in the working folder, else every rule with its defaults.
    select, ignore
        Rule codes, code prefixes or slugs to run / to skip, on top of ``config``.
    redact
        Hide secrets in the frames' text columns (default: raw text).

    Returns
    -------
    ScanReport
        ``.incidents``, ``.sessions`` and ``.turns`` DataFrames and the raw ``.results``.
    """
    from forensics.engine import scan_session

    cfg = make_config(config, select=select, ignore=ignore)
    rules = cfg.rules()
    errors: list[dict[str, Any]] = []
    results, origins = [], []
    for origin, session in iter_read(path, errors=errors):
        results.append(scan_session(session, cfg, rules))
        origins.append(origin)
    return ScanReport(results=results, errors=errors, origins=origins, redact=redact)


def read_incidents(paths: PathLike | Iterable[PathLike], *, workers: int = 1,
                   config: Config | PathLike | None = None,
                   select: str | Sequence[str] | None = None,
                   ignore: str | Sequence[str] | None = None,
                   redact: bool = False) -> pl.DataFrame:
    """Incidents of every session under ``paths`` as one DataFrame (table ``incidents``).

    Parameters
    ----------
    paths
        Session files, folders and archives.
    workers
        Processes to scan with (the batch engine); ``1`` scans in this process.
    config, select, ignore, redact
        As for ``scan``.

    Returns
    -------
    polars.DataFrame
        Sorted by ``origin``, ``session_id``, ``turn``, ``code``.
    """
    from forensics.batch import collect
    from forensics.frame import INCIDENT_COLUMNS, frame_of_tuples

    cfg = make_config(config, select=select, ignore=ignore)
    rows = _IncidentTuples()
    collect([_expand(p) for p in _paths(paths)], workers=workers, config=cfg, redact=redact,
            max_case_sessions=0, checkpoint=rows.take, checkpoint_every=1)
    return frame_of_tuples(rows.sorted(), INCIDENT_COLUMNS)


class _IncidentTuples:
    """The incident rows of a ``read_incidents`` run, each kept as a tuple as soon as its unit
    is done (the batch's session and error rows are not needed and go at once), so the rows
    of a large archive wait for the frame in a fifth of the memory dicts take."""

    def __init__(self) -> None:
        from forensics.frame import INCIDENT_COLUMNS

        self.columns = INCIDENT_COLUMNS
        self.rows: list[tuple] = []
        self._taken = 0  # outcomes already emptied (``collect`` appends them in order)
        names = list(INCIDENT_COLUMNS)
        self._order = [names.index(c) for c in ("origin", "session_id", "turn", "code")]

    def take(self, got: Collected) -> None:
        """``collect``'s checkpoint, after every unit: move the new outcomes' incidents."""
        from forensics.frame import as_tuple

        for outcome in got.outcomes[self._taken:]:
            self.rows.extend(as_tuple(row, self.columns) for row in outcome.incidents)
            outcome.framed = outcome.session_count
            outcome.sessions, outcome.incidents, outcome.errors = [], [], []
        self._taken = len(got.outcomes)

    def sorted(self) -> list[tuple]:
        """By origin, session, turn and rule code, as the frame is documented to be. Equal keys
        come from one unit only (an origin is its unit's label), in that unit's own order."""
        o, s, t, c = self._order
        return sorted(self.rows, key=lambda r: (r[o], r[s], r[t], r[c]))


def read_turns(paths: PathLike | Iterable[PathLike], *, redact: bool = False) -> pl.DataFrame:
    """Every turn of every session under ``paths`` (table ``turns``).

    Parameters
    ----------
    paths
        Session files, folders and archives.

    Returns
    -------
    polars.DataFrame
        In source order, then turn order.
    """
    from forensics.frame import TURN_COLUMNS, frame, turn_rows

    rows = [row for _o, s in iter_read(paths) for row in turn_rows(s)]
    if redact:
        from forensics.frame import redact_row

        rows = [redact_row(r) for r in rows]
    return frame(rows, TURN_COLUMNS)


# -- HTML previews for Jupyter --------------------------------------------------------------------

_STYLE = ("<style>.fx-t{border-collapse:collapse;font-size:12px}"
          ".fx-t th,.fx-t td{padding:2px 6px;text-align:left;vertical-align:top;"
          "border-bottom:1px solid #ddd}.fx-high{color:#b91c1c;font-weight:600}"
          ".fx-medium{color:#ea580c}.fx-low{color:#ca8a04}</style>")


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]],
           classes: Iterable[str | None] | None = None) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row, cls in zip(rows, classes or iter(lambda: None, 0)):
        cells = "".join(f"<td>{escape('' if v is None else str(v))}</td>" for v in row)
        attr = f' class="{escape(cls)}"' if cls else ""
        body.append(f"<tr{attr}>{cells}</tr>")
    return f'<table class="fx-t"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _when(t: float | None) -> str:
    from forensics.timeline import utc_text

    return utc_text(t)


def session_html(session: Session) -> str:
    """A compact HTML view of one session: its facts and its first turns."""
    from forensics.timeline import summarize

    counts = session.counts()
    facts = [
        ("session", session.id), ("agent", f"{session.agent} {session.agent_version or ''}"),
        ("format", session.format), ("models", ", ".join(session.models)),
        ("project", session.project_dir), ("started", _when(session.started)),
        ("turns", f"{len(session.turns)} ({counts['user']} user, {counts['assistant']} "
                  f"assistant, {counts['tool_calls']} tool calls, {counts['failed_tools']} "
                  f"failed)"),
        ("read issues", len(session.issues)), ("source", session.source),
    ]
    head = _table(["", ""], [(k, v) for k, v in facts if v not in (None, "")])
    turns = _table(["#", "kind", "anchor", "summary"],
                   [(t.ordinal, t.kind, t.anchor, summarize(t, 100))
                    for t in session.turns[:PREVIEW_ROWS]])
    more = len(session.turns) - PREVIEW_ROWS
    tail = f"<p>… {more} more turns (<code>forensics.read_turns</code>)</p>" if more > 0 else ""
    return f"<div>{_STYLE}{head}{turns}{tail}</div>"


def report_html(report: ScanReport) -> str:
    """A compact HTML view of a scan: counts per rule and the first incidents."""
    from collections import Counter

    incidents = [(r, i) for r in report.results for i in r.incidents]
    per_rule = Counter((i.code, i.rule) for _r, i in incidents)
    summary = (f"<p><b>{len(report.results)}</b> sessions, <b>{len(incidents)}</b> incidents"
               f"{f', <b>{len(report.errors)}</b> unreadable sources' if report.errors else ''}"
               f"</p>")
    rules = _table(["code", "rule", "incidents"],
                   [(c, s, n) for (c, s), n in per_rule.most_common()])
    shown = incidents[:PREVIEW_ROWS]
    listed = _table(["severity", "code", "session", "turn", "anchor", "message"],
                    [(i.severity, i.code, i.session_id, i.turn, i.anchor, i.message)
                     for _r, i in shown], classes=[f"fx-{i.severity}" for _r, i in shown])
    more = len(incidents) - len(shown)
    tail = f"<p>… {more} more (<code>.incidents</code>)</p>" if more > 0 else ""
    return f"<div>{_STYLE}{summary}{rules if per_rule else ''}{listed if shown else ''}{tail}</div>"


_model.HTML_VIEW[:] = [session_html]  # Session._repr_html_ shows this view
