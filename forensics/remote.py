"""Inputs named by fsspec URLs (``s3://bucket/logs``, ``gs://…``, ``file:///…``), read in place.

A batch given a URL lists the files under it through fsspec and opens each one (or an archive
member, by name or offset) where it is, so a cluster worker reads its own units from object
storage and the batch never copies transcripts. fsspec (plus ``s3fs``/``gcsfs`` for those
schemes) is an optional dependency: ``pip install 'forensics[dask]'``.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
NEEDS_FSSPEC = "reading URLs needs fsspec: pip install 'forensics[dask]'"


def is_url(path: object) -> bool:
    return isinstance(path, str) and bool(_URL.match(path))


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:
        raise OSError(0, NEEDS_FSSPEC) from None
    return fsspec


def open_binary(path: str) -> BinaryIO:
    """A seekable binary file: a local path with ``open``, a URL through fsspec."""
    if not is_url(path):
        return open(path, "rb")
    return _fsspec().open(path, "rb").open()


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def listing(url: str) -> tuple[bool, list[tuple[str, str | None]]] | None:
    """``(is_folder, [(file URL, stamp)…])`` under ``url`` in name order, or ``None`` when
    nothing is there. The stamp (size and ETag or mtime) lets a rerun skip unchanged files."""
    fs, root = _fsspec().core.url_to_fs(url)
    if not fs.exists(root):
        return None
    if not fs.isdir(root):
        return False, [(url, _stamp(fs.info(root)))]
    found = fs.find(root, detail=True)
    prefix = url.rstrip("/")
    base = root.rstrip("/")
    out = []
    for path in sorted(found):
        rel = path[len(base):].lstrip("/") if path.startswith(base) else basename(path)
        out.append((f"{prefix}/{rel}", _stamp(found[path])))
    return True, out


def _stamp(info: dict[str, Any]) -> str | None:
    marker = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get(
        "LastModified") or info.get("updated") or info.get("created")
    if marker is None or info.get("size") is None:
        return None
    return f"url:{info['size']}:{marker}"


def stat(url: str) -> tuple[int, str | None]:
    """Size and change stamp of the object at ``url``."""
    fs, root = _fsspec().core.url_to_fs(url)
    info = fs.info(root)
    return int(info.get("size") or 0), _stamp(info)
