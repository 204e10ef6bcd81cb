"""Find every session source under the paths a batch is given, without extracting anything.

A batch input may be a session file, a folder tree mixing formats (``~/.claude/projects``,
``~/.codex/sessions``, an opencode data dir), or an archive of such files (``.zip``, ``.tar``,
``.tar.gz``/``.tgz``, ``.tar.zst``, ``.tar.bz2``, ``.tar.xz``). This module turns them into
``Unit``s: small, picklable descriptions of one independently readable source, which a worker
process opens and reads itself.

Where the bytes of a unit live (``Blob``):

* a file on disk: the worker opens it;
* a ``.zip`` member: the worker opens the archive (once per process) and the member by name;
* a plain ``.tar`` member: the worker seeks to the member's data offset in the archive file;
* a member of a compressed tar (``.tar.gz``, ``.tar.zst``…): such a stream is not seekable, so
  the main process reads the archive once, in order, and hands each member's bytes to a worker;
  with ``defer_streams`` (a cluster, where the main process must not move transcript bytes) the
  whole archive is one ``archive`` unit that a worker expands with ``archive_units`` itself;
* a file named by an fsspec URL (``forensics.remote``): the worker opens the URL, and zip and
  plain tar archives there are read by member name and offset as on disk.

Hostile archives: two members with the same name are both read (the second as ``name#2``);
members that are not regular files (links, devices, FIFOs) and members past a limit are listed
as problems with the reason; a truncated archive is reported (a plain tar without its end
marker, or whose last member runs past the end; a compressed stream that ends early); and
``Limits`` caps a member's size, the total expanded size and the member count, so a small
archive cannot cost gigabytes of memory (a member's bytes are only held up to the member limit).

An opencode storage tree (``storage/session|message|part``, with ``opencode*.db`` beside it) is
one unit: a worker reads the databases first and then the tree, deduplicated by session id, as
``forensics.ingest`` does for a folder. A Cline / Roo / Kilo task folder (its
``api_conversation_history.json``, ``ui_messages.json`` and ``task_metadata.json``) is one unit
too: the worker joins the files into one session when their content is a task's, and reads them
one by one otherwise. Which files are sessions is decided by the worker from
content (as ``forensics.ingest`` does), so a folder and an archive of it give the same units.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Literal

from forensics.ingest import (
    SESSION_SUFFIXES,
    STREAM_TAR_SUFFIXES,
    TAR_SUFFIXES,
    ZIP_SUFFIXES,
    is_archive,
)
from forensics.ingest._source import regular_file
from forensics.ingest.sniff import (
    CLINE_FILES,
    family_order,
    is_cline_task,
    is_opencode_tree,
    superseded_gemini_document,
)
from forensics.remote import basename, is_url, listing, open_binary
from forensics.remote import stat as url_stat

TASK_FILE_NAMES = (*CLINE_FILES, "task_metadata.json")


_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


@dataclass(frozen=True)
class Limits:
    """What one archive may hold before the rest of it is skipped (and reported)."""

    member_bytes: int = 512 * 2**20
    """Largest member read; a bigger one is listed as skipped, its bytes never held."""
    total_bytes: int = 32 * 2**30
    """Expanded bytes of session members read from one archive."""
    members: int = 1_000_000
    """Members looked at in one archive."""

    @classmethod
    def parse(cls, text: str) -> "Limits":
        """``member=2G,total=100G,members=5000000`` (any subset; K, M, G, T suffixes)."""
        values: dict[str, int] = {}
        names = {"member": "member_bytes", "total": "total_bytes", "members": "members"}
        for item in filter(None, (t.strip() for t in text.split(","))):
            key, _, raw = item.partition("=")
            field_name = names.get(key.strip())
            raw = raw.strip().lower().removesuffix("b").removesuffix("i")
            unit = raw[-1:] if raw[-1:] in _UNITS and raw[-1:] else ""
            number = raw[: len(raw) - len(unit)]
            if field_name is None or not number.isdigit():
                raise ValueError(f"bad archive limit {item!r}: expected member=SIZE, "
                                 "total=SIZE or members=COUNT (e.g. member=2G)")
            values[field_name] = int(number) * _UNITS[unit]
        return cls(**values)

    def describe(self) -> str:
        return (f"member={_size(self.member_bytes)},total={_size(self.total_bytes)},"
                f"members={self.members}")


def _size(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit.lower()] and n % _UNITS[unit.lower()] == 0:
            return f"{n // _UNITS[unit.lower()]}{unit}"
    return str(n)


DEFAULT_LIMITS = Limits()


class _Budget:
    """Applies ``Limits`` to one archive's members, in order; records why a member is skipped."""

    def __init__(self, path: str | Path, limits: Limits, problems: list[Problem]) -> None:
        self.path, self.limits, self.problems = path, limits, problems
        self.count = 0
        self.total = 0
        self.stopped = False

    def admit(self, name: str, size: int) -> bool:
        """Whether to read this session member; False (with a problem) past a limit."""
        if self.stopped:
            return False
        self.count += 1
        if self.count > self.limits.members:
            self._stop(f"more than {self.limits.members} members; the rest not read "
                       f"(raise with --archive-limits members=N)")
            return False
        if size > self.limits.member_bytes:
            self.problems.append(Problem(
                f"{self.path}!{name}", f"member of {_size(size)} bytes is over the "
                f"{_size(self.limits.member_bytes)} limit; not read (raise with "
                f"--archive-limits member=SIZE)"))
            return False
        if self.total + size > self.limits.total_bytes:
            self._stop(f"expanded size past the {_size(self.limits.total_bytes)} limit; later "
                       "members not read (raise with --archive-limits total=SIZE)")
            return False
        self.total += size
        return True

    def _stop(self, reason: str) -> None:
        self.stopped = True
        self.problems.append(Problem(str(self.path), reason))


