"""Caches of what one session's texts parse to, emptied when the next session's scan starts.

A command, a script or a term is asked about many times within a session (by the ledger, by
several rules, by the report) but seldom in the next one, so these caches live for a session:
a scan's memory then follows its largest session instead of growing with the archive until
every cache is full (1.4 MB over 180 generated sessions, for no measurable CPU, see
``docs/performance.md``). Each cached function is pure, so emptying one changes no answer.
The knowledge caches (patterns built from rule files) stay for the process.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_CACHED: list = []


def per_session(maxsize: int) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)``, emptied by ``new_session``; ``maxsize`` still bounds
    one very long session."""

    def wrap(fn: F) -> F:
        cached = lru_cache(maxsize=maxsize)(fn)
        _CACHED.append(cached)
        return cached  # type: ignore[return-value]

    return wrap


def new_session() -> None:
    """Forget the previous session's texts (``engine.scan_session`` calls this first)."""
    for cached in _CACHED:
        cached.cache_clear()
