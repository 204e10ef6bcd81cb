"""Byte sources shared by the readers: JSONL line iteration and directory-like trees.

Readers never open files themselves for JSONL: they get a binary stream, so the same code reads a
file on disk, a member of a tar/zip archive, or bytes in a test. Bad lines become ``ReadIssue``s
on the session being built; reading goes on.
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Protocol

import orjson

from forensics.errors import crash_text
from forensics.model import ReadIssue

FEWER_COLLECTIONS_EVERY = 100_000
"""Allocations between two young-generation collections while a session is built or scanned
(Python's default is 700)."""


def loads_document(data: bytes):
    """One whole JSON document (an opencode export, a Gemini CLI chat file).

    orjson refuses input of about 2 GiB and more ("Not enough memory to allocate buffer for
    parsing", whatever memory is free): such a document is parsed by the standard library,
    slower but whole, so a long session is read rather than called invalid JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not str(exc).startswith(_ORJSON_TOO_LARGE):
            raise
    import json

    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise orjson.JSONDecodeError(exc.msg, exc.doc, exc.pos) from None


_ORJSON_TOO_LARGE = "Not enough memory to allocate buffer"


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect cyclic garbage less often while the block runs.

    A session is hundreds of thousands of small objects that all live as long as it does; at
    the default threshold the collector walks them again and again while they are built and
    the rules run, and frees nothing (a third of ingest's CPU time, a sixth of the rules').
    The thresholds in force before are restored after."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], FEWER_COLLECTIONS_EVERY), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


MAX_ISSUES_PER_FILE = 200
"""Past this many bad records in one file, further ones are counted in one closing issue."""


def iter_jsonl(
    stream: BinaryIO, source: str, issues: list[ReadIssue]
) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, record)`` for every JSON object line; record the rest as issues.

    Reads line by line, so memory stays proportional to what the caller keeps. A blank line
    never parses, so it is recognised only after its parse failed: stripping every line first
    copied the whole file once more.
    """
    dropped = 0
    loads = orjson.loads
    for line_no, raw in enumerate(stream, 1):
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError as exc:
            dropped += _bad_line(issues, source, line_no, raw, exc)
            continue
        if type(obj) is not dict:  # orjson builds plain dicts only
            dropped += _note(issues, source, line_no, "line is JSON but not an object")
            continue
        yield line_no, obj
    _note_dropped(issues, source, dropped)


def _bad_line(issues: list[ReadIssue], source: str, line_no: int, raw: bytes,
              exc: orjson.JSONDecodeError) -> int:
    """Record why a line did not parse (a blank line is no issue); 1 if the issue was dropped."""
    if not raw.strip():
        return 0  # a blank line (JSON whitespace or not): asked only when parsing failed
    if raw.endswith(b"\n") or not raw.strip().endswith((b"}", b"]")):
        what = "not valid JSON" if raw.endswith(b"\n") else "truncated last line"
    else:
        what = "not valid JSON"
    if _is_utf8_problem(raw):
        what = "invalid UTF-8"
    return _note(issues, source, line_no, f"{what} ({exc.msg})")


def _note_dropped(issues: list[ReadIssue], source: str, dropped: int) -> None:
    if dropped:
        issues.append(ReadIssue(path=source, message=f"{dropped} more bad lines not listed"))


def _is_utf8_problem(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _note(issues: list[ReadIssue], source: str, line: int | None, message: str) -> int:
    """Append an issue unless the file already has too many; return 1 if it was dropped."""
    if sum(1 for i in issues if i.path == source) >= MAX_ISSUES_PER_FILE:
        return 1
    issues.append(ReadIssue(path=source, line=line, message=message))
    return 0


@contextmanager
def one_record(issues: list[ReadIssue], source: str, line: int | None = None,
               what: str = "") -> Iterator[None]:
    """Isolate one record (a line, a message file, a table row): if the reader raises on it,
    the record becomes an issue naming ``file:line`` (or ``what``: ``table message row msg_…``)
    and the rest of the source is still read."""
    try:
        yield
    except Exception as exc:  # a reader bug on one record must not lose the others
        issues.append(crashed(source, line, exc, what))


def add_each_line(stream: BinaryIO, source: str, issues: list[ReadIssue],
                  add: Callable[[int, dict], object]) -> None:
    """``add(line_number, record)`` for every record of ``iter_jsonl``, each isolated as
    ``one_record`` does (same issue), with a plain ``try`` instead of a context manager per
    line: on a log of many small lines the context manager alone cost a tenth of the reader.

    The lines are read here as ``iter_jsonl`` reads them rather than taken from it: resuming
    its generator for every line cost about as much as a small reader's own work on it."""
    dropped = 0
    loads = orjson.loads
    for line_no, raw in enumerate(stream, 1):
        try:
            rec = loads(raw)
        except orjson.JSONDecodeError as exc:
            dropped += _bad_line(issues, source, line_no, raw, exc)
            continue
        if type(rec) is not dict:  # orjson builds plain dicts only
            dropped += _note(issues, source, line_no, "line is JSON but not an object")
            continue
        try:
            add(line_no, rec)
        except Exception as exc:  # a reader bug on one record must not lose the others
            issues.append(crashed(source, line_no, exc))
    _note_dropped(issues, source, dropped)


def crashed(source: str, line: int | None, exc: Exception, what: str = "") -> ReadIssue:
    """The issue of a record its reader raised on (``one_record`` and the loops inlining it)."""
    prefix = f"{what}: " if what else ""
    return ReadIssue(path=source, line=line,
                     message=f"{prefix}reader crashed on this record: {crash_text(exc)}")


def regular_file(path: str | os.PathLike[str]) -> str | None:
    """None for a regular file (or a link to one), else why it must not be opened: a FIFO would
    block the read forever, a device may never end, a socket cannot be read."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file: skipped"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file: skipped"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file: skipped"
    return "is not a regular file: skipped"


class Tree(Protocol):
    """A directory-like set of files: a folder on disk or the members of an archive."""

    label: str
    """How to name the tree in messages (a path)."""

    def files(self) -> Iterable[str]:
        """Relative POSIX paths of every regular file."""
        ...

    def read_bytes(self, rel: str) -> bytes: ...


class DirTree:
    """A folder on disk, read-only."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.label = str(root)

        self.problems: list[ReadIssue] = []
        """Folders that could not be listed and files that are not regular, found by files()."""

    def files(self) -> Iterator[str]:
        root = str(self.root)
        for dirpath, _dirs, names in os.walk(root, onerror=self._unlistable):
            rel_dir = os.path.relpath(dirpath, root)
            for name in names:
                why = regular_file(os.path.join(dirpath, name))
                rel = (name if rel_dir == "." else f"{rel_dir}/{name}").replace(os.sep, "/")
                if why is not None:
                    self.problems.append(ReadIssue(path=f"{self.label}/{rel}", message=why))
                    continue
                yield rel

    def _unlistable(self, exc: OSError) -> None:
        self.problems.append(ReadIssue(path=str(exc.filename or self.root),
                                       message=f"folder not read: {exc.strerror or exc}"))

    def read_bytes(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()
