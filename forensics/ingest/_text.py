"""Value helpers shared by the readers: very long tool outputs kept bounded, counts that are
numbers."""

from __future__ import annotations

from typing import Any

HEAD_CHARS = 8 * 1024
TAIL_CHARS = 8 * 1024


def clip(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """Keep the first ``head`` and last ``tail`` characters of a long text.

    Errors and exit markers sit at either end of a long output, so both ends are kept and the
    middle is replaced by a marker saying how much was left out. The marker is ASCII so that an
    ASCII output stays a 1-byte-per-character string in memory.
    """
    if len(text) <= head + tail:
        return text
    omitted = len(text) - head - tail
    return f"{text[:head]}\n...[{omitted} chars omitted]...\n{text[len(text) - tail:]}"


def json_int(value: Any) -> int | None:
    """A JSON whole number, else None. Not a boolean: ``true`` is an int to Python, and a
    token count of ``true`` in a damaged record must not print as one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
