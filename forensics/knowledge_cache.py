"""The rule files' knowledge as compiled, kept between runs, as Python keeps byte code.

Every run parses the eleven rule files (``tomllib`` is Python: 20 ms), compiles the ~170
patterns a scan uses and reads the prefilter needles of 165 (``ledger.needles``) from ``re``'s
parse (``re``'s parser and compiler are Python too: about 70 ms), a third of a small scan, and
compiles the ~200 methods ``dataclasses`` writes for its classes (43 ms). All four are kept,
with Jinja's compiled report templates: each rule file's parsed TOML under the digest
of its text; for each pattern the program ``re.compile`` hands ``_sre.compile`` (a list of
integers), from which a later run builds the pattern with ``_sre.compile`` directly, as
``re.compile`` itself ends; and each generated method's byte code (``marshal``, as in a
``.pyc``) under the digest of its text.

* The files are ``knowledge.json`` (patterns, needles, rule files, templates) and
  ``knowledge-code.json`` (the methods: what every command needs, ``--help`` included, read
  without the rest) in ``$FORENSICS_CACHE_DIR`` (an empty value: no cache), else
  ``$XDG_CACHE_HOME/forensics/``, else ``~/.cache/forensics/``; each holds one interpreter's
  entries (its version and ``re``'s ``MAGIC``) and is read when one of its parts is first
  asked for.
* A pattern made this way is equal to ``re.compile``'s (``Pattern.__eq__`` compares the
  program): the first pattern each run adds is checked so, and a mismatch (another Python's
  ``re``) turns the cache off for the run. A parsed rule file is kept only when JSON gives it
  back equal, and byte code only when ``marshal`` gives it back equal. A file that cannot be
  read or parsed is ignored; one that cannot be written is not written. A file is rewritten
  (under another name, then renamed) at exit only when the run added to one of its parts.
"""

from __future__ import annotations

import atexit
import binascii
import builtins
import marshal
import os
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

try:  # hashlib's own blake2b, without hashlib loading OpenSSL's digests (as forensics.findings)
    from _blake2 import blake2b
except ImportError:  # a Python without CPython's built-in module
    from hashlib import blake2b

MAX_ENTRIES = 20_000
"""Past this many entries (old versions' rule files and patterns pile up over upgrades) the
file keeps only what the run that writes it used."""

_FILES = {"knowledge.json": ("patterns", "needles", "rule_files", "templates"),
          "knowledge-code.json": ("code",)}
"""The files of the cache folder and the parts each holds. The generated methods have a file
of their own: every command, ``--help`` included, makes classes, while only a scan reads the
patterns (a day's cache, 1.3 MB, parsed whole cost ``--help`` about 6 ms of its 110)."""
_PARTS = tuple(part for parts in _FILES.values() for part in parts)
_FILE_OF = {part: name for name, parts in _FILES.items() for part in parts}

_state: dict[str, Any] = {"store": None, "dirty": set(), "checked": False, "off": False,
                          "used": None, "exec": builtins.exec}


def _interpreter() -> str:
    import _sre

    return f"{sys.implementation.cache_tag}-{sys.version}-{_sre.MAGIC}-{_sre.CODESIZE}"


