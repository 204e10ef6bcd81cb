"""Scan many sessions at once (folders, data dirs, archives) on every core, incrementally.

``run_batch`` lists the units under its paths (``forensics.archive``), hands them in chunks to
worker processes, and writes the tables of ``forensics.frame`` plus an index page to OUT.
Workers read and scan a unit themselves and send back only compact rows (one per session, one
per incident, one per problem), never sessions, so the main process stays light and two
workers do nearly twice the work of one.

Incremental: ``OUT/state.json`` keeps, per unit, a blake2b hash of its bytes (and a cheap stamp:
size and mtime, or a zip CRC). A rerun skips a unit whose stamp or hash is unchanged and keeps its
previous rows; ``full=True`` rescans everything, and so does a change of forensics version, rule
files, config or redaction (all in the state's key).

Faults: the tables and the state are checkpointed every ``CHECKPOINT_EVERY`` sources (written
to a temporary name, then renamed), so a batch that is killed leaves a state its rerun continues
from. SIGINT and SIGTERM end the workers before the batch stops; workers also die with the main
process (Linux ``PR_SET_PDEATHSIG``), so a ``kill -9`` leaves none writing.

A source that cannot be read becomes a row in ``errors.ndjson`` and a line in the summary; it
never stops the batch. Every text column quoting a transcript is redacted unless
``redact=False``; case studies are written for at most ``MAX_CASE_SESSIONS`` sessions.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from forensics.archive import (
    DEFAULT_LIMITS,
    Limits,
    MemberTree,
    Problem,
    Unit,
    clean_member,
    iter_units,
    opencode_dir_files,
)
from forensics.config import Config
from forensics.errors import ForensicsError, IngestError, crash_text
from forensics.frame import (
    ERROR_COLUMNS,
    INCIDENT_COLUMNS,
    SCHEMA_VERSION,
    SESSION_COLUMNS,
    incident_rows,
    session_row,
)
from forensics.index import VIEW_FILE
from forensics.inputs import SessionFilter

if TYPE_CHECKING:  # the pool's modules load only when a pool runs (a rerun starts none)
    from concurrent.futures import Future, ProcessPoolExecutor

    import polars as pl

STATE_FILE = "state.json"
CHECKPOINT_EVERY = 500
"""Sources between two checkpoints of the tables and state (``FORENSICS_CHECKPOINT_EVERY``)."""
MAX_CASE_SESSIONS = 2000
"""Sessions that get case studies in one batch; past it incidents are in the tables only (a
100,000-session archive would otherwise write gigabytes of pages before any table)."""
TABLE_FILES = ("incidents.parquet", "incidents.ndjson", "sessions.parquet", "sessions.ndjson",
               "errors.ndjson")
OUTPUT_FILES = (*TABLE_FILES, "index.md", "index.html", VIEW_FILE)
PREVIOUS_RUN = (STATE_FILE, "incidents.parquet", "sessions.parquet", "errors.ndjson",
                "incidents.ndjson", "sessions.ndjson", VIEW_FILE)
"""What a rerun reads back from OUT: the state, the rows it carries over, the fingerprints it
compares with (fetched from a URL before the batch starts)."""


# -- what a worker sends back -------------------------------------------------------------------


@dataclass
class UnitOutcome:
    """The compact result of reading and scanning one unit."""

    label: str
    hash: str | None = None
    stamp: str | None = None
    status: str = "scanned"
    """``scanned``, ``skipped`` (unchanged), ``ignored`` (not a session log) or ``failed``."""
    sessions: list[dict[str, Any]] = field(default_factory=list)
    incidents: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    framed: int | None = None
    """Set when a checkpoint moved this outcome's rows into the batch's frames
    (``Collected.frames``): the number of sessions it had; its row lists are then empty."""

    @property
    def session_count(self) -> int:
        return len(self.sessions) if self.framed is None else self.framed


def _error_row(origin: str, path: str, reason: str, *, kind: str,
               line: int | None = None) -> dict[str, Any]:
    return {"origin": origin, "path": path, "line": line, "kind": kind, "reason": reason}


def _digest(chunks: Iterable[bytes]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for c in chunks:
        h.update(c)
    return h.hexdigest()


@dataclass
class UnitRead:
    """What reading one unit gave: its sessions (None when unchanged or not a session log)."""

    sessions: list | None
    hash: str
    errors: list[IngestError] = field(default_factory=list)
    ignored: bool = False


def read_unit(unit: Unit, *, known_hash: str | None = None) -> UnitRead:
    """The sessions of one unit, unless its hash equals ``known_hash`` (unchanged since the last
    run) or it is no session log at all (a ``.json`` of another shape, an empty file, a
    non-opencode SQLite file).

    Raises ``IngestError`` when the unit holds nothing readable.
    """
    from forensics import ingest
    from forensics.ingest import handover
    from forensics.ingest.sniff import HEAD_BYTES, SQLITE_MAGIC, sniff_bytes

    errors: list[IngestError] = []
    if unit.kind == "file":
        assert unit.blob is not None
        try:
            data = unit.blob.read()
        except OSError as exc:
            raise IngestError(unit.label, exc.strerror or str(exc)) from None
        except Exception as exc:  # zip CRC errors, truncated tar members
            raise IngestError(unit.label, f"cannot read archive member: {exc}") from None
        wal = Path(f"{unit.blob.path}-wal") if unit.blob.where == "disk" else None
        extra = [wal.read_bytes()] if wal is not None and data.startswith(SQLITE_MAGIC) \
            and wal.is_file() else []
        digest = _digest([data, *extra])
        if digest == known_hash:
            return UnitRead(None, digest)
        name = unit.blob.name
        if data.startswith(SQLITE_MAGIC):
            if not name.startswith("opencode"):
                return UnitRead(None, digest, ignored=True)
            if unit.blob.where == "disk":
                return UnitRead(ingest.read_sqlite(Path(unit.blob.path)), digest)
            return UnitRead(ingest.read_bytes(data, source=unit.label), digest)
        if not data.strip() or (name.endswith(".json")
                                and sniff_bytes(data[:HEAD_BYTES]) is None):
            return UnitRead(None, digest, ignored=True)
        if unit.blob.where == "disk" and handover.holds(unit.label):
            handed = handover.take(unit.label, data, None)  # its parent's ledger read it
            if handed is not None:
                return UnitRead(handed, digest)
        return UnitRead(ingest.read_bytes(data, source=unit.label), digest)
    if unit.kind == "task":
        return _read_task(unit, known_hash)
    if unit.kind == "opencode-dir":
        root = Path(unit.path)
        digest = _digest(str(p.relative_to(root.parent)).encode() + b"\0" + p.read_bytes()
                         for p in opencode_dir_files(root))
        if digest == known_hash:
            return UnitRead(None, digest)
        sessions = list(ingest.iter_sessions(root, errors=errors))
        if not sessions and errors:
            raise errors[0]
        return UnitRead(sessions, digest, errors)
    # A storage tree inside an archive, with the data dir's databases.
    contents = {rel: blob.read() for rel, blob in unit.files}
    dbs = [blob.read() for blob in unit.databases]
    digest = _digest([rel.encode() + b"\0" + data for rel, data in contents.items()] + dbs)
    if digest == known_hash:
        return UnitRead(None, digest)
    sessions = []
    seen: set[str] = set()
    for blob, data in zip(unit.databases, dbs):
        try:
            source = f"{blob.path}!{clean_member(blob.member)}" if blob.member else blob.path
            for s in ingest.read_bytes(data, source=source):
                seen.add(s.id)
                sessions.append(s)
        except IngestError as exc:
            errors.append(exc)
    tree = MemberTree(unit.path or unit.label,
                      ((rel, _Inline(data)) for rel, data in contents.items()))
    try:
        sessions.extend(s for s in ingest.read_tree(tree) if s.id not in seen)
    except IngestError as exc:
        if not sessions:
            raise
        errors.append(exc)
    return UnitRead(sessions, digest, errors)


def _read_task(unit: Unit, known_hash: str | None) -> UnitRead:
    """A Cline-family task folder: one session when a file has a task's content, else the
    files read one by one (a ``ui_messages.json`` of some other tool)."""
    from forensics import ingest
    from forensics.ingest import cline
    from forensics.ingest.sniff import HEAD_BYTES, sniff_bytes

    contents: dict[str, bytes] = {}
    for name, blob in unit.files:
        try:
            contents[name] = blob.read()
        except OSError as exc:
            raise IngestError(f"{unit.label}/{name}", exc.strerror or str(exc)) from None
        except Exception as exc:  # zip CRC errors, truncated tar members
            raise IngestError(f"{unit.label}/{name}",
                              f"cannot read archive member: {exc}") from None
    digest = _digest([name.encode() + b"\0" + data for name, data in contents.items()])
    if digest == known_hash:
        return UnitRead(None, digest)
    if any(sniff_bytes(data[:HEAD_BYTES]) == "cline" for name, data in contents.items()
           if name != "task_metadata.json"):
        label = unit.path or unit.label
        return UnitRead(ingest.isolated(label, lambda: cline.read_task_files(contents, label)),
                        digest)
    sessions, errors = [], []
    for name, data in contents.items():
        if not data.strip() or sniff_bytes(data[:HEAD_BYTES]) is None:
            continue
        try:
            sessions.extend(ingest.read_bytes(data, source=f"{unit.label}/{name}"))
        except IngestError as exc:
            errors.append(exc)
    if not sessions and errors:
        raise errors[0]
    return UnitRead(sessions or None, digest, errors, ignored=not sessions and not errors)


class _Inline:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data


# -- the worker side ----------------------------------------------------------------------------

_worker: dict[str, Any] = {}


def _init_worker(config: Config, cases_dir: str | None,
                 options: dict[str, Any] | None = None) -> None:
    """Once per process: keep the config (its rules are resolved, which imports every rule
    module, by the first session scanned: a rerun that reads no source imports none).

    ``options``: ``redact`` (default True), ``case_sessions`` (how many sessions this worker
    may write case studies for), ``keep`` (which sessions to keep: ``--since``,
    ``--agent``…) and ``limits`` (archive limits, for a cluster worker that lists a compressed
    tar itself)."""
    from forensics.archive import _zip

    _zip.cache_clear()  # a forked worker must not share the parent's open zip file offsets
    options = options or {}
    _worker["config"] = config
    _worker["rules"] = None
    _worker["cases_dir"] = cases_dir
    _worker["redact"] = options.get("redact", True)
    if config.secret_patterns:  # a spawned worker starts without the parent's extra patterns
        from forensics.redact import use_extra_files

        use_extra_files(config.secret_patterns)
    _worker["cases_left"] = options.get("case_sessions", MAX_CASE_SESSIONS)
    _worker["keep"] = options.get("keep")


def _die_with_parent(parent: int | None) -> None:
    """In a pool worker: leave Ctrl-C to the main process (which ends the pool), and die when
    the main process dies, even by ``kill -9`` (Linux), instead of reading on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if parent is not None and os.getppid() != parent:  # died before prctl took effect
            os._exit(1)