def _special_member(info: tarfile.TarInfo) -> str | None:
    """Why a tar member that is not a regular file is skipped, or None for folders."""
    if info.isdir():
        return None
    if info.issym():
        return f"symbolic link (to {info.linkname}) not followed"
    if info.islnk():
        return f"hard link (to {info.linkname}) not followed"
    if info.ischr() or info.isblk():
        return "device member not read"
    if info.isfifo():
        return "FIFO member not read"
    return "not a regular file; not read"


@dataclass(frozen=True)
class Blob:
    """Where one file's bytes are: on disk, in a zip or tar archive, or already in memory."""

    where: Literal["disk", "url", "zip", "tar", "inline"]
    path: str
    """The file on disk or its URL, or the archive (path or URL) holding the member."""
    member: str = ""
    offset: int = 0
    """Plain tar: where the member's data starts in the archive file."""
    size: int = 0
    data: bytes | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return PurePosixPath(self.member).name if self.member else basename(self.path)

    index: int = -1
    """Zip: the member's place in the central directory (two members may share a name)."""

    def read(self) -> bytes:
        if self.where in ("disk", "url"):
            with open_binary(self.path) as fh:
                return fh.read()
        if self.where == "zip":
            zf = _zip(self.path)
            return zf.read(zf.infolist()[self.index] if self.index >= 0 else self.member)
        if self.where == "tar":
            with open_binary(self.path) as fh:
                fh.seek(self.offset)
                data = fh.read(self.size)
            if len(data) != self.size:
                raise EOFError(f"archive ends inside {self.member}")
            return data
        assert self.data is not None
        return self.data


@lru_cache(maxsize=8)
def _zip(path: str) -> zipfile.ZipFile:
    """One open ZipFile per archive per process: its central directory is read once."""
    return zipfile.ZipFile(open_binary(path) if is_url(path) else path)


