"""What a document format keeps until its end, and how it writes itself a piece at a time.

A JSON or SARIF document lists every session's findings after something only the last session
settles (the unreadable sources, the rules that fired). ``Spool`` keeps those findings as
compact JSON lines, in memory up to a megabyte and in a temporary file past it, so a scan over
an archive holds one session at a time; ``write_json`` then writes the document, spools
included, in orjson's ``OPT_INDENT_2`` layout, byte for byte what ``orjson.dumps`` of the whole
document would give, without the document ever being in memory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

IN_MEMORY_BYTES = 1 << 20
"""A spool moves to a temporary file past this size."""


class Spool:
    """JSON documents kept in the order given, read back one at a time."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY_BYTES)

    def add(self, doc: Any) -> None:
        self._file.write(orjson.dumps(doc) + b"\n")  # orjson escapes every newline in a string

    def __iter__(self) -> Iterator[Any]:
        self._file.seek(0)
        for line in self._file:
            yield orjson.loads(line)

    def close(self) -> None:
        self._file.close()


class Streamed:
    """A JSON list whose items ``write_json`` takes one at a time (from a spool, a generator)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items


def write_json(value: Any, depth: int = 0) -> Iterator[str]:
    """``orjson.dumps(value, option=OPT_INDENT_2)`` in pieces, where ``value`` may hold
    ``Streamed`` lists (in dicts and lists, at any depth); no trailing newline, as orjson."""
    if isinstance(value, Streamed):
        yield from _items(value.items, depth)
    elif isinstance(value, dict) and _streams(value):
        pad = "  " * (depth + 1)
        yield "{\n"
        for n, (key, member) in enumerate(value.items()):
            yield ("" if n == 0 else ",\n") + pad + orjson.dumps(key).decode() + ": "
            yield from write_json(member, depth + 1)
        yield "\n" + "  " * depth + "}"
    elif isinstance(value, list) and _streams(value):
        yield from _items(value, depth)
    else:
        yield _dumped(value, depth)


def _items(items: Iterable[Any], depth: int) -> Iterator[str]:
    pad = "  " * (depth + 1)
    empty = True
    for item in items:
        yield ("[\n" if empty else ",\n") + pad
        yield from write_json(item, depth + 1)
        empty = False
    yield "[]" if empty else "\n" + "  " * depth + "]"


def _streams(value: Any) -> bool:
    """Does ``value`` hold a ``Streamed`` list somewhere (so it cannot be dumped in one go)."""
    if isinstance(value, Streamed):
        return True
    if isinstance(value, dict):
        return any(_streams(v) for v in value.values())
    if isinstance(value, list):
        return any(_streams(v) for v in value)
    return False


def _dumped(value: Any, depth: int) -> str:
    """orjson's layout of ``value`` as it sits ``depth`` levels down: its inner lines move
    right by two spaces a level (a JSON string holds no raw newline, so every newline in the
    text is orjson's own)."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    return text.replace("\n", "\n" + "  " * depth) if depth else text