def _init_pool_worker(config: Config, cases_dir: str | None,
                      options: dict[str, Any] | None = None) -> None:
    _die_with_parent((options or {}).get("parent"))
    _init_worker(config, cases_dir, options)


def _process(unit: Unit, known_hash: str | None) -> UnitOutcome:
    from forensics.engine import scan_session

    out = UnitOutcome(label=unit.label, stamp=unit.stamp)
    try:
        read = read_unit(unit, known_hash=known_hash)
    except IngestError as exc:
        out.status = "failed"
        out.errors.append(_error_row(unit.label, exc.path, exc.reason, kind="unreadable",
                                     line=exc.line))
        return _redact_outcome(out)
    except Exception as exc:  # a reader bug must not stop the batch
        out.status = "failed"
        out.errors.append(_error_row(unit.label, unit.label,
                                     f"reader crashed: {crash_text(exc)}", kind="crash"))
        return _redact_outcome(out)
    out.hash = read.hash
    if read.sessions is None:
        out.status = "ignored" if read.ignored else "skipped"
        return out
    for exc in read.errors:
        out.errors.append(_error_row(unit.label, exc.path, exc.reason, kind="unreadable",
                                     line=exc.line))
    config, keep = _worker["config"], _worker.get("keep")
    rules = _worker["rules"]
    if rules is None:
        rules = _worker["rules"] = config.rules()
    for session in read.sessions:
        if keep is not None and not keep.keeps(session):
            continue
        result = scan_session(session, config, rules)
        cases = _write_cases(result, _worker.get("cases_dir"), unit.label)
        out.sessions.append(session_row(result, origin=unit.label))
        out.incidents.extend(incident_rows(result, origin=unit.label, cases=cases))
        for crash in result.crashes:
            out.errors.append(_error_row(unit.label, crash.source, str(crash), kind="rule-crash"))
    return _redact_outcome(out)