@dataclass(frozen=True)
class Unit:
    """One source a worker reads and scans on its own: a file, or an opencode storage tree."""

    label: str
    """How outputs name it: a path, or ``archive.tar.gz!member/path``."""
    kind: Literal["file", "tree", "opencode-dir", "task", "archive"]
    blob: Blob | None = None
    """``file``: the file."""
    files: tuple[tuple[str, Blob], ...] = ()
    """``tree``: storage-tree files by path relative to the tree root; ``task``: the task
    folder's files by name."""
    databases: tuple[Blob, ...] = ()
    """``tree``: ``opencode*.db`` files of the same data dir, read before the tree."""
    path: str = ""
    """``opencode-dir``: the data dir (or storage folder) on disk; ``tree``: the tree's label
    (``archive!data/storage``), while ``label`` names the data dir as a folder unit does;
    ``task``: the task folder's label; ``archive``: the compressed tar whose units a worker
    lists and reads itself."""
    stamp: str | None = None
    """Cheap change marker (size and mtime, zip CRC…) letting a rerun skip without reading."""


@dataclass
class Problem:
    """A path or archive that could not be listed; the batch goes on without it."""

    label: str
    reason: str


class MemberTree:
    """A ``forensics.ingest`` Tree over files of an archive (or any ``Blob``s)."""

    def __init__(self, label: str, files: Iterable[tuple[str, Blob]]) -> None:
        self.label = label
        self._files = dict(files)

    def files(self) -> Iterator[str]:
        return iter(self._files)

    def read_bytes(self, rel: str) -> bytes:
        return self._files[rel].read()


def iter_units(paths: Iterable[str | os.PathLike[str]], problems: list[Problem], *,
               exclude: Iterable[str | os.PathLike[str]] = (),
               limits: Limits = DEFAULT_LIMITS, defer_streams: bool = False) -> Iterator[Unit]:
    """Every unit under ``paths``, in a stable order; unlistable inputs go to ``problems``.

    Folders in ``exclude`` (a batch's own output folder) are not walked. ``defer_streams``
    lists a compressed tar as one ``archive`` unit instead of reading it here.
    """
    skip = {os.path.realpath(e) for e in exclude if not is_url(e)}
    skip_urls = tuple(str(e).rstrip("/") + "/" for e in exclude if is_url(e))
    for p in paths:
        if is_url(p):
            yield from _url_units(str(p), problems, limits, defer_streams, skip_urls)
            continue
        path = Path(p)
        why = regular_file(path)
        if not os.path.lexists(path) and "!" in str(p):
            yield from _member_units(str(p), problems, limits)
        elif not os.path.lexists(path):
            problems.append(Problem(str(path), "no such file or folder"))
        elif why == "is a folder":
            yield from _walk(path, problems, skip, limits, defer_streams)
        elif why is not None:  # a FIFO, socket or device is never opened: it could block
            problems.append(Problem(str(path), why))
        elif is_archive(path.name):
            yield from archive_units(path, problems, limits, defer_streams=defer_streams)
        else:
            yield _disk_unit(path)


def _url_units(url: str, problems: list[Problem], limits: Limits, defer_streams: bool,
               skip: tuple[str, ...] = ()) -> Iterator[Unit]:
    """Units under an fsspec URL: its files (storage trees grouped as in an archive) and the
    units of the archives there, except those under a URL in ``skip`` (a batch's OUT)."""
    try:
        listed = listing(url)
    except Exception as exc:  # no fsspec, unknown scheme, no credentials, network errors
        problems.append(Problem(url, f"cannot list: {_reason(exc)}"))
        return
    if listed is None:
        problems.append(Problem(url, "no such file or folder"))
        return
    is_folder, files = listed
    entries = []
    for file_url, stamp in files:
        if file_url.startswith(skip):
            continue
        if is_archive(basename(file_url)):
            yield from archive_units(file_url, problems, limits, defer_streams=defer_streams)
        elif not is_folder:
            yield Unit(label=file_url, kind="file", blob=Blob("url", file_url), stamp=stamp)
        else:
            rel = file_url[len(url.rstrip("/")) + 1:]
            entries.append((rel, Blob("url", file_url), stamp))
    if entries:
        yield from _group(url.rstrip("/"), iter(entries), problems, sep="/")


