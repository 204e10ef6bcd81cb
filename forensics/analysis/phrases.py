"""Word lists from the rule files as regular expressions: one way of matching a phrase for
every rule and the analysis (pattern lists: ``forensics.analysis.outcome.any_of``).

A phrase matches case-insensitively, any run of white space for each space. An ASCII phrase
matches at word boundaries: before its first character and after its last when those are
letters or digits (``"complete!"`` still matches at the end of a sentence); phrases in other
scripts (Chinese, Japanese, Korean…), which do not space their words, match anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


def phrase_pattern(words: Iterable[str], *, prefix: bool = False,
                   anchored: bool = False) -> re.Pattern[str] | None:
    """Any of the phrases (longest first), or None when there are none. ``prefix``: a phrase
    may be the start of a longer word (``fail`` -> ``failed``); ``anchored``: only at the
    start of the text."""
    alts = []
    for w in sorted({w for w in words if w.strip()}, key=len, reverse=True):
        esc = re.escape(w.lower()).replace(r"\ ", r"\s+")
        if w.isascii() and w[:1].isalnum():
            esc = rf"\b{esc}"
        if w.isascii() and w[-1:].isalnum() and not prefix:
            esc = rf"{esc}\b"
        alts.append(esc)
    if not alts:
        return None
    body = "|".join(alts)
    return re.compile(rf"^(?:{body})" if anchored else body, re.I)


@lru_cache(maxsize=256)
def cached_phrase_pattern(words: tuple[str, ...], *, prefix: bool = False,
                          anchored: bool = False) -> re.Pattern[str] | None:
    """``phrase_pattern`` for a list built while judging (the phrases present in a text)."""
    return phrase_pattern(words, prefix=prefix, anchored=anchored)