def _redact_outcome(out: UnitOutcome) -> UnitOutcome:
    """Every text cell that may quote a transcript (message, title, project, model, issues…)
    through the redaction helper, unless the batch runs with ``redact=False``."""
    if not _worker.get("redact", True):
        return out
    from forensics.frame import redact_row

    for rows in (out.sessions, out.incidents, out.errors):
        for row in rows:
            redact_row(row)
    return out


def _write_cases(result, cases_dir: str | None, origin: str) -> dict[str, str]:
    """Case studies for the session's incidents when the report package is installed (and this
    worker's share of ``MAX_CASE_SESSIONS`` is not used up): fingerprint -> path under OUT."""
    if not cases_dir or not result.incidents or _worker.get("cases_left", 1) <= 0:
        return {}
    from forensics import cases

    _worker["cases_left"] = _worker.get("cases_left", 1) - 1
    return cases.write_cases(result, cases_dir, origin=origin,
                             redact=_worker.get("redact", True))


def _process_chunk(chunk: list[tuple[Unit, str | None]]) -> list[UnitOutcome]:
    return [_process(unit, known) for unit, known in chunk]


# -- progress -----------------------------------------------------------------------------------


class Progress:
    """One stderr line: sources done/total, sessions, incidents, rate, ETA. Redrawn at most
    ten times a second; silent when disabled."""

    def __init__(self, enabled: bool, stream=None, *, sources: bool = True) -> None:
        self.enabled = enabled
        self.sources = sources
        """False: a run over sessions one at a time (``scan``), whose line counts only them."""
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.last = 0.0
        self.width = 0

    def update(self, done: int, total: int | None, sessions: int, incidents: int, *,
               final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < 0.1:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = sessions / elapsed
        of = f"/{total}" if total else ""
        eta = ""
        if total and done and not final:
            eta = f" · ETA {_clock((total - done) * elapsed / done)}"
        line = (f"{done}{of} sources · " if self.sources else "") + (
            f"{sessions} sessions · {incidents} incidents · {rate:.1f} sessions/s{eta}")
        pad = " " * max(self.width - len(line), 0)
        self.width = len(line)
        self.stream.write(f"\r{line}{pad}" + ("\n" if final else ""))
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    return f"{seconds // 60}:{seconds % 60:02d}"


# -- the main side ------------------------------------------------------------------------------


@dataclass
class Collected:
    """Rows gathered from every unit, before they are written anywhere."""

    outcomes: list[UnitOutcome] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    workers: int = 1
    elapsed: float = 0.0
    lost: str | None = None
    """Why the executor stopped before every unit was done (its scheduler went away)."""
    framed: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    """Per table, frames of the rows that checkpoints took out of the outcomes (``frames``)."""

    def rows(self, kind: str) -> list[dict[str, Any]]:
        """The rows of ``kind`` still held by the outcomes (all of them unless ``frames`` ran)."""
        return [row for o in self.outcomes for row in getattr(o, kind)]

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every row gathered so far, one frame per table, in the order of the units' labels
        (each unit's rows in its own order). The rows still in outcomes become frames here and
        leave them, so a checkpoint turns each row into columns once (not every row so far
        again) and the main process holds columns instead of dicts."""
        import polars as pl

        from forensics.frame import frame

        for kind, columns in TABLE_COLUMNS.items():
            rows, units = [], []
            for o in self.outcomes:
                if o.framed is None:
                    got = getattr(o, kind)
                    rows.extend(got)
                    units.extend([o.label] * len(got))
            if rows:
                self.framed.setdefault(kind, []).append(
                    frame(rows, columns).with_columns(pl.Series(_UNIT, units, dtype=pl.String)))
        for o in self.outcomes:
            if o.framed is None:
                o.framed = len(o.sessions)
                o.sessions, o.incidents, o.errors = [], [], []
        out = {}
        for kind, columns in TABLE_COLUMNS.items():
            parts = self.framed.get(kind) or [frame([], columns).with_columns(
                pl.Series(_UNIT, [], dtype=pl.String))]
            whole = pl.concat(parts, rechunk=True) if len(parts) > 1 else parts[0]
            self.framed[kind] = [whole]
            # Completion order depends on the workers; the tables must not (stable: a unit's
            # rows keep their order).
            out[kind] = whole.sort(_UNIT, maintain_order=True).drop(_UNIT)
        return out


_UNIT = "__unit__"
"""A column the gathered frames carry until they are written: the label of each row's unit."""
TABLE_COLUMNS = {"incidents": INCIDENT_COLUMNS, "sessions": SESSION_COLUMNS,
                 "errors": ERROR_COLUMNS}


Item = tuple[Unit, "str | None"]
"""A unit to run and the hash it had in the last run (``None`` when new)."""


class ExecutorLost(Exception):
    """The executor can run no more units (a cluster's scheduler went away)."""


class Executor(Protocol):
    """Where units are read and scanned: this process, a local pool (``LocalPool``), or a Dask
    cluster (``forensics.cluster``). Every executor runs the same ``_process`` on the same
    ``Unit``s and hands the same ``UnitOutcome``s to ``take``, so outputs do not depend on it.
    """

    workers: int

    def list_units(self, paths: Sequence[str | os.PathLike[str]], problems: list[Problem], *,
                   exclude: Sequence[str | os.PathLike[str]],
                   limits: Limits) -> Iterator[Unit]:
        """The units under ``paths`` (``forensics.archive.iter_units``)."""

    def run(self, items: Iterator[Item], *, total: int | None, config: Config,
            cases_dir: str | None, options: dict[str, Any], known: dict[str, dict[str, str]],
            take: Callable[[UnitOutcome], None]) -> None:
        """Run every item and ``take`` each outcome in this process, with a bounded number of
        items in flight; each worker is set up with ``_init_worker(config, cases_dir,
        options)``. Raises ``ExecutorLost`` when it cannot go on."""


@dataclass
class LocalPool:
    """Units in worker processes of this machine (``workers == 1``: in this process)."""

    workers: int

    def list_units(self, paths, problems, *, exclude, limits):
        return iter_units(paths, problems, exclude=exclude, limits=limits)

    def run(self, items, *, total, config, cases_dir, options, known, take) -> None:
        if self.workers <= 1:
            _init_worker(config, cases_dir, options)
            for unit, prev_hash in items:
                take(_process(unit, prev_hash))
        else:
            _run_pool(items, total, self.workers, config, cases_dir, take, options)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else (os.cpu_count() or 1))


def collect(paths: Sequence[str | os.PathLike[str]], *, workers: int | None = None,
            config: Config | None = None, progress: bool = False,
            known: dict[str, dict[str, str]] | None = None,
            cases_dir: str | None = None,
            exclude: Sequence[str | os.PathLike[str]] = (),
            redact: bool = True, max_case_sessions: int = MAX_CASE_SESSIONS,
            checkpoint: Callable[[Collected], None] | None = None,
            checkpoint_every: int = CHECKPOINT_EVERY,
            limits: Limits = DEFAULT_LIMITS,
            keep: SessionFilter | None = None,
            executor: Executor | None = None) -> Collected:
    """Read and scan every unit under ``paths``; nothing is written but what ``checkpoint``
    writes, called with the rows so far every ``checkpoint_every`` units. ``keep`` says which
    sessions to keep (``--since``, ``--agent``…).

    ``executor`` says where units run (default: a local pool of ``workers`` processes).

    ``known`` maps a unit label to its previous ``{"hash", "stamp"}``: units with an unchanged
    stamp are skipped without being read, units with an unchanged hash after reading.
    """
    config = config or Config()
    known = known or {}
    executor = executor or LocalPool(workers or default_workers())
    workers = executor.workers
    options = {"redact": redact, "case_sessions": -(-max_case_sessions // workers),
               "keep": keep, "parent": os.getpid(), "limits": limits}
    out = Collected(workers=workers)
    bar = Progress(progress)
    start = time.monotonic()
    units = executor.list_units(paths, out.problems, exclude=exclude, limits=limits)
    # A list when listing is cheap (folders, zip, plain tar) gives the bar a total; compressed
    # tars stream, so their units stay a generator and the total is unknown.
    if not any(_streams(p) for p in paths):
        units = list(units)  # type: ignore[assignment]
    total = len(units) if isinstance(units, list) else None
    counts = {"done": 0, "sessions": 0, "incidents": 0}
    interrupts = _signals_interrupt()

    def take(outcome: UnitOutcome) -> None:
        if outcome.status == "skipped" and known.get(outcome.label, {}).get("ignored"):
            outcome.status = "ignored"
        out.outcomes.append(outcome)
        counts["done"] += 1
        counts["sessions"] += outcome.session_count
        counts["incidents"] += len(outcome.incidents)
        bar.update(counts["done"], total, counts["sessions"], counts["incidents"])
        if checkpoint is not None and counts["done"] % max(1, checkpoint_every) == 0:
            with interrupts.held():
                checkpoint(out)

    def pending() -> Iterator[tuple[Unit, str | None]]:
        seen: set[str] = set()
        for unit in units:
            if unit.label in seen:  # overlapping paths (a folder and its subfolder)
                continue
            seen.add(unit.label)
            prev = known.get(unit.label)
            if prev and unit.stamp is not None and prev.get("stamp") == unit.stamp:
                take(UnitOutcome(label=unit.label, hash=prev.get("hash"), stamp=unit.stamp,
                                 status="ignored" if prev.get("ignored") else "skipped"))
                continue
            yield unit, (prev or {}).get("hash")

    with interrupts:
        try:
            executor.run(pending(), total=total, config=config, cases_dir=cases_dir,
                         options=options, known=known, take=take)
        except ExecutorLost as exc:  # what was done is kept: a rerun continues from it
            out.lost = str(exc)
    # Completion order depends on the workers; the outputs must not.
    out.outcomes.sort(key=lambda o: o.label)
    out.problems.sort(key=lambda p: p.label)
    bar.update(counts["done"], total, counts["sessions"], counts["incidents"], final=True)
    out.elapsed = time.monotonic() - start
    return out


class _Interrupted(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt, so both end the batch alike."""


class _signals_interrupt:
    """While a batch runs in the main thread, SIGTERM interrupts it as Ctrl-C does (the pool is
    then shut down with its workers killed, see ``_pool_pass``). Inside ``held()`` (a
    checkpoint writing the tables) either signal waits until the block is done: raised inside
    polars' conversion of Python values, it made polars panic (exit 1 instead of 130, with a
    Rust backtrace instead of the checkpoint)."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}
        self.holding = False
        self.pending: BaseException | None = None

    def __enter__(self) -> _signals_interrupt:
        import threading

        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            self.previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._interrupt)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored
                self.previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def _interrupt(self, signum, frame) -> None:
        error = KeyboardInterrupt() if signum == signal.SIGINT else _Interrupted(
            f"signal {signum}")
        if self.holding:
            self.pending = error
            return
        raise error

    @contextmanager
    def held(self) -> Iterator[None]:
        """Signals that arrive inside wait for its end, then interrupt as they would have."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.pending is not None:
            error, self.pending = self.pending, None
            raise error

    def __exit__(self, *exc) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)


def _streams(path: str | os.PathLike[str]) -> bool:
    from forensics.archive import STREAM_TAR_SUFFIXES
    from forensics.remote import is_url

    if is_url(path):  # listing it to find out would cost a round trip per folder
        return True
    p = Path(path)
    if p.is_dir():
        return any(f.lower().endswith(tuple(STREAM_TAR_SUFFIXES))
                   for _d, _s, names in os.walk(p) for f in names)
    return p.name.lower().endswith(tuple(STREAM_TAR_SUFFIXES))


def _pool_context():
    """fork when the parent is still light (no polars threads to inherit), else spawn."""
    import multiprocessing

    if sys.platform.startswith("linux") and "polars" not in sys.modules:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _run_pool(items: Iterator[Item], total: int | None, workers: int, config: Config,
              cases_dir: str | None, take: Callable[[UnitOutcome], None],
              options: dict[str, Any] | None = None) -> None:
    """Chunks of units to a process pool, with a bounded number in flight (a compressed tar's
    member bytes wait in memory only while their chunk is queued).

    A worker that dies (killed, out of memory, a crash in native code) breaks the pool: the
    units of the chunks lost with it are retried one per task in a new pool, and a unit that
    kills a worker on its own is reported as failed. The batch goes on either way.
    """
    # Small chunks: a session takes tens of milliseconds, a chunk's round trip far less, and
    # small chunks keep both workers busy to the end.
    size = 4 if total is None else max(1, min(8, total // (workers * 16)))
    retry: list[Item] = []
    while True:
        lost = _pool_pass(items, retry, size, workers, config, cases_dir, take, options)
        if not lost:
            return
        retry = []
        for chunk, alone in lost:
            if alone:
                take(worker_died(chunk[0][0]))
            else:
                retry.extend(chunk)


def _pool_pass(items: Iterator[Item], retry: list[Item], size: int, workers: int,
               config: Config, cases_dir: str | None,
               take: Callable[[UnitOutcome], None],
               options: dict[str, Any] | None = None) -> list[tuple[list[Item], bool]]:
    """One pool's life: the retried units singly, then the rest in chunks. Returns the chunks
    lost when a worker died (with whether each was a single retried unit), else []."""
    from concurrent.futures import ProcessPoolExecutor

    in_flight: dict[Future, tuple[list[Item], bool]] = {}
    limit = workers * 4
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(),
                               initializer=_init_pool_worker,
                               initargs=(config, cases_dir, options))
    try:
        return _fill_pool(pool, items, retry, size, limit, in_flight, take)
    except BaseException:  # Ctrl-C, SIGTERM, a bug: no worker may go on reading and writing
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's workers, and let the pool's own thread see that they are gone.

    A worker killed while it wrote a result leaves half a message in the result pipe: the
    pool's thread, reading it, would wait forever for the rest (the pipe stays open for
    writing in this process too), and ``shutdown`` and the interpreter's exit join that
    thread (a SIGTERM hung the batch about once in 30). With every worker dead, closing this
    process's end for writing ends the read: the thread takes the pool as broken and stops."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for proc in processes:
        try:
            proc.kill()
        except (OSError, AttributeError):
            pass
    for proc in processes:
        try:
            proc.join(5)
        except (OSError, AttributeError, AssertionError):
            pass
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None and not any(proc.is_alive() for proc in processes):
        try:
            writer.close()
        except OSError:
            pass


def _fill_pool(pool: ProcessPoolExecutor, items: Iterator[Item], retry: list[Item], size: int,
               limit: int, in_flight: dict[Future, tuple[list[Item], bool]],
               take: Callable[[UnitOutcome], None]) -> list[tuple[list[Item], bool]]:
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    broken = False
    watch = _DeadWorkerWatch(pool)

    def drain(block_until: int) -> None:
        nonlocal broken
        while len(in_flight) > block_until and not broken:
            done, _ = wait(in_flight, timeout=WATCH_SECONDS, return_when=FIRST_COMPLETED)
            if not done:
                watch.check()
            for fut in done:
                try:
                    outcomes = fut.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                del in_flight[fut]
                for outcome in outcomes:
                    take(outcome)

    def submit(chunk: list[Item], alone: bool) -> None:
        try:
            in_flight[pool.submit(_process_chunk, chunk)] = (chunk, alone)
        except BrokenProcessPool:
            in_flight[_lost()] = (chunk, alone)
            return
        if len(in_flight) == 1:
            _import_aside(pool)

    untried: list[Item] = []
    for i, item in enumerate(retry):  # one at a time: a unit that kills its worker is known
        submit([item], True)
        drain(0)
        if broken:
            untried = retry[i + 1:]
            break
    chunk: list[Item] = []
    for item in items if not broken else ():
        if len(chunk) >= size and not _joins_family(chunk, item[0]):
            submit(chunk, False)
            chunk = []
            drain(limit)
        chunk.append(item)
        if broken:
            break
    if chunk and broken:  # the pool broke while the chunk waited for its next unit
        untried.extend(chunk)
        chunk = []
    if chunk:
        submit(chunk, False)
    drain(0)
    if not broken:
        return []
    # Retried units not reached before the pool broke go to the next pool, still to retry.
    return list(in_flight.values()) + [([item], False) for item in untried]


FAMILY_CHUNK = 64
"""The most units a chunk grows to so as not to split a session family between workers."""


def _joins_family(chunk: list[Item], unit: Unit) -> bool:
    """Does ``unit`` belong in the full ``chunk``: a subagent's transcript on disk whose
    parent (or sibling) the chunk ends with. The worker that scans the parent then takes its
    ledger's read of the child (``ingest.handover``) instead of parsing the file again.
    Archive members are never held back: their bytes wait in memory while their chunk does."""
    from forensics.ingest import handover

    last = chunk[-1][0]
    return (len(chunk) < FAMILY_CHUNK and unit.kind == "file" and unit.blob is not None
            and unit.blob.where == "disk" and handover.same_family(last.label, unit.label))


WATCH_SECONDS = 1.0
"""How often a wait with nothing finished looks at the pool's workers."""

DEAD_WORKER_GRACE = 5.0
"""How long a dead worker may go unnoticed by the pool before its workers are killed."""


class _DeadWorkerWatch:
    """Breaks a pool that a worker's death left waiting forever.

    A worker that dies by itself (the kernel's out-of-memory killer, a ``kill -9``) while it
    sends a result leaves half a message in the result pipe and the pipe's write lock taken:
    the pool's thread waits for the rest of the message and the other workers for the lock,
    and the pool never learns that it is broken. When a worker has been dead for
    ``DEAD_WORKER_GRACE`` seconds and the pool still runs, every worker is killed
    (``_kill_workers``, which ends the pool thread's read): the pool breaks as it does for any
    dead worker, and its chunks are retried."""

    def __init__(self, pool: ProcessPoolExecutor, grace: float = DEAD_WORKER_GRACE) -> None:
        self.pool = pool
        self.grace = grace
        self.dead_since: float | None = None

    def check(self) -> None:
        processes = (getattr(self.pool, "_processes", None) or {}).values()
        if not any(proc.exitcode is not None for proc in list(processes)):
            self.dead_since = None
            return
        now = time.monotonic()
        if self.dead_since is None:
            self.dead_since = now
        elif now - self.dead_since >= self.grace:
            _kill_workers(self.pool)


END_IMPORTS = ("polars", "jinja2", "forensics.charts")
"""What the parent imports only to write OUT at the end: the tables (polars) and the index
page (Jinja, its charts)."""


def _import_aside(pool: ProcessPoolExecutor) -> None:
    """Import ``END_IMPORTS`` in a thread of this process while the pool's workers read: at
    the end their imports (~0.2 s of CPU, polars most) were serial, the largest part of what
    ``-j 2`` could not share (``docs/performance.md``). Only once every worker is forked (a
    fork pool launches them all at its first task): a fork while a thread imports can
    deadlock the child, and ``_pool_context`` spawns any later pool once polars is loaded."""
    import importlib
    import threading

    if "polars" in sys.modules or _pool_method(pool) != "fork" \
            or len(getattr(pool, "_processes", None) or ()) < getattr(pool, "_max_workers", 0):
        return

    def import_all() -> None:
        try:
            for name in END_IMPORTS:
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the main thread's own import says what is wrong
            return

    threading.Thread(target=import_all, name="forensics-end-imports").start()


def _pool_method(pool: ProcessPoolExecutor) -> str | None:
    context = getattr(pool, "_mp_context", None)
    return context.get_start_method() if context is not None else None


def worker_died(unit: Unit) -> UnitOutcome:
    """The outcome of a unit whose worker died twice while reading it."""
    return UnitOutcome(label=unit.label, stamp=unit.stamp, status="failed", errors=[
        _error_row(unit.label, unit.label, "the worker reading it died (killed or out of "
                   "memory)", kind="crash")])


def _lost() -> Future:
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    fut: Future = Future()
    fut.set_exception(BrokenProcessPool("pool already broken"))
    return fut


# -- writing OUT --------------------------------------------------------------------------------


@dataclass
class BatchSummary:
    """What a batch did; ``str()`` is the closing lines the CLI prints."""

    out: Path | str
    """OUT: a folder, or the URL it was written to."""
    sources: int = 0
    scanned: int = 0
    skipped: int = 0
    ignored: int = 0
    sessions: int = 0
    incidents: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    """``(where, reason)`` for every source or archive that could not be read."""
    workers: int = 1
    elapsed: float = 0.0
    rescanned_all: bool = False
    findings: list[tuple[str, str]] = field(default_factory=list)
    """``(code, severity)`` of every incident, for the CLI's exit decision."""
    read_issues: int = 0
    """Unreadable records inside sessions that were read (``sessions.read_issues`` summed)."""
    changes: list[dict[str, Any]] | None = None
    """Per rule, new / still there / resolved since the previous run of the same OUT (None on a
    first run)."""

    @property
    def rate(self) -> float:
        return self.scanned_sessions / self.elapsed if self.elapsed else 0.0

    scanned_sessions: int = 0

    def __str__(self) -> str:
        lines = [f"{self.sessions} sessions from {self.sources} sources, "
                 f"{self.incidents} incidents; wrote {self.out}"]
        if self.skipped:
            lines.append(f"skipped {self.skipped} unchanged sources (--full rescans them)")
        if self.ignored:
            lines.append(f"ignored {self.ignored} files that are not session logs")
        if self.errors:
            lines.append(f"{len(self.errors)} sources could not be read:")
            lines.extend(f"  {where}: {reason}" for where, reason in self.errors)
        return "\n".join(lines)


def _config_key(config: Config, redact: bool = True, keep: SessionFilter | None = None) -> str:
    """What the stored rows depend on besides the sources: the forensics version, the rule files'
    contents, the effective config, redaction and the session filter. A change of any rescans
    everything."""
    from forensics import __version__
    from forensics.redact import patterns_digest

    rules = []
    for s in config.rule_files():  # the files, not the rules' code: a rerun imports none
        try:
            text = Path(s.path).read_bytes() if s.path else b""
        except OSError:
            text = b""
        rules.append((s.code, _digest([text]), sorted(config.params_for(s).items(), key=str)))
    secrets = patterns_digest() if redact else ""
    return _digest([orjson.dumps([SCHEMA_VERSION, __version__, secrets, repr(rules),
                                  repr(keep)])])


def _load_state(out: Path, key: str) -> dict[str, dict[str, str]]:
    try:
        state = orjson.loads((out / STATE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if state.get("config_key") != key or state.get("schema_version") != SCHEMA_VERSION:
        return {}
    if not all((out / name).exists() for name in ("incidents.parquet", "sessions.parquet",
                                                  "errors.ndjson")):
        return {}
    return state.get("sources", {})


def _previous_rows(out: Path, origins: set[str]) -> dict[str, pl.DataFrame]:
    """Rows of the last run for the units skipped now, read back from OUT as frames of the
    tables' schema (the parquet files keep every value to the µs)."""
    import polars as pl

    from forensics.frame import frame

    if not origins:
        return {kind: frame([], columns) for kind, columns in TABLE_COLUMNS.items()}
    rows: dict[str, pl.DataFrame] = {}
    for kind in ("incidents", "sessions"):
        df = pl.read_parquet(out / f"{kind}.parquet")
        rows[kind] = df.filter(pl.col("origin").is_in(list(origins))).select(
            list(TABLE_COLUMNS[kind]))
    errors = []
    for line in (out / "errors.ndjson").read_bytes().splitlines():
        row = orjson.loads(line)
        if row.get("origin") in origins and row.get("kind") != "archive":
            errors.append(row)
    rows["errors"] = frame(errors, ERROR_COLUMNS)
    return rows


class _Previous:
    """The last run's rows for the units skipped now, read on first use."""

    def __init__(self, out: Path, origins: set[str]) -> None:
        self.out, self.origins = out, origins
        self._rows: dict[str, pl.DataFrame] | None = None

    @property
    def loaded(self) -> bool:
        return self._rows is not None

    def rows(self) -> dict[str, pl.DataFrame]:
        if self._rows is None:
            self._rows = _previous_rows(self.out, self.origins)
        return self._rows


def _previous_fingerprints(out: Path) -> dict[str, tuple[str, str]] | None:
    """Fingerprint -> (code, rule) of the incidents the last run wrote to OUT; None when OUT
    holds no previous run."""
    path = out / "incidents.ndjson"
    if not path.is_file():
        return None
    found: dict[str, tuple[str, str]] = {}
    try:
        for line in path.read_bytes().splitlines():
            if line.strip():
                row = orjson.loads(line)
                found[row["fingerprint"]] = (row["code"], row["rule"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return found


def compare_runs(before: dict[str, tuple[str, str]],
                 incidents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rule: incidents new since the previous run of this folder, still there, resolved."""
    now = {r["fingerprint"]: (r["code"], r["rule"]) for r in incidents}
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(key: tuple[str, str]) -> dict[str, Any]:
        return rows.setdefault(key, {"code": key[0], "rule": key[1], "new": 0, "still": 0,
                                     "resolved": 0})

    for fp, key in now.items():
        row(key)["still" if fp in before else "new"] += 1
    for fp, key in before.items():
        if fp not in now:
            row(key)["resolved"] += 1
    return [rows[k] for k in sorted(rows)]


def run_batch(paths: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
              workers: int | None = None, full: bool = False, config: Config | None = None,
              progress: bool = True, redact: bool = True,
              max_case_sessions: int = MAX_CASE_SESSIONS,
              checkpoint_every: int | None = None,
              limits: Limits = DEFAULT_LIMITS,
              keep: SessionFilter | None = None, executor: Executor | None = None,
              partitioned: bool = False) -> BatchSummary:
    """Scan every session under ``paths`` and write the tables and index page to ``out``.

    Parameters
    ----------
    paths
        Session files, folders (agent data dirs or any tree mixing formats) and archives
        (``.zip``, ``.tar``, ``.tar.gz``, ``.tar.zst``), read in place.
    out
        Output folder, created if missing, or an fsspec URL (``s3://bucket/prefix``,
        ``forensics.destination``). A previous run's ``state.json`` there makes this run
        incremental.
    workers
        Worker processes; default: one per available core. ``1`` runs in this process.
    full
        Rescan every source even if unchanged since the last run.
    config
        Rule selection and parameters (``forensics.config.load_config``).
    progress
        Draw a progress line on stderr when it is a terminal (``FORENSICS_PROGRESS=1``
        forces it).
    redact
        Hide secrets in every text column, the index page and the case studies.
    max_case_sessions
        Sessions that get case-study pages; the tables always hold every incident.
    checkpoint_every
        Sources between checkpoints (default ``CHECKPOINT_EVERY``, or
        ``FORENSICS_CHECKPOINT_EVERY``).
    limits
        Per-archive caps on member size, expanded size and member count
        (``forensics.archive.Limits``).
    keep
        Only the sessions this filter keeps (``forensics.inputs.SessionFilter``).
    executor
        Where units run instead of a local pool of ``workers`` (``forensics.cluster``).
    partitioned
        Also write the incidents and sessions tables as datasets partitioned by agent and
        month (``forensics.dataset``).

    Returns
    -------
    BatchSummary
        Counts, skipped and unreadable sources, timing.
    """
    from forensics.dataset import PARTITIONED_TABLES
    from forensics.destination import open_destination

    # A URL is staged in a local folder: the batch writes there, ``publish`` uploads.
    dest = open_destination(out, previous_run=PREVIOUS_RUN)
    dest.check_workers(in_process=executor is None and (workers or default_workers()) == 1)
    out = dest.folder
    out.mkdir(parents=True, exist_ok=True)
    config = config or Config()
    key = _config_key(config, redact, keep if keep is not None and keep.active else None)
    known = {} if full else _load_state(out, key)
    # The stored rows are read before the first checkpoint rewrites the tables they live in
    # (no table is written before it), and not at all when no table changes.
    previous = _Previous(out, set(known)) if known else None
    before = _previous_fingerprints(out)  # what the last run found, for new/still/resolved
    every = checkpoint_every or int(os.environ.get("FORENSICS_CHECKPOINT_EVERY")
                                    or CHECKPOINT_EVERY)
    # Whether the reporter is installed is asked by the first session with incidents
    # (``cases.write_cases``), so a rerun that scans nothing does not import it.
    cases_dir = dest.cases

    def checkpoint(so_far: Collected) -> None:
        if all(o.status in ("skipped", "ignored") for o in so_far.outcomes):
            return  # the state in OUT lists these units already: nothing new to keep
        _write_tables(so_far, out, key=key, previous=previous.rows() if previous else None)
        dest.publish([*TABLE_FILES, STATE_FILE])

    collected = collect(paths, workers=workers, config=config,
                        progress=progress and (sys.stderr.isatty()
                                               or os.environ.get("FORENSICS_PROGRESS") == "1"),
                        known=known, cases_dir=cases_dir, exclude=dest.exclude, redact=redact,
                        max_case_sessions=max_case_sessions, checkpoint=checkpoint,
                        checkpoint_every=every, limits=limits, keep=keep,
                        executor=executor)
    summary = None
    if known and not partitioned and previous is not None and not previous.loaded:
        summary = _write_unchanged(collected, out, key=key, known=known, before=before)
    if summary is None:
        summary = write_outputs(collected, out, key=key, rescanned_all=full or not known,
                                previous=previous.rows() if previous else None, before=before,
                                partitioned=partitioned)
    dest.publish([*OUTPUT_FILES, *(PARTITIONED_TABLES if partitioned else ()), STATE_FILE])
    dest.close()
    if dest.url:
        summary.out = dest.url
    if collected.lost:
        raise BatchLost(collected.lost, summary)
    return summary


class BatchLost(ForensicsError):
    """The batch stopped early (its cluster went away); what was done is written to OUT and
    in its state, so the same command continues from there."""

    def __init__(self, reason: str, summary: BatchSummary) -> None:
        self.summary = summary
        super().__init__(f"{reason}; {summary.sources} sources were done and written to "
                         f"{summary.out}: run the same command again to continue")


def _replace(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary name and rename: a kill mid-write never leaves half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


TABLE_ORDER = {"incidents": ["origin", "session_id", "turn", "code"],
               "sessions": ["origin", "session_id"]}
"""How each table is sorted (errors keep the units' order, then the archives' problems)."""


def _write_tables(collected: Collected, out: Path, *, key: str,
                  previous: dict[str, pl.DataFrame] | None = None
                  ) -> tuple[dict[str, pl.DataFrame], set[str]]:
    """The tables and the state for the units done so far (the end of a batch or a
    checkpoint). The state is written last and lists only units whose rows are in the tables,
    so a batch killed at any point leaves a consistent OUT that a rerun continues from.

    Each row becomes columns once (``Collected.frames``); a checkpoint then costs a concat,
    a sort and a write of the frames so far, not the rows' Python conversion again."""
    import polars as pl

    from forensics.frame import frame

    skipped = {o.label for o in collected.outcomes if o.status == "skipped"}
    if previous is None:
        previous = _previous_rows(out, skipped)
    gathered = collected.frames()
    problems = frame([_error_row(p.label, p.label, p.reason, kind="archive")
                      for p in collected.problems], ERROR_COLUMNS)
    meta = {"forensics.schema_version": SCHEMA_VERSION}
    tables = {}
    for name in TABLE_COLUMNS:
        carried = previous[name].filter(pl.col("origin").is_in(list(skipped)))
        df = pl.concat([carried, gathered[name], *([problems] if name == "errors" else [])],
                       rechunk=True)
        if name in TABLE_ORDER:  # stable: rows equal in the key keep their order
            df = df.sort(TABLE_ORDER[name], maintain_order=True).rechunk()
        tables[name] = df
        if name != "errors":
            _replace(out / f"{name}.parquet", lambda p: df.write_parquet(p, metadata=meta))
        _replace(out / f"{name}.ndjson", df.write_ndjson)

    _write_state(collected, out, key=key)
    return tables, skipped


def _write_state(collected: Collected, out: Path, *, key: str) -> None:
    """What a rerun needs to skip unchanged units: per unit its hash and stamp."""
    state = {
        "schema_version": SCHEMA_VERSION,
        "config_key": key,
        "sources": {o.label: {"hash": o.hash, "stamp": o.stamp, "ignored": o.status == "ignored"}
                    for o in collected.outcomes
                    if o.hash is not None and o.status in ("scanned", "skipped", "ignored")},
    }
    _replace(out / STATE_FILE,
             lambda p: p.write_bytes(orjson.dumps(state, option=orjson.OPT_INDENT_2)))


def write_outputs(collected: Collected, out: Path, *, key: str, rescanned_all: bool,
                  previous: dict[str, pl.DataFrame] | None = None,
                  before: dict[str, tuple[str, str]] | None = None,
                  partitioned: bool = False) -> BatchSummary:
    """Write the tables, the state and the index page for ``collected`` into ``out``
    (``partitioned``: the agent/month datasets too).

    ``previous``: the rows of the last run, when read before checkpoints rewrote OUT;
    ``before``: the fingerprints the last run found (None on a first run)."""
    from forensics.index import save_view, write_index

    tables, skipped = _write_tables(collected, out, key=key, previous=previous)
    if partitioned:
        from forensics.dataset import write_partitioned

        write_partitioned(tables, out)
    summary = _summary(collected, out, *(tables[name].select(SUMMARY_COLUMNS[name]).to_dicts()
                                         for name in ("incidents", "sessions", "errors")),
                       skipped, rescanned_all=rescanned_all, before=before)
    save_view(write_index(tables, summary, out), out)
    return summary


def _write_unchanged(collected: Collected, out: Path, *, key: str,
                     known: dict[str, dict[str, str]],
                     before: dict[str, tuple[str, str]] | None) -> BatchSummary | None:
    """A rerun in which every source is unchanged and the archives' problems are the same: the
    tables would be written again as they are, so they are left alone, and the index is
    rendered from the figures kept with them. None (nothing written) when anything differs;
    ``write_outputs`` then writes everything."""
    from forensics.index import TABLE_TWINS, cached_view, write_index

    outcomes = collected.outcomes
    if collected.lost or before is None or len(outcomes) != len(known) \
            or any(o.status not in ("skipped", "ignored") or o.label not in known
                   for o in outcomes):
        return None
    try:  # read once: for the digest the kept figures were made from, and for the rows
        contents = {name: (out / name).read_bytes() for name in TABLE_TWINS}
    except OSError:
        return None
    view = cached_view(out, contents)
    if view is None:
        return None
    rows = {}
    for kind in ("incidents", "sessions", "errors"):
        try:
            rows[kind] = [orjson.loads(line) for line in
                          contents[f"{kind}.ndjson"].splitlines() if line.strip()]
        except orjson.JSONDecodeError:
            return None
    skipped = {o.label for o in outcomes if o.status == "skipped"}
    kept = [r for r in rows["errors"] if r.get("kind") != "archive"]
    problems = [_error_row(p.label, p.label, p.reason, kind="archive")
                for p in collected.problems]
    if rows["errors"] != kept + problems or any(
            r.get("origin") not in skipped for r in (*rows["incidents"], *rows["sessions"], *kept)):
        return None  # a table would change: write them all
    _write_state(collected, out, key=key)
    summary = _summary(collected, out, rows["incidents"], rows["sessions"], rows["errors"],
                       skipped, rescanned_all=False, before=before)
    write_index(None, summary, out, view=view)
    return summary


SUMMARY_COLUMNS = {"incidents": ["code", "rule", "severity", "fingerprint"],
                   "sessions": ["read_issues"], "errors": ["origin", "path", "kind", "reason"]}
"""What ``_summary`` reads of each table's rows."""


def _summary(collected: Collected, out: Path, incidents: list[dict[str, Any]],
             sessions: list[dict[str, Any]], errors: list[dict[str, Any]], skipped: set[str],
             *, rescanned_all: bool,
             before: dict[str, tuple[str, str]] | None) -> BatchSummary:
    summary = BatchSummary(
        out=out,
        sources=len(collected.outcomes),
        scanned=sum(o.status == "scanned" for o in collected.outcomes),
        skipped=len(skipped),
        ignored=sum(o.status == "ignored" for o in collected.outcomes),
        sessions=len(sessions),
        incidents=len(incidents),
        errors=[(e["path"] if e["kind"] != "rule-crash" else e["origin"], e["reason"])
                for e in errors],
        workers=collected.workers,
        elapsed=collected.elapsed,
        rescanned_all=rescanned_all,
        scanned_sessions=sum(o.session_count for o in collected.outcomes),
        findings=[(r["code"], r["severity"]) for r in incidents],
        read_issues=sum(r.get("read_issues") or 0 for r in sessions),
    )
    for r in incidents:
        summary.by_rule[r["code"]] = summary.by_rule.get(r["code"], 0) + 1
    if before is not None:
        summary.changes = compare_runs(before, incidents)
    return summary


__all__ = ["BatchSummary", "Collected", "collect", "read_unit", "run_batch"]