def _member_units(label: str, problems: list[Problem],
                  limits: Limits = DEFAULT_LIMITS) -> Iterator[Unit]:
    """Units named ``archive!member`` (as outputs name them): that member, or every unit under
    that folder of the archive."""
    archive, _, member = label.partition("!")
    if not (Path(archive).is_file() and is_archive(archive)):
        problems.append(Problem(label, "no such file or folder"))
        return
    found = False
    for unit in archive_units(Path(archive), problems, limits):
        if unit.label == label or unit.label.startswith(label.rstrip("/") + "/"):
            found = True
            yield unit
    if not found:
        problems.append(Problem(label, f"no session source {member!r} in {archive}"))


def _disk_unit(f: Path) -> Unit:
    try:
        st = f.stat()
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
        wal = Path(f"{f}-wal")
        if f.suffix == ".db" and wal.exists():  # new rows may live only in the WAL
            st = wal.stat()
            stamp += f":wal:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = None
    return Unit(label=str(f), kind="file", blob=Blob("disk", str(f)), stamp=stamp)


def _walk(root: Path, problems: list[Problem], skip: set[str],
          limits: Limits = DEFAULT_LIMITS, defer_streams: bool = False) -> Iterator[Unit]:
    if os.path.realpath(root) in skip:
        return
    if is_opencode_tree(root):
        yield _opencode_dir(root)
        return
    read_ahead: set[Path] = set()
    for dirpath, dirs, names in os.walk(root, onerror=lambda e: problems.append(
            Problem(str(e.filename), e.strerror or str(e)))):
        dirs.sort()
        here = Path(dirpath)
        if here in read_ahead:  # subagent transcripts, listed right after their parent's file
            names = []
        keep = []
        for d in dirs:
            sub = here / d
            if skip and os.path.realpath(sub) in skip:
                continue
            if is_opencode_tree(sub) and not (d == "storage" and is_opencode_tree(here)):
                yield _opencode_dir(sub)
            else:
                keep.append(d)
        dirs[:] = keep
        if is_cline_task(here):
            yield _task_unit(str(here), [(n, Blob("disk", str(here / n)), _stamp(here / n))
                                         for n in sorted(names) if n in TASK_FILE_NAMES])
            names = [n for n in names if n not in TASK_FILE_NAMES]
        for f in family_order(here, names, read_ahead):
            name = f.name
            if name.endswith(SESSION_SUFFIXES) or is_archive(name):
                why = regular_file(f)
                if why is not None:
                    problems.append(Problem(str(f), why))
                    continue
            if is_archive(name):
                yield from archive_units(f, problems, limits, defer_streams=defer_streams)
            elif name.endswith(SESSION_SUFFIXES) and not superseded_gemini_document(f):
                yield _disk_unit(f)


def _stamp(f: Path) -> str | None:
    try:
        st = f.stat()
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def _task_unit(label: str, members: list[tuple[str, Blob, str | None]]) -> Unit:
    stamps = [s for _n, _b, s in members]
    stamp = None if None in stamps else "|".join(stamps)  # type: ignore[arg-type]
    return Unit(label=label, kind="task", path=label,
                files=tuple((name, blob) for name, blob, _s in members), stamp=stamp)


def opencode_dir_files(d: Path) -> list[Path]:
    """The files of an opencode data dir the readers use: its ``storage/`` tree and its
    ``opencode*.db`` (with ``-wal``), not logs or the snapshot repository beside them."""
    storage = is_opencode_tree(d) or d
    data_dir = storage.parent if storage.name == "storage" else d
    files = [p for p in storage.rglob("*") if p.is_file()]
    files += [p for p in data_dir.glob("opencode*.db*") if p.is_file()]
    return sorted(set(files))