def cache_folder() -> Path | None:
    """The folder of the cache's files (None: the cache is off)."""
    chosen = os.environ.get("FORENSICS_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.path.expanduser("~")
        if home.startswith("~"):  # no home to find: never a "~" folder in the working one
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "forensics"


def cache_file(part: str = "patterns") -> Path | None:
    """The file that holds ``part`` (None: the cache is off)."""
    folder = cache_folder()
    return folder / _FILE_OF[part] if folder is not None else None


def _loaded() -> dict[str, dict[str, Any]]:
    """The parts read so far (a part's file is read when one of its parts is first asked)."""
    store = _state["store"]
    if store is None:
        store = _state["store"] = {}
        _state["used"] = {part: set() for part in _PARTS}
    return store


def _part(part: str) -> dict[str, Any]:
    store = _loaded()
    if part not in store:
        store.update(_read(cache_file(part), _FILES[_FILE_OF[part]]))
    return store[part]


def _store() -> dict[str, dict[str, Any]]:
    """Every part, each file read."""
    for part in _PARTS:
        _part(part)
    return _loaded()


def _entries(part: str, key: str) -> dict[str, Any]:
    """The stored ``part``, with ``key`` noted as used by this run."""
    entries = _part(part)
    _state["used"][part].add(key)
    return entries


def _read(path: Path | None, parts: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    empty: dict[str, dict[str, Any]] = {part: {} for part in parts}
    if path is None:
        return empty
    try:
        data = orjson.loads(path.read_bytes())
        kept = data[_interpreter()]
        if all(isinstance(kept.get(part), dict) for part in parts):
            return {part: kept[part] for part in parts}
    except Exception:  # missing, unreadable, another interpreter's, not ours: start afresh
        pass
    return empty


def compile(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)``, from the stored program when there is one."""
    if _state["off"]:
        return re.compile(source, flags)
    key = f"{flags}:{source}"
    entries = _entries("patterns", key)
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
    _changed("patterns")
    return pattern


def keep_generated_code() -> None:
    """From now on, the methods ``dataclasses`` writes for forensics' own classes come from
    stored byte code (``_exec_generated``)."""
    import dataclasses

    current = getattr(dataclasses, "exec", builtins.exec)
    if current is not _exec_generated:  # a hook someone set before still gets the others
        _state["exec"] = current
        dataclasses.exec = _exec_generated  # type: ignore[attr-defined]  # shadows the builtin


def _exec_generated(source: Any, module_globals: Any = None, namespace: Any = None, /,
                    **kw: Any) -> None:
    """``exec`` as ``dataclasses`` calls it, for the text of the methods it generates.

    Making a class compiles its ``__init__``, ``__repr__``, ``__eq__`` (and when frozen
    ``__setattr__``, ``__delattr__``, ``__hash__``) from text, each with Python's compiler:
    about 200 methods, 43 ms of every start-up. The byte code of that text is kept, as Python
    keeps a module's. Only for classes of forensics' own modules; any other class is compiled
    as before."""
    if (_state["off"] or kw or not isinstance(source, str) or not isinstance(module_globals, dict)
            or not str(module_globals.get("__name__", "")).startswith("forensics.")):
        return _state["exec"](source, module_globals, namespace, **kw)
    builtins.exec(_generated_code(source), module_globals, namespace)


def _generated_code(source: str) -> types.CodeType:
    key = blake2b(source.encode("utf-8"), digest_size=16).hexdigest()
    entries = _entries("code", key)
    stored = entries.get(key)
    if isinstance(stored, str):
        try:
            return marshal.loads(binascii.a2b_base64(stored))
        except Exception:  # a damaged entry: compile it again
            pass
    # As the builtin exec compiles text for dataclasses: no __future__ flags of this module.
    code = builtins.compile(source, "<string>", "exec", dont_inherit=True)
    kept = marshal.dumps(code)
    if marshal.loads(kept) == code:
        entries[key] = binascii.b2a_base64(kept, newline=False).decode("ascii")
        _changed("code")
    return code


def template_bytecode_cache() -> Any:
    """A Jinja bytecode cache kept in this file: a report's templates compile once, not in
    every process (about 50 ms each for the case study's and the batch index's)."""
    import jinja2

    class KeptTemplates(jinja2.BytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            stored = _entries("templates", bucket.key).get(bucket.key)
            if isinstance(stored, str):
                try:  # Jinja checks its own version and the template's checksum in it
                    bucket.bytecode_from_string(binascii.a2b_base64(stored))
                except Exception:  # a damaged entry: compiled again
                    bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            if not _state["off"]:
                kept = binascii.b2a_base64(bucket.bytecode_to_string(), newline=False)
                _entries("templates", bucket.key)[bucket.key] = kept.decode("ascii")
                _changed("templates")

    return KeptTemplates()


def needles(key: str, work_out: Callable[[], tuple[str, ...] | None]
            ) -> tuple[str, ...] | None:
    """The needles stored under ``key``, or ``work_out()``'s, stored."""
    entries = _entries("needles", key)
    if key in entries:
        found = entries[key]
        return tuple(found) if isinstance(found, list) else None
    found = work_out()
    if not _state["off"]:
        entries[key] = list(found) if found is not None else None
        _changed("needles")
    return found


def rule_file(text: str, parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """``parse(text)``, a rule file's TOML, as stored under the text's digest (a new copy
    each time: callers may change it)."""
    key = blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
    entries = _entries("rule_files", key)
    stored = entries.get(key)
    if isinstance(stored, str):
        try:
            return orjson.loads(stored)
        except orjson.JSONDecodeError:
            pass
    parsed = parse(text)
    if not _state["off"]:
        try:
            kept = orjson.dumps(parsed).decode()
        except TypeError:  # a date, an integer past 64 bits: parsed again next time
            return parsed
        if orjson.loads(kept) == parsed:  # NaN, infinities and dates do not come back
            entries[key] = kept
            _changed("rule_files")
    return parsed


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


def _changed(part: str) -> None:
    if not _state["dirty"]:
        atexit.register(save)
    _state["dirty"].add(_FILE_OF[part])


def save() -> None:
    """Write what this run added (with what other runs stored meanwhile), if anything: only
    the files whose parts it added to."""
    folder = cache_folder()
    dirty, _state["dirty"] = _state["dirty"], set()
    if not dirty or _state["off"] or folder is None:
        return
    for name in sorted(dirty):
        _save_file(folder / name, _FILES[name])


def _save_file(path: Path, parts: tuple[str, ...]) -> None:
    mine = {part: _part(part) for part in parts}
    try:
        data = orjson.loads(path.read_bytes())
        if not isinstance(data, dict):
            data = {}
    except Exception:
        data = {}
    theirs = data.get(_interpreter())
    if isinstance(theirs, dict):
        for part in parts:
            if isinstance(theirs.get(part), dict):
                mine[part] = {**theirs[part], **mine[part]}
    if sum(map(len, mine.values())) > MAX_ENTRIES:
        used = _state["used"]
        mine = {part: {k: v for k, v in mine[part].items() if k in used[part]}
                for part in parts}
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
    _state.update(store=None, dirty=set(), checked=False, off=False, used=None)
