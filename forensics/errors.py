"""The one exception tree of forensics.

    ForensicsError
    ├── IngestError            a source could not be read at all (names path and line)
    │   ├── UnknownFormatError no reader recognises the content
    │   └── ReaderCrash        a reader raised on the source (a bug), isolated to it
    ├── ConfigError            a config file or rule parameter is invalid
    └── RuleError              a rule file and its implementation disagree

Only ``forensics.cli`` turns these into exit codes; everything else raises or records.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class ForensicsError(Exception):
    """Base of every error forensics raises on purpose."""


class IngestError(ForensicsError):
    def __init__(self, path: str, message: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class UnknownFormatError(IngestError):
    pass


class ReaderCrash(IngestError):
    """A reader raised on a source (a bug, not bad input): reported as ``file: reader crashed:
    …`` and isolated to that source, like an unreadable file."""

    def __init__(self, path: str, exc: BaseException) -> None:
        super().__init__(path, f"reader crashed: {crash_text(exc)}")


def crash_text(exc: BaseException) -> str:
    """``TypeError: unhashable type: 'list' at _opencode.py:357``: enough to file a bug, without
    locals (transcripts hold secrets) and on one line."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    message = " ".join(str(exc).split())
    if len(message) > 160:
        message = message[:159] + "…"
    return f"{type(exc).__name__}: {message}{where}" if message else \
        f"{type(exc).__name__}{where}"


class ConfigError(ForensicsError):
    pass


class RuleError(ForensicsError):
    pass


@contextmanager
def reading(source: str) -> Iterator[None]:
    """Tag any exception escaping the block with the input it happened on, so the CLI's
    "internal error" line can name the file (``exc.forensics_source``; the innermost wins)."""
    try:
        yield
    except Exception as exc:
        if getattr(exc, "forensics_source", None) is None:
            try:
                exc.forensics_source = str(source)  # type: ignore[attr-defined]
            except AttributeError:  # an exception type with __slots__
                pass
        raise