def _opencode_dir(d: Path) -> Unit:
    parts = []
    for f in opencode_dir_files(d):
        try:
            st = f.stat()
        except OSError:
            continue
        parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
    stamp = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
    return Unit(label=str(d), kind="opencode-dir", path=str(d), stamp=stamp)


# -- archives -------------------------------------------------------------------------------


def archive_units(path: str | Path, problems: list[Problem],
                  limits: Limits = DEFAULT_LIMITS, *,
                  defer_streams: bool = False) -> Iterator[Unit]:
    """Units inside one archive (a path or URL). A damaged archive yields what it could and one
    problem. ``defer_streams``: a compressed tar is one ``archive`` unit, not read here."""
    name = basename(str(path)).lower()
    if defer_streams and name.endswith(tuple(STREAM_TAR_SUFFIXES)):
        yield Unit(label=str(path), kind="archive", path=str(path))
        return
    budget = _Budget(path, limits, problems)
    try:
        if name.endswith(ZIP_SUFFIXES):
            entries = _zip_entries(path, budget)
        elif name.endswith(TAR_SUFFIXES):
            entries = _tar_entries(path, budget)
        else:
            compression = next(c for s, c in STREAM_TAR_SUFFIXES.items() if name.endswith(s))
            yield from _numbered(_group(path, _stream_tar_entries(path, compression, budget),
                                        problems))
            return
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        problems.append(Problem(str(path), f"cannot read archive: {_reason(exc)}"))
        return
    yield from _numbered(_group(path, iter(entries), problems))


def _numbered(units: Iterator[Unit]) -> Iterator[Unit]:
    """Units with distinct labels: a second member of the same name is ``name#2``, and so on
    (zip keeps both entries, tar too; reading by name alone would lose one)."""
    seen: dict[str, int] = {}
    for unit in units:
        n = seen.get(unit.label, 0) + 1
        seen[unit.label] = n
        if n > 1:
            unit = replace(unit, label=f"{unit.label}#{n}")
        yield unit


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def clean_member(member: str) -> str:
    """A member name as outputs show it: no leading ``./`` or ``/``."""
    while member.startswith("./"):
        member = member[2:]
    return member.lstrip("/")


def _zip_entries(path: str | Path, budget: _Budget) -> list[tuple[str, Blob, str]]:
    out = []
    with open_binary(str(path)) as fh, zipfile.ZipFile(fh) as zf:
        for index, info in enumerate(zf.infolist()):
            if info.is_dir():
                continue
            name = clean_member(info.filename)
            if _wanted(name) and not budget.admit(name, info.file_size):
                if budget.stopped:
                    break
                continue
            blob = Blob("zip", str(path), member=info.filename, size=info.file_size,
                        index=index)
            out.append((name, blob, f"crc:{info.CRC:08x}:{info.file_size}:{index}"))
    return out


