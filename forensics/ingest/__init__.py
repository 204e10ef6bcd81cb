"""Read agent session logs into ``Session`` objects.

One module per format; this module only decides which one to call. Readers share a contract:

* JSON/JSONL formats: ``read_stream(stream, source) -> list[Session]`` on a binary stream.
* opencode storage tree: ``read_tree(tree) -> list[Session]`` on a ``Tree`` (folder or archive).
* opencode SQLite: ``read_sqlite(path) -> list[Session]`` (opened read-only) and
  ``read_sqlite_bytes(data, source)`` for archive members.
* Cline / Roo / Kilo task folders: ``read_task(folder) -> list[Session]`` joins the folder's
  ``api_conversation_history.json``, ``ui_messages.json`` and ``task_metadata.json``; either JSON
  file alone is also a stream source.

Each reader module of the newer agents also defines ``DEFAULT_LOCATIONS`` (where the agent keeps
its sessions per platform, and the environment variables that move them).

A record a reader cannot use becomes a ``ReadIssue`` on its session; a source with nothing
readable raises ``IngestError`` naming the path (and line).

Totality is enforced here, for every reader (present and future): a reader that raises anything
but ``IngestError`` on a source raises ``ReaderCrash`` (``file: reader crashed: …``) for that
source alone, and only regular files are ever opened (a FIFO would block forever, a device may
never end): other special files and folders that cannot be listed are reported and skipped.
"""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from forensics.errors import ForensicsError, IngestError, ReaderCrash, UnknownFormatError, reading
from forensics.ingest import handover
from forensics.ingest._source import DirTree, Tree, fewer_collections, regular_file
from forensics.ingest.sniff import (
    CLINE_FILES,
    HEAD_BYTES,
    family_order,
    is_cline_task,
    is_dir,
    is_opencode_tree,
    sniff_bytes,
    sqlite_in,
    superseded_gemini_document,
)
from forensics.model import Session

__all__ = ["FORMATS", "load", "iter_sessions", "read_stream", "read_bytes", "read_tree",
           "read_sqlite", "isolated", "sniff_bytes"]

FORMATS: dict[str, str] = {
    "opencode-export": "forensics.ingest.opencode_export",
    "opencode-run": "forensics.ingest.opencode_run",
    "opencode-storage": "forensics.ingest.opencode_storage",
    "opencode-sqlite": "forensics.ingest.opencode_sqlite",
    "claude-code": "forensics.ingest.claude_code",
    "codex": "forensics.ingest.codex",
    "gemini-cli": "forensics.ingest.gemini_cli",
    "qwen-code": "forensics.ingest.qwen_code",
    "cline": "forensics.ingest.cline",
    "pi": "forensics.ingest.pi",
    "copilot-cli": "forensics.ingest.copilot_cli",
}
"""Format name -> reader module. Names are what ``--input-format`` accepts."""

STREAM_FORMATS = {"opencode-export", "opencode-run", "claude-code", "codex", "gemini-cli",
                  "qwen-code", "cline", "pi", "copilot-cli"}
KNOWN_AGENTS = ("opencode, Claude Code, Codex, Gemini CLI, Qwen Code, Cline/Roo/Kilo, pi, "
                "Copilot CLI")
SESSION_SUFFIXES = (".json", ".jsonl", ".db", ".ndjson")

ZIP_SUFFIXES = (".zip",)
TAR_SUFFIXES = (".tar",)
STREAM_TAR_SUFFIXES = {
    ".tar.gz": "gz", ".tgz": "gz", ".tar.bz2": "bz2", ".tbz2": "bz2", ".tar.xz": "xz",
    ".txz": "xz", ".tar.zst": "zst", ".tzst": "zst", ".tar.zstd": "zst",
}
"""Compressed tars by suffix, with their compression (``forensics.archive`` reads them)."""
ARCHIVE_SUFFIXES = ZIP_SUFFIXES + TAR_SUFFIXES + tuple(STREAM_TAR_SUFFIXES)


