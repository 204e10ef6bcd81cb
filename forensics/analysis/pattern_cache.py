"""Compiled rule patterns kept between runs, as Python keeps byte code.

A scan compiles about 110 of the rule files' patterns and reads the prefilter needles of 165
(``ledger.needles``); ``re``'s parser and compiler are Python, so that is about 70 ms of every
run, a fifth of a small scan. What ``re.compile`` makes is a program (a list of integers) that
``_sre.compile`` turns into the pattern; this module stores that program, and the needles, in a
file keyed by the exact interpreter, and builds a stored pattern with ``_sre.compile`` directly,
which is what ``re.compile`` itself ends with.

* The file is ``$FORENSICS_CACHE_DIR`` (empty: no cache), else ``$XDG_CACHE_HOME/forensics``,
  else ``~/.cache/forensics``; one per interpreter (its version and ``re``'s ``MAGIC``).
* A pattern made this way is equal to ``re.compile``'s (``Pattern.__eq__`` compares the
  program): the first pattern each run adds is checked so, and a mismatch (another Python's
  ``re``) turns the cache off for the run. A file that cannot be read or parsed is ignored; one
  that cannot be written is not written. It is rewritten (under another name, then renamed) at
  exit only when the run added something.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from pathlib import Path
from typing import Any

import orjson

MAX_ENTRIES = 20_000
"""Past this many stored entries (configs that make patterns on the fly?) the file is no longer
written: it stays as it was."""

_state: dict[str, Any] = {"store": None, "dirty": False, "checked": False, "off": False}


def _interpreter() -> str:
    import _sre

    return f"{sys.implementation.cache_tag}-{sys.version}-{_sre.MAGIC}-{_sre.CODESIZE}"


def cache_file() -> Path | None:
    """Where the stored patterns live (None: the cache is off)."""
    chosen = os.environ.get("FORENSICS_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) / "patterns.json" if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "forensics" / "patterns.json"


def _store() -> dict[str, dict[str, Any]]:
    store = _state["store"]
    if store is None:
        store = _state["store"] = _read(cache_file())
    return store


def _read(path: Path | None) -> dict[str, dict[str, Any]]:
    empty: dict[str, dict[str, Any]] = {"patterns": {}, "needles": {}}
    if path is None:
        return empty
    try:
        data = orjson.loads(path.read_bytes())
        kept = data[_interpreter()]
        if isinstance(kept.get("patterns"), dict) and isinstance(kept.get("needles"), dict):
            return kept
    except Exception:  # missing, unreadable, another interpreter's, not ours: start afresh
        pass
    return empty


def compile(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)``, from the stored program when there is one."""
    if _state["off"]:
        return re.compile(source, flags)
    key = f"{flags}:{source}"
    entries = _store()["patterns"]
    stored = entries.get(key)
    if stored is not None:
        try:
            return _built(source, *stored)
        except Exception:  # a damaged entry: compile it again
            pass
    try:
        made = _program(source, flags)
        pattern = _built(source, *made)
    except re.error:
        raise
    except Exception:  # re's internals are not what this module knows
        _state["off"] = True
        return re.compile(source, flags)
    if not _state["checked"]:
        _state["checked"] = True
        if pattern != re.compile(source, flags):
            _state["off"] = True
            return re.compile(source, flags)
    entries[key] = made
    _changed()
    return pattern


def needles(key: str, work_out: Any) -> Any:
    """The needles stored under ``key``, or ``work_out()``'s (a tuple of strings or None),
    stored."""
    entries = _store()["needles"]
    if key in entries:
        found = entries[key]
        return tuple(found) if isinstance(found, list) else None
    found = work_out()
    if not _state["off"]:
        entries[key] = list(found) if found is not None else None
        _changed()
    return found


def _program(source: str, flags: int) -> list[Any]:
    """What ``re._compiler.compile`` hands ``_sre.compile``, as JSON-ready values."""
    from re import _compiler, _parser

    tree = _parser.parse(source, flags)
    code = _compiler._code(tree, flags)
    groupindex = dict(tree.state.groupdict)
    indexgroup: list[str | None] = [None] * tree.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return [flags | tree.state.flags, list(code), tree.state.groups - 1, groupindex, indexgroup]


def _built(source: str, flags: int, code: list[int], groups: int, groupindex: dict[str, int],
           indexgroup: list[str | None]) -> re.Pattern[str]:
    import _sre

    return _sre.compile(source, flags, code, groups, groupindex, tuple(indexgroup))


def _changed() -> None:
    if not _state["dirty"]:
        _state["dirty"] = True
        atexit.register(save)


def save() -> None:
    """Write what this run added (with what other runs stored meanwhile), if anything."""
    path = cache_file()
    if not _state["dirty"] or _state["off"] or path is None:
        return
    _state["dirty"] = False
    mine = _store()
    try:
        data = orjson.loads(path.read_bytes())
        if not isinstance(data, dict):
            data = {}
    except Exception:
        data = {}
    theirs = data.get(_interpreter())
    if isinstance(theirs, dict):
        for part in ("patterns", "needles"):
            if isinstance(theirs.get(part), dict):
                mine[part] = {**theirs[part], **mine[part]}
    if len(mine["patterns"]) + len(mine["needles"]) > MAX_ENTRIES:
        return
    data = {_interpreter(): mine}  # other interpreters' entries go: one Python at a time
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(orjson.dumps(data))
        os.replace(temporary, path)
    except OSError:  # a read-only home, a full disk: the next run compiles again
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass


def reset() -> None:
    """Forget what was loaded (tests, and a changed ``FORENSICS_CACHE_DIR``)."""
    _state.update(store=None, dirty=False, checked=False, off=False)
