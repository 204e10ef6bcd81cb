"""A seeded mutator over the ingest fixtures: hostile variants of every registered format.

``mutants(seed, n)`` yields ``(format, label, payload)`` where payload is bytes (JSON/JSONL and
SQLite formats) or a ``{relpath: bytes}`` dict (opencode storage trees). Formats come from
``forensics.ingest.FORMATS`` and their seeds from ``tests/fixtures/ingest`` (sniffed, never by
name), so a reader added later is fuzzed as soon as it has a fixture.

Mutations are structural (a JSON value replaced by one of another type, a huge number, a year-
10000 timestamp, a non-UTF-8 string, a deep nest, a dropped key) and byte-level (flips,
truncation, a line repeated or removed). Deterministic: the same seed gives the same inputs.
"""

from __future__ import annotations

import copy
import random
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from forensics.ingest import FORMATS, sniff_bytes
from forensics.ingest.sniff import is_opencode_tree

INGEST = Path(__file__).resolve().parent / "fixtures" / "ingest"

HOSTILE_VALUES: list[Any] = [
    None, True, 0, -1, 2**63, -(2**63) - 1, 10**30, 1.5e300, float("nan"),
    253402300800000, 253402300800, -62135596800001, "", "x" * 5000, "\u0000", "\ud7ff\ufffd",
    "<script>alert(1)</script>", [], {}, [[[[[]]]]], {"type": []}, ["a", 1, None],
    {"a": {"b": {"c": [1, {"d": None}]}}}, "2026-13-45T99:99:99Z", "msg_" + "z" * 300,
]


def seeds() -> dict[str, list[tuple[str, Any]]]:
    """Format -> fixtures of that format (``(name, bytes | tree dict)``)."""
    out: dict[str, list[tuple[str, Any]]] = {fmt: [] for fmt in FORMATS}
    for p in sorted(INGEST.iterdir()):
        if p.name.endswith(".golden.json"):
            continue
        if p.is_dir():
            root = is_opencode_tree(p)
            if root is not None:
                files = {str(f.relative_to(root)): f.read_bytes()
                         for f in sorted(root.rglob("*")) if f.is_file()}
                out["opencode-storage"].append((p.name, files))
        elif p.suffix == ".sql":
            out["opencode-sqlite"].append((p.name, db_bytes(p.read_text())))
        else:
            data = p.read_bytes()
            fmt = sniff_bytes(data) or _reader_that_reads(data)
            if fmt in out:
                out[fmt].append((p.name, data))
    return out


def _reader_that_reads(data: bytes) -> str | None:
    """The format whose reader accepts ``data`` when sniffing does not know it."""
    from forensics.errors import IngestError
    from forensics.ingest import read_bytes

    for fmt in FORMATS:
        try:
            if read_bytes(data, source="seed", format=fmt):
                return fmt
        except IngestError:
            continue
    return None


def db_bytes(sql: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "opencode.db"
        con = sqlite3.connect(db)
        con.executescript(sql)
        con.commit()
        con.close()
        return db.read_bytes()


# -- JSON mutations -----------------------------------------------------------------------------


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, prefix + (i,)))
    return out


def _set(obj: Any, path: tuple, value: Any, *, delete: bool = False) -> Any:
    if not path:
        return value
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


def mutate_json(rng: random.Random, obj: Any, rounds: int = 3) -> Any:
    """``obj`` with a few values replaced by hostile ones (or keys dropped)."""
    obj = copy.deepcopy(obj)
    for _ in range(rounds):
        paths = _paths(obj)
        path = rng.choice(paths[1:] or paths)
        roll = rng.random()
        if roll < 0.15 and path:
            obj = _set(obj, path, None, delete=True)
        elif roll < 0.3:  # a sibling's value under this key (right key, wrong shape)
            other = rng.choice(paths)
            value = _get(obj, other)
            obj = _set(obj, path, copy.deepcopy(value))
        else:
            obj = _set(obj, path, copy.deepcopy(rng.choice(HOSTILE_VALUES)))
    return obj