def is_archive(name: str) -> bool:
    """Is ``name`` an archive's (answered here, so that a run over plain files never imports
    ``forensics.archive`` with its tar, zip and compression modules)."""
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _reader(fmt: str):
    try:
        return importlib.import_module(FORMATS[fmt])
    except KeyError:
        raise UnknownFormatError("", f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")


def isolated(source: str, read: Callable[[], list[Session]]) -> list[Session]:
    """``read()``, with any exception but our own turned into ``ReaderCrash`` for ``source``:
    a reader bug costs its source, never the folder, the command or the batch."""
    try:
        with reading(source), fewer_collections():
            return read()
    except ForensicsError:
        raise
    except Exception as exc:  # RecursionError and MemoryError included: the next source may fit
        raise ReaderCrash(source, exc) from None


def read_stream(stream: BinaryIO, *, source: str, format: str | None = None) -> list[Session]:
    """Read one JSON/JSONL/SQLite source from a binary stream, sniffing its format."""
    if format is None:
        head = _peek(stream)
        if not head.strip():
            raise IngestError(source, "empty file")
        format = sniff_bytes(head)
        if format is None:
            raise UnknownFormatError(source, _unknown_reason(head))
    reader = _reader(format)
    if format == "opencode-sqlite":
        return isolated(source, lambda: reader.read_sqlite_bytes(stream.read(), source))
    if format == "opencode-storage":
        raise IngestError(source, "opencode storage is a folder, not a file")
    return isolated(source, lambda: reader.read_stream(stream, source))


def read_tree(tree: Tree) -> list[Session]:
    """Every session of an opencode storage tree (a folder or archive members), isolated."""
    return isolated(tree.label, lambda: _reader("opencode-storage").read_tree(tree))


def read_sqlite(path: str | os.PathLike[str]) -> list[Session]:
    """Every session of an opencode database on disk (read-only), isolated."""
    return isolated(str(path), lambda: _reader("opencode-sqlite").read_sqlite(path))


def read_bytes(data: bytes, *, source: str, format: str | None = None) -> list[Session]:
    return read_stream(io.BytesIO(data), source=source, format=format)


def _peek(stream: BinaryIO) -> bytes:
    # BufferedReader.peek returns at most its buffer (8 KB), too little when a first line
    # (Codex session_meta with its instructions) is longer: read and rewind when we can.
    if stream.seekable():
        pos = stream.tell()
        head = stream.read(HEAD_BYTES)
        stream.seek(pos)
        return head
    if hasattr(stream, "peek"):
        head = stream.peek(HEAD_BYTES)[:HEAD_BYTES]
        if head:
            return head
    pos = stream.tell()
    head = stream.read(HEAD_BYTES)
    stream.seek(pos)
    return head


def _unknown_reason(head: bytes) -> str:
    if b"\x00" in head[:4096]:
        return "not a session log (binary content)"
    try:
        head[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < 4090:
            return "not a session log (not UTF-8 text)"
    if head.lstrip().startswith((b"{", b"[")):
        return f"JSON, but not a session format forensics knows ({KNOWN_AGENTS})"
    return f"not a session log forensics knows ({KNOWN_AGENTS})"


def load(path: str | os.PathLike[str], *, format: str | None = None) -> list[Session]:
    """Every session in a file or folder. Raises ``IngestError`` when nothing can be read."""
    sessions = list(iter_sessions(path, format=format))
    if not sessions and is_dir(Path(path)):
        raise IngestError(str(path), "no agent sessions found in this folder")
    return sessions


def iter_sessions(
    path: str | os.PathLike[str], *, format: str | None = None, errors: list | None = None
) -> Iterator[Session]:
    """Sessions one source at a time.

    For a folder, files that fail are appended to ``errors`` (as ``IngestError``) when given,
    and skipped; for a single file the error is raised.
    """
    p = Path(path)
    why = regular_file(p)
    if why == "is a folder":
        yield from _iter_dir(p, format=format, errors=errors)
        return
    if why is not None:
        raise IngestError(str(p), "no such file or folder" if not os.path.lexists(p) else why)
    yield from _read_file(p, format=format)


def _read_file(p: Path, *, format: str | None) -> list[Session]:
    why = regular_file(p)
    if why is not None:  # never open a FIFO, a socket or a device: the read could block forever
        raise IngestError(str(p), why)
    with reading(str(p)):
        return _read_regular(p, format=format)


def _read_regular(p: Path, *, format: str | None) -> list[Session]:
    try:
        if format == "opencode-sqlite" or (format is None and _is_sqlite(p)):
            return read_sqlite(p)
        if handover.holds(str(p)):  # a subagent's file its parent's ledger has just read
            handed = handover.take(str(p), p.read_bytes(), format)
            if handed is not None:
                return handed
        with open(p, "rb") as fh:
            return read_stream(fh, source=str(p), format=format)
    except PermissionError:
        raise IngestError(str(p), "permission denied")
    except IsADirectoryError:
        raise IngestError(str(p), "is a folder")
    except OSError as exc:
        raise IngestError(str(p), exc.strerror or str(exc))


def _is_sqlite(p: Path) -> bool:
    with open(p, "rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def _iter_dir(root: Path, *, format: str | None, errors: list | None) -> Iterator[Session]:
    storage = is_opencode_tree(root) if format in (None, "opencode-storage") else None
    seen: set[str] = set()
    if storage is not None or format == "opencode-storage":
        # An opencode data dir: the database first (newer), then the JSON tree, deduped by id.
        data_dir = storage.parent if storage is not None and storage.name == "storage" else root
        for db in sqlite_in(data_dir):
            for s in _guarded(lambda: _read_file(db, format="opencode-sqlite"), db, errors):
                seen.add(s.id)
                yield s
        tree: Tree = DirTree(storage or root)
        for s in _guarded(lambda: read_tree(tree), root, errors):
            if s.id not in seen:
                seen.add(s.id)
                yield s
        return
    def unlistable(exc: OSError) -> None:
        if errors is None:
            raise IngestError(str(exc.filename or root), exc.strerror or str(exc))
        errors.append(IngestError(str(exc.filename or root),
                                  f"folder not read: {exc.strerror or exc}"))

    read_ahead: set[Path] = set()
    for dirpath, dirs, names in os.walk(root, onerror=unlistable):
        dirs.sort()
        here = Path(dirpath)
        if here in read_ahead:  # subagent transcripts, read right after their parent's file
            names = []
        if here != root and is_opencode_tree(here):
            dirs[:] = []
            yield from _iter_dir(here, format=format, errors=errors)
            continue
        if format in (None, "cline") and is_cline_task(here):
            # A Cline / Roo / Kilo task folder: its files are one session, read together.
            yield from _guarded(
                lambda: isolated(str(here), lambda: _reader("cline").read_task(here)),
                here, errors)
            names = [n for n in names if n not in CLINE_FILES and n != "task_metadata.json"]
        for f in family_order(here, names, read_ahead):
            if not f.name.endswith(SESSION_SUFFIXES):
                continue
            why = regular_file(f)
            if why is not None:
                if errors is None:
                    raise IngestError(str(f), why)
                errors.append(IngestError(str(f), why))
                continue
            if format is None and not _looks_like_session(f):
                continue
            if format in (None, "gemini-cli") and superseded_gemini_document(f):
                continue
            yield from _guarded(lambda: _read_file(f, format=format), f, errors)


def _looks_like_session(f: Path) -> bool:
    try:
        if _is_sqlite(f):
            return f.name.startswith("opencode")
        with open(f, "rb") as fh:
            return sniff_bytes(fh.read(HEAD_BYTES)) is not None
    except OSError:
        return True  # let the reader report it


def _guarded(read, where: Path, errors: list | None) -> list[Session]:
    try:
        return read()
    except IngestError as exc:
        if errors is None:
            raise
        errors.append(exc)
        return []
