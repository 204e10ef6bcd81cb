"""Answers about one text remembered while a session's pages are written.

A case study prints the same transcript texts on the session page and on its own page, in
Markdown and in HTML, and several case studies of a session read the same turns: the
redaction of a text, the telling lines of an output and the figures an assistant message
states are worked out once per session instead of once per page. Each memo is a pure function
of its arguments (and of the redaction patterns, which it watches), so outputs do not change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_MEMOS: list[TextMemo] = []


class TextMemo:
    """``fn(text, *args)`` remembered until ``forget_all`` (or until it holds ``limit``
    characters of keys). ``stamp``: what the answers depend on besides the arguments; a new
    stamp (another object) empties the memo."""

    def __init__(self, fn: Callable[..., Any], *, stamp: Callable[[], object] | None = None,
                 limit: int = 16_000_000) -> None:
        self.fn = fn
        self.stamp = stamp
        self.limit = limit
        self._found: dict[tuple, Any] = {}
        self._stamped: object = None
        self._chars = 0
        _MEMOS.append(self)

    def __call__(self, text: Any, *args: Any) -> Any:
        key = (text, *args)
        if self.stamp is not None:
            stamp = self.stamp()
            if stamp is not self._stamped:
                self.clear()
                self._stamped = stamp
        try:
            return self._found[key]
        except KeyError:
            pass
        if self._chars > self.limit:
            self.clear()
            self._stamped = self.stamp() if self.stamp is not None else None
        found = self._found[key] = self.fn(text, *args)
        self._chars += len(text) if isinstance(text, str) else 1
        return found

    def clear(self) -> None:
        self._found.clear()
        self._chars = 0
        self._stamped = None


def forget_all() -> None:
    """Empty every memo: the next session's texts rarely repeat the last one's."""
    for memo in _MEMOS:
        memo.clear()


class PartMemo:
    """What a template part rendered for one object (a case study), remembered until
    ``forget_all``: a case study's sections read the same on the session page and on the case's
    own page, whatever the heading level around them. ``key`` holds everything else the part
    reads (the id prefix, whether it redacts); the object is kept with its answer, so an id is
    never mistaken for a later object's. ``stamp`` as for ``TextMemo``."""

    def __init__(self, *, stamp: Callable[[], object] | None = None,
                 limit: int = 20_000) -> None:
        self.stamp = stamp
        self.limit = limit
        self._found: dict[tuple, tuple[object, Any]] = {}
        self._stamped: object = None
        _MEMOS.append(self)

    def __call__(self, owner: object, key: tuple, make: Callable[[], Any]) -> Any:
        if self.stamp is not None:
            stamp = self.stamp()
            if stamp is not self._stamped:
                self.clear()
                self._stamped = stamp
        found = self._found.get((id(owner), *key))
        if found is not None and found[0] is owner:
            return found[1]
        if len(self._found) >= self.limit:
            self._found.clear()
        made = make()
        self._found[(id(owner), *key)] = (owner, made)
        return made

    def clear(self) -> None:
        self._found.clear()
        self._stamped = None
