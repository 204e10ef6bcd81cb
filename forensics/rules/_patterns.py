"""Knowledge lists from rule files turned into regular expressions, one way for every rule."""

from __future__ import annotations

import re
from collections.abc import Sequence


def any_of(patterns: Sequence[str]) -> re.Pattern[str]:
    """One multiline regex from many; a leading ``(?i)`` stays local to its pattern."""
    alts = []
    for p in patterns:
        p = p.removeprefix("(?m)")
        alts.append(f"(?i:{p[4:]})" if p.startswith("(?i)") else f"(?:{p})")
    return re.compile("|".join(alts), re.MULTILINE)


def phrases(words: Sequence[str], *, prefix: bool = False) -> re.Pattern[str]:
    """Match any phrase; ASCII words at word boundaries (``prefix``: fail -> failed, fails),
    other scripts anywhere."""
    alts = []
    end = "" if prefix else r"\b"
    for w in sorted(words, key=len, reverse=True):
        esc = re.escape(w.lower())
        alts.append(rf"\b{esc}{end}" if w.isascii() and w[:1].isalnum() else esc)
    return re.compile("|".join(alts))