def _tar_entries(path: str | Path, budget: _Budget) -> list[tuple[str, Blob, str | None]]:
    """Members of a plain tar. A truncated tar keeps the members before the damage, and the
    damage is reported: a header that ends early, a member running past the end of the file,
    or no end-of-archive marker (a cut exactly between two members)."""
    if is_url(path):
        size, archive_stamp = url_stat(str(path))
    else:
        st = Path(path).stat()
        size, archive_stamp = st.st_size, f"{st.st_size}:{st.st_mtime_ns}"
    out = []
    problems = budget.problems
    try:
        with open_binary(str(path)) as fh, tarfile.open(fileobj=fh, mode="r:") as tf:
            for info in tf:
                name = clean_member(info.name)
                if not info.isfile():
                    if (why := _special_member(info)) is not None and _wanted(name):
                        problems.append(Problem(f"{path}!{name}", why))
                    continue
                if info.offset_data + info.size > size:
                    problems.append(Problem(str(path), f"archive truncated inside {name}; it "
                                                       "and any later members not read"))
                    return out
                if _wanted(name) and not budget.admit(name, info.size):
                    if budget.stopped:
                        return out
                    continue
                blob = Blob("tar", str(path), member=info.name, offset=info.offset_data,
                            size=info.size)
                stamp = (f"tar:{archive_stamp}:{info.offset_data}:{info.size}"
                         if archive_stamp else None)
                out.append((name, blob, stamp))
            end = tf.offset
    except (tarfile.TarError, EOFError) as exc:
        problems.append(Problem(str(path), f"archive truncated or damaged after {len(out)} "
                                           f"members; the rest not read ({_reason(exc)})"))
        return out
    with open_binary(str(path)) as fh:
        fh.seek(end)
        tail = fh.read(1024)
    if len(tail) < 1024 or tail.strip(b"\0"):
        problems.append(Problem(str(path), "archive truncated: no end-of-archive marker after "
                                           f"the last of {len(out)} members read; members may "
                                           "be missing"))
    return out


def _open_stream(path: str | Path, compression: str) -> tuple[BinaryIO, str]:
    """A forward-only decompressed stream of the tar, and the tarfile mode to read it."""
    if compression != "zst":
        return open_binary(str(path)), f"r|{compression}"
    try:
        import zstandard
    except ImportError:  # pragma: no cover - it is a dependency
        raise OSError(0, "reading .tar.zst needs the 'zstandard' package") from None
    raw = open_binary(str(path))
    return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True), "r|"


def _stream_tar_entries(path: str | Path, compression: str,
                        budget: _Budget) -> Iterator[tuple[str, Blob, None]]:
    """Members of a compressed tar, read once in order; bytes are kept only for session files
    within the limits (a bigger member is skipped over, never held).

    A compressed tar cannot be seeked, so workers cannot open members by name: the main process
    reads each member here and the unit carries its bytes.
    """
    problems = budget.problems
    try:
        stream, mode = _open_stream(path, compression)
    except OSError as exc:
        problems.append(Problem(str(path), f"cannot read archive: {_reason(exc)}"))
        return
    try:
        with stream, tarfile.open(fileobj=stream, mode=mode) as tf:
            for info in tf:
                name = clean_member(info.name)
                if not info.isfile():
                    if (why := _special_member(info)) is not None and _wanted(name):
                        problems.append(Problem(f"{path}!{name}", why))
                    continue
                if not _wanted(name):
                    continue
                if not budget.admit(name, info.size):
                    if budget.stopped:
                        return
                    continue
                fh = tf.extractfile(info)
                data = fh.read() if fh is not None else b""
                if len(data) != info.size:
                    problems.append(Problem(str(path), f"archive truncated inside {name}; it "
                                                       "and any later members not read"))
                    return
                yield name, Blob("inline", str(path), member=info.name, size=len(data),
                                 data=data), None
    except Exception as exc:  # zlib/zstd/tar errors all mean: the rest is unreadable
        problems.append(Problem(str(path), f"archive damaged, later members not read "
                                           f"(damaged or truncated): {_reason(exc)}"))


def _wanted(name: str) -> bool:
    return name.endswith(SESSION_SUFFIXES) or is_archive(name)


def _tree_roots(names: Iterable[str]) -> list[str]:
    """Folders inside an archive that are opencode storage trees (``message/`` plus
    ``part/`` or ``session/``), as ``forensics.ingest.sniff.is_opencode_tree`` decides on disk."""
    dirs: set[str] = set()
    for n in names:
        parts = n.split("/")[:-1]
        for i in range(len(parts)):
            dirs.add("/".join(parts[: i + 1]))
    roots = []
    for d in sorted(dirs):
        if f"{d}/message" in dirs and (f"{d}/part" in dirs or f"{d}/session" in dirs):
            if not any(d.startswith(r + "/") for r in roots):
                roots.append(d)
    # Also the archive root itself.
    if "message" in dirs and ("part" in dirs or "session" in dirs):
        roots = [""]
    return roots


