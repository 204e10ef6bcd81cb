"""Hide obvious secrets in transcript text before it lands in any output.

Reports, tables and terminal output get pasted into tickets and chats; a transcript that once
printed an API key must not carry it further. The patterns are data, in one list:
``redaction/secrets.toml`` (shipped as ``forensics/_data/redaction``), which users extend with
files of the same shape (``secret-patterns`` in ``forensics.toml`` or
``FORENSICS_SECRET_PATTERNS``). Each pattern names the kind of secret it hides, and the
replacement keeps the surrounding words (``Authorization: Bearer [REDACTED:bearer-token]``) so
the sentence still reads. Look-alikes that are not secrets (git SHAs, UUIDs, message ids, base64
image data) are left alone, and the tests hold both sides.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from forensics import knowledge_cache
from forensics.errors import ConfigError

ENV_PATTERNS = "FORENSICS_SECRET_PATTERNS"
"""os.pathsep-separated TOML files of extra patterns, read in every process (batch workers)."""


@dataclass(frozen=True)
class SecretPattern:
    kind: str
    regex: re.Pattern[str]
    keep_prefix: bool
    hints: tuple[str, ...]
    """Lower-case substrings one of which every match holds; () means always search."""


def builtin_file() -> Path:
    from forensics.resources import data_dir

    return data_dir("redaction") / "secrets.toml"


def load_patterns(path: str | os.PathLike[str], *, shipped: bool = False
                  ) -> list[SecretPattern]:
    """The ``[[secret]]`` entries of one pattern file, checked (a bad regex names the file).

    ``shipped``: the built-in file, whose parse and patterns the knowledge cache keeps. A
    user's file is read afresh: its patterns may spell out a secret of theirs, which is not
    copied into a cache."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None

    def parse(text: str) -> dict[str, Any]:
        import tomllib  # the shipped file's: only when it is new to the knowledge cache

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    data = knowledge_cache.rule_file(text, parse) if shipped else parse(text)
    compile_pattern = knowledge_cache.compile if shipped else re.compile
    out = []
    for n, entry in enumerate(data.get("secret", []), 1):
        where = f"{path}: [[secret]] #{n}"
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str) \
                or not isinstance(entry.get("pattern"), str):
            raise ConfigError(f"{where} needs a kind and a pattern (strings)")
        try:
            regex = compile_pattern(entry["pattern"])
        except re.error as exc:
            raise ConfigError(f"{where} ({entry['kind']}): bad pattern: {exc}") from None
        keep = bool(entry.get("keep", 0))
        if keep and regex.groups < 2:
            raise ConfigError(f"{where} ({entry['kind']}): keep = 1 needs two groups "
                              "(the prefix kept, the secret hidden)")
        hints = entry.get("hints", [])
        if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
            raise ConfigError(f"{where} ({entry['kind']}): hints must be a list of strings")
        out.append(SecretPattern(entry["kind"], regex, keep, tuple(h.lower() for h in hints)))
    return out


_extra_files: tuple[str, ...] = ()


def use_extra_files(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Add users' pattern files (from the config) after the built-in list, in this process."""
    global _extra_files
    files = tuple(str(p) for p in paths)
    for f in files:
        load_patterns(f)  # fail now, naming the file, rather than inside a report
    if files != _extra_files:
        _extra_files = files
        patterns.cache_clear()


def extra_files() -> tuple[str, ...]:
    env = tuple(p for p in os.environ.get(ENV_PATTERNS, "").split(os.pathsep) if p)
    return env + _extra_files


@cache
def patterns() -> tuple[SecretPattern, ...]:
    """The built-in patterns, then every extra file's, in order."""
    found = load_patterns(builtin_file(), shipped=True)
    for f in extra_files():
        found.extend(load_patterns(f))
    return tuple(found)


def patterns_digest() -> str:
    """What the patterns are, for a batch's state key (new patterns rescan everything)."""
    import hashlib  # a batch's: a scan that only redacts does not load OpenSSL's digests

    h = hashlib.blake2b(digest_size=8)
    for p in patterns():
        h.update(f"{p.kind}\0{p.regex.pattern}\0{p.keep_prefix}\0".encode())
    return h.hexdigest()


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _hide(kind: str, keep_prefix: bool) -> Callable[[re.Match[str]], str]:
    if keep_prefix:
        return lambda m: m.group(1) + _placeholder(kind)
    return lambda m: _placeholder(kind)


_FINDERS: dict[int, tuple[tuple[SecretPattern, ...], Any, frozenset[int]]] = {}
"""``_hint_finder``'s answers by the identity of the pattern tuple (``patterns()`` is cached):
hashing the tuple hashes every pattern's compiled program, 20 of them for every text."""


def _hint_finder(found: tuple[SecretPattern, ...]) -> tuple[Any, frozenset[int]]:
    """One Aho-Corasick automaton over every pattern's hints (each hint -> the patterns it
    admits), and the patterns without hints (always searched)."""
    kept = _FINDERS.get(id(found))
    if kept is None or kept[0] is not found:
        kept = _FINDERS[id(found)] = (found, *_built_finder(found))
    return kept[1], kept[2]


def _built_finder(found: tuple[SecretPattern, ...]) -> tuple[Any, frozenset[int]]:
    import ahocorasick  # a runtime dependency (FX005's claim phrases use it too)

    admits: dict[str, list[int]] = {}
    for n, p in enumerate(found):
        for h in p.hints:
            admits.setdefault(h, []).append(n)
    automaton = ahocorasick.Automaton()
    for h, which in admits.items():
        automaton.add_word(h, tuple(which))
    if admits:
        automaton.make_automaton()
    return (automaton if admits else None), frozenset(n for n, p in enumerate(found)
                                                      if not p.hints)


def _applicable(text: str, found: tuple[SecretPattern, ...]) -> list[SecretPattern]:
    """The patterns worth searching ``text`` with, in order: those with no hints, and those one
    of whose hints the lower-cased text holds (one automaton pass finds every hint present,
    overlapping ones too; most texts hold none, and regexes cost far more)."""
    automaton, always = _hint_finder(found)
    hit = set(always)
    if automaton is not None:
        for _end, which in automaton.iter(text.lower()):
            hit.update(which)
    return [found[n] for n in sorted(hit)]


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    for p in _applicable(text, patterns()):
        text = p.regex.sub(_hide(p.kind, p.keep_prefix), text)
    return text


def secret_kinds(text: str) -> list[str]:
    """The kinds of secret ``redact`` would hide in ``text``, in pattern order (for tests)."""
    return [p.kind for p in patterns() if p.regex.search(text)]