def _get(obj: Any, path: tuple) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def dumps(obj: Any) -> bytes:
    """JSON bytes, tolerating NaN and non-str keys (as a hostile producer might)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return b"{}"


BAD_UTF8 = b'"\xff\xfe\xc3("'


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    roll = rng.random()
    if roll < 0.3:
        return data[: rng.randrange(len(data))]
    if roll < 0.5:
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if roll < 0.7:  # a string value swapped for invalid UTF-8
        i = data.find(b'"', rng.randrange(len(data)))
        j = data.find(b'"', i + 1) if i >= 0 else -1
        if j > i >= 0:
            return data[:i] + BAD_UTF8 + data[j + 1:]
        return data + b"\xff"
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    if roll < 0.85:
        lines.insert(k, lines[rng.randrange(len(lines))])
    else:
        del lines[k]
    return b"\n".join(lines)


def mutate_jsonl(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        try:
            rec = orjson.loads(lines[k])
        except orjson.JSONDecodeError:
            continue
        lines[k] = dumps(mutate_json(rng, rec, rounds=rng.randint(1, 3)))
    return b"\n".join(lines)


# -- SQLite mutations ---------------------------------------------------------------------------


def mutate_db(rng: random.Random, data: bytes) -> bytes:
    """The database with a few cells replaced by hostile values (BLOBs, bad UTF-8, mutated
    JSON, huge integers), or its bytes damaged."""
    if rng.random() < 0.2:
        return mutate_bytes(rng, data)
    con = sqlite3.connect(":memory:")
    con.deserialize(data)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    con.text_factory = bytes  # earlier rounds may have stored invalid UTF-8
    for _ in range(rng.randint(1, 4)):
        table = rng.choice(tables)
        cols = [r[1].decode() for r in con.execute(f"PRAGMA table_info({table})")]
        rows = con.execute(f"SELECT rowid, * FROM {table}").fetchall()
        if not rows or not cols:
            continue
        rowid, *values = rng.choice(rows)
        i = rng.randrange(len(cols))
        col, value = cols[i], values[i]
        roll = rng.random()
        if roll < 0.35 and isinstance(value, bytes) and value.startswith(b"{"):
            try:
                new: Any = dumps(mutate_json(rng, orjson.loads(value))).decode("utf-8", "replace")
            except orjson.JSONDecodeError:
                new = value
        elif roll < 0.55:
            new = rng.choice([b"\xff\xfe\x00bin", sqlite3.Binary(b"ses_blob"), 2**62, -1, 1e308,
                              None, "", "[]", '"str"', "{"])
        elif roll < 0.75:
            new = BAD_UTF8  # stored as TEXT below: invalid UTF-8 in a text column
            con.execute(f"UPDATE {table} SET {col} = CAST(? AS TEXT) WHERE rowid = ?",
                        (new, rowid))
            continue
        else:
            new = rng.choice(HOSTILE_VALUES)
            if isinstance(new, (list, dict)):
                new = dumps(new).decode()
            elif isinstance(new, float) and new != new:
                new = None
        try:
            con.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (new, rowid))
        except (sqlite3.Error, OverflowError):
            pass
    con.commit()
    out = con.serialize()
    con.close()
    return out


# -- the generator ------------------------------------------------------------------------------


def mutate(rng: random.Random, fmt: str, payload: Any) -> Any:
    if fmt == "opencode-sqlite":
        return mutate_db(rng, payload)
    if fmt == "opencode-storage":
        files = dict(payload)
        for _ in range(rng.randint(1, 3)):
            rel = rng.choice(sorted(files))
            try:
                doc = orjson.loads(files[rel])
                files[rel] = (dumps(mutate_json(rng, doc)) if rng.random() < 0.8
                              else mutate_bytes(rng, files[rel]))
            except orjson.JSONDecodeError:
                files[rel] = mutate_bytes(rng, files[rel])
        return files
    if rng.random() < 0.25:
        return mutate_bytes(rng, payload)
    if b"\n{" in payload.strip():  # JSONL
        return mutate_jsonl(rng, payload)
    try:
        return dumps(mutate_json(rng, orjson.loads(payload), rounds=rng.randint(1, 5)))
    except orjson.JSONDecodeError:
        return mutate_bytes(rng, payload)


def mutants(seed: int, n: int) -> Iterator[tuple[str, str, Any]]:
    """``n`` mutated inputs, cycling over every format that has a fixture."""
    rng = random.Random(seed)
    pool = [(fmt, name, payload) for fmt, items in seeds().items() for name, payload in items]
    for k in range(n):
        fmt, name, payload = pool[k % len(pool)]
        yield fmt, f"{name}#{seed}.{k}", mutate(rng, fmt, payload)
