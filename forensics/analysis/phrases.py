"""Word lists from the rule files as regular expressions: one way of matching a phrase for
every rule and the analysis (pattern lists: ``forensics.analysis.outcome.any_of``).

A phrase matches case-insensitively, any run of white space for each space. An ASCII phrase
matches at word boundaries: before its first character and after its last when those are
letters or digits (``"complete!"`` still matches at the end of a sentence); phrases in other
scripts (Chinese, Japanese, Korean…), which do not space their words, match anywhere.

The rule files hold hundreds of patterns and a run uses few of them: ``compile_later`` makes
each a regular expression on first use (start-up compiled about 500 before). A user's config
is different: its patterns are compiled at load inside ``compiled_now()``, so a bad one fails
there, naming the file, not in the middle of a scan; the shipped rule files are held to
compiling by the test suite.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, cast

from forensics import knowledge_cache

_PATTERN_API = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
                "scanner", "pattern", "flags", "groups", "groupindex")
_compile_now = 0


class LazyPattern:
    """A regular expression compiled on its first use; then it is the compiled pattern's own
    methods that answer (bound on the instance), so a hot loop pays nothing for the wait.
    ``literal_if_invalid``: a pattern that does not compile matches its own text (the ledger's
    knowledge entries)."""

    def __init__(self, source: str, flags: int = 0, *, literal_if_invalid: bool = False) -> None:
        self._source, self._flags, self._literal = source, flags, literal_if_invalid
        # hashed for every lookup of a pattern list in a cache (``_facts._any_of`` once per
        # command): the tuple's hash is made once, not on every lookup
        self._hash = hash((source, flags, literal_if_invalid))
        if _compile_now:
            self._compiled()

    def _compiled(self) -> re.Pattern[str]:
        try:
            compiled = knowledge_cache.compile(self._source, self._flags)
        except re.error:
            if not self._literal:
                raise
            compiled = knowledge_cache.compile(re.escape(self._source), self._flags)
        for name in _PATTERN_API:
            setattr(self, name, getattr(compiled, name))
        return compiled

    def __getattr__(self, name: str) -> Any:  # only until the first use has bound the API
        if name not in _PATTERN_API:
            raise AttributeError(name)
        return getattr(self._compiled(), name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_remade, (self._source, self._flags, self._literal))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyPattern):
            return NotImplemented
        return (self._source, self._flags, self._literal) == (
            other._source, other._flags, other._literal)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return repr(self._compiled())


def source_of(pattern: re.Pattern[str]) -> tuple[str, int, bool]:
    """``(source, flags, literal_if_invalid)`` a pattern is made from: a lazy one's without
    compiling it (reading its ``pattern`` or ``flags`` would), a compiled one's own."""
    if isinstance(pattern, LazyPattern):
        return pattern._source, pattern._flags, pattern._literal
    return pattern.pattern, pattern.flags, False


def _remade(source: str, flags: int, literal: bool) -> LazyPattern:
    return LazyPattern(source, flags, literal_if_invalid=literal)


def compile_later(source: str, flags: int = 0, *,
                  literal_if_invalid: bool = False) -> re.Pattern[str]:
    """``re.compile(source, flags)`` on first use (at once inside ``compiled_now()``)."""
    return cast("re.Pattern[str]", LazyPattern(source, flags,
                                               literal_if_invalid=literal_if_invalid))


@contextmanager
def compiled_now() -> Iterator[None]:
    """Patterns made inside compile at once: a bad one raises ``re.error`` here."""
    global _compile_now
    _compile_now += 1
    try:
        yield
    finally:
        _compile_now -= 1


def phrase_pattern(words: Iterable[str], *, prefix: bool = False,
                   anchored: bool = False) -> re.Pattern[str] | None:
    """Any of the phrases (longest first), or None when there are none. ``prefix``: a phrase
    may be the start of a longer word (``fail`` -> ``failed``); ``anchored``: only at the
    start of the text."""
    alts = []
    # longest first; equal lengths in text order, so a list makes the same pattern in every
    # process (set order varies with string hashing; ``knowledge_cache`` keys on the text)
    for w in sorted({w for w in words if w.strip()}, key=lambda w: (-len(w), w)):
        esc = re.escape(w.lower()).replace(r"\ ", r"\s+")
        if w.isascii() and w[:1].isalnum():
            esc = rf"\b{esc}"
        if w.isascii() and w[-1:].isalnum() and not prefix:
            esc = rf"{esc}\b"
        alts.append(esc)
    if not alts:
        return None
    body = "|".join(alts)
    return compile_later(rf"^(?:{body})" if anchored else body, re.I)


@lru_cache(maxsize=256)
def cached_phrase_pattern(words: tuple[str, ...], *, prefix: bool = False,
                          anchored: bool = False) -> re.Pattern[str] | None:
    """``phrase_pattern`` for a list built while judging (the phrases present in a text)."""
    return phrase_pattern(words, prefix=prefix, anchored=anchored)