_TREE_SEGMENTS = {"storage", "session", "message", "part"}


def _maybe_tree(name: str) -> bool:
    """Could this member belong to an opencode data dir (so it must wait for the grouping)?"""
    parent, _, base = name.rpartition("/")
    if base.startswith("opencode") and base.endswith(".db"):
        return True
    return bool(_TREE_SEGMENTS.intersection(parent.split("/")))


def _group(path: str | Path, entries: Iterator[tuple[str, Blob, str | None]],
           problems: list[Problem], *, sep: str = "!") -> Iterator[Unit]:
    """Units from archive entries: storage trees grouped into one unit each, the rest singly.
    Labels are ``archive!member`` (``sep``: ``/`` for the files under a URL).

    Which folders are storage trees is known only once every name has been seen, so members
    that might belong to one are held back until the end; the others go out at once (for a
    compressed tar that keeps memory to the members in flight).
    """
    label = str(path)
    held: list[tuple[str, Blob, str | None]] = []
    tasks: dict[str, list[tuple[str, Blob, str | None]]] = {}
    for entry in entries:
        parent, _, base = entry[0].rpartition("/")
        if base in TASK_FILE_NAMES:
            tasks.setdefault(parent, []).append((base, *entry[1:]))
        elif _maybe_tree(entry[0]):
            held.append(entry)
        else:
            yield from _single(label, *entry, problems, sep=sep)
    for parent, members in sorted(tasks.items()):
        yield _task_unit(f"{label}{sep}{parent}" if parent else label, sorted(members))
    roots = _tree_roots(name for name, _b, _s in held)
    trees: dict[str, list[tuple[str, Blob, str | None]]] = {r: [] for r in roots}
    dbs: dict[str, list[tuple[str, Blob, str | None]]] = {r: [] for r in roots}
    data_dirs = {r: _data_dir(r) for r in roots}
    for name, blob, stamp in held:
        root = next((r for r in roots if r == "" or name.startswith(r + "/")), None)
        if root is not None:
            trees[root].append((name[len(root) + 1:] if root else name, blob, stamp))
            continue
        parent, _, base = name.rpartition("/")
        owner = next((r for r in roots if data_dirs[r] == parent), None)
        if owner is not None and base.startswith("opencode") and base.endswith(".db"):
            dbs[owner].append((name, blob, stamp))
            continue
        yield from _single(label, name, blob, stamp, problems, sep=sep)
    for root in roots:
        if not trees[root]:
            continue
        members = sorted(trees[root], key=lambda f: f[0]) + dbs[root]
        stamps = [s for _n, _b, s in members]
        stamp = None if None in stamps else "|".join(stamps)  # type: ignore[arg-type]
        data_dir = data_dirs[root]
        yield Unit(label=f"{label}{sep}{data_dir}" if data_dir else label, kind="tree",
                   path=f"{label}{sep}{root}" if root else label,
                   files=tuple((rel, blob) for rel, blob, _s in sorted(trees[root],
                                                                       key=lambda f: f[0])),
                   databases=tuple(blob for _n, blob, _s in dbs[root]), stamp=stamp)


def _data_dir(root: str) -> str:
    if root == "storage" or root.endswith("/storage"):
        return root.rpartition("/")[0]
    return root


def _single(label: str, name: str, blob: Blob, stamp: str | None,
            problems: list[Problem], *, sep: str = "!") -> Iterator[Unit]:
    if is_archive(name):
        problems.append(Problem(f"{label}{sep}{name}", "archive inside an archive is not read"))
    elif name.endswith(SESSION_SUFFIXES):
        yield Unit(label=f"{label}{sep}{name}", kind="file", blob=blob, stamp=stamp)
