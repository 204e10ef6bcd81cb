"""Word lists from rule files turned into regular expressions, one way for every rule (pattern
lists: ``forensics.analysis.outcome.any_of``)."""

from __future__ import annotations

import re
from collections.abc import Sequence


def phrases(words: Sequence[str], *, prefix: bool = False) -> re.Pattern[str]:
    """Match any phrase; ASCII words at word boundaries (``prefix``: fail -> failed, fails),
    other scripts anywhere."""
    alts = []
    end = "" if prefix else r"\b"
    for w in sorted(words, key=len, reverse=True):
        esc = re.escape(w.lower())
        alts.append(rf"\b{esc}{end}" if w.isascii() and w[:1].isalnum() else esc)
    return re.compile("|".join(alts))
