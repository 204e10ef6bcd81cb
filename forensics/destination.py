"""Where a batch writes OUT: a local folder, or an fsspec URL (``s3://bucket/triage``,
``gs://…``, ``file:///…``, ``memory://…``).

A URL is staged: the last run's state and tables are fetched from it into a local folder, the
batch writes there exactly what it writes into a local OUT (so the bytes are the same), and
what it wrote is uploaded at every checkpoint and at the end, the state last, so the URL never
holds a state whose rows are not in its tables. Case studies are uploaded by the workers that
write them (``write_through``): no page travels through the machine that runs the batch.

fsspec (plus ``s3fs``/``gcsfs`` for those schemes) is optional: ``pip install
'forensics[dask]'``. Every fault of the URL's filesystem (not installed, no credentials, not
writable) becomes one ``OutputUnavailable`` message naming the URL, before any scanning.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from forensics.errors import ForensicsError
from forensics.remote import basename, is_url

T = TypeVar("T")
NEEDS_FSSPEC = "writing to a URL needs fsspec: pip install 'forensics[dask]'"
PROBE = ".forensics-write-probe"


class OutputUnavailable(ForensicsError):
    """OUT is a URL that cannot be written: its filesystem is not installed, refuses writes,
    or its last run's files cannot be read back."""


@dataclass
class Destination:
    """OUT as the batch sees it: ``folder`` is where it writes (OUT itself, or the staging
    folder of a URL) and ``name`` what it was called."""

    name: str
    folder: Path
    url: str | None = None
    fs: Any = None
    root: str = ""
    in_process_only: bool = False
    """The URL's filesystem lives in this process only (``memory://``): workers in other
    processes would write their case studies where nobody reads them."""
    _staging: Any = field(default=None, repr=False)

    @property
    def cases(self) -> str:
        """Where the workers write case studies."""
        return f"{self.url.rstrip('/')}/cases" if self.url else str(self.folder / "cases")

    @property
    def exclude(self) -> list[str]:
        """What the unit listing must not walk into: OUT, as a URL and as a local path."""
        if self.url is None:
            return [str(self.folder)]
        local = [self.root] if _is_local(self.fs) else []
        return [self.url, *local]

    def check_workers(self, *, in_process: bool) -> None:
        """Refuse a filesystem of this process only when workers run in other processes."""
        if self.in_process_only and not in_process:
            raise OutputUnavailable(f"{self.url}: this filesystem lives in one process, and "
                                    "workers in other processes cannot write to it: run "
                                    "with --workers 1 (or give a shared URL)")

    def publish(self, names: Sequence[str]) -> None:
        """Upload ``names`` (files and folders of the staging folder, in this order) to the
        URL; a local OUT is already in place. A file goes through a temporary name, so a
        batch killed mid-upload leaves the last run's file whole; a folder (a partitioned
        dataset) replaces the URL's folder of that name."""
        if self.url is None:
            return
        for name in names:
            local = self.folder / name
            remote = f"{self.root.rstrip('/')}/{name}"
            try:
                if local.is_dir():
                    if self.fs.exists(remote):
                        self.fs.rm(remote, recursive=True)
                    _upload_tree(self.fs, local, remote)
                elif local.is_file():
                    tmp = f"{self.root.rstrip('/')}/.{name}.tmp"
                    self.fs.put_file(str(local), tmp)
                    self.fs.mv(tmp, remote)
            except Exception as exc:  # any backend's error: network, credentials, quota
                raise OutputUnavailable(f"{self.url}: cannot write {name}: {_why(exc)}") \
                    from None

    def close(self) -> None:
        if self._staging is not None:
            self._staging.cleanup()
            self._staging = None


def open_destination(out: str | Path, *, previous_run: Iterable[str] = ()) -> Destination:
    """OUT ready to write: a local folder as it is (the caller creates it), a URL checked
    for writing, with the files named in ``previous_run`` fetched into a staging folder."""
    if not is_url(out):
        return Destination(name=str(out), folder=Path(out))
    url = str(out)
    fs, root = filesystem(url)
    try:
        if fs.isfile(root):
            raise OutputUnavailable(f"{url}: is a file, not a folder")
        fs.makedirs(root, exist_ok=True)
        probe = f"{root.rstrip('/')}/{PROBE}"
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except OutputUnavailable:
        raise
    except Exception as exc:
        raise OutputUnavailable(f"{url}: not writable: {_why(exc)}") from None
    staging = tempfile.TemporaryDirectory(prefix="forensics-out-")
    folder = Path(staging.name)
    for name in previous_run:
        remote = f"{root.rstrip('/')}/{name}"
        try:
            if fs.isfile(remote):
                fs.get_file(remote, str(folder / name))
        except Exception as exc:
            staging.cleanup()
            raise OutputUnavailable(f"{url}: cannot read the last run's {name}: "
                                    f"{_why(exc)}") from None
    from fsspec.implementations.memory import MemoryFileSystem

    return Destination(name=url, folder=folder, url=url, fs=fs, root=root,
                       in_process_only=isinstance(fs, MemoryFileSystem), _staging=staging)


def write_through(url: str, write: Callable[[Path], T]) -> T:
    """``write(folder)`` into a local temporary folder named like the last part of ``url``,
    then upload what it wrote to ``url``: how a worker writes its case studies to a URL.
    Paths that ``write`` returns relative to the folder's parent stay true at the URL."""
    fs, root = filesystem(url)
    with tempfile.TemporaryDirectory(prefix="forensics-cases-") as tmp:
        local = Path(tmp) / basename(url)
        value = write(local)
        if local.is_dir():
            _upload_tree(fs, local, root)
    return value


def filesystem(url: str) -> tuple[Any, str]:
    """fsspec's filesystem and path for ``url``; ``OutputUnavailable`` when it has none here."""
    try:
        import fsspec
    except ImportError:
        raise OutputUnavailable(f"{url}: {NEEDS_FSSPEC}") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:  # fsspec knows the scheme, its package is not installed
        raise OutputUnavailable(f"{url}: {_why(exc)}") from None
    except Exception as exc:  # an unknown scheme, bad options
        raise OutputUnavailable(f"{url}: cannot open its filesystem: {_why(exc)}") from None


def _upload_tree(fs: Any, local: Path, remote: str) -> None:
    files = sorted(p for p in local.rglob("*") if p.is_file())
    for parent in sorted({p.parent for p in files}):
        rel = parent.relative_to(local).as_posix()
        fs.makedirs(remote if rel == "." else f"{remote}/{rel}", exist_ok=True)
    for p in files:
        fs.put_file(str(p), f"{remote}/{p.relative_to(local).as_posix()}")


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


__all__ = ["Destination", "OutputUnavailable", "open_destination", "write_through"]
