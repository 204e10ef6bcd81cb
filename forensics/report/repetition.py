"""How much of a set of case studies is boilerplate: the share of prose words in recurring shapes.

A case study reads like a form when most of its sentences, with the session's own details taken
out, are the same sentences as in every other case study. The measure (issue 15): take the prose
lines of each Markdown case study (not code fences, tables, headings, block quotes or rules),
mask quoted text (“…”, "…", `…`), numbers, ids, paths and URLs; what is left is the line's
shape. The share is the words of the lines whose shape occurs in three or more different case
studies, over all prose words. Words are counted on the masked line, so a long quote weighs no
more than the sentence around it: the measure is about our words, not the transcript's.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

RECURRING = 3
"""A shape is boilerplate when this many different case studies hold it."""

_QUOTED = re.compile(r"“[^”]*”|\"[^\"\n]*\"|(`+)(?:(?!\1).)+?\1")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
_PATH = re.compile(r"(?<![\w.])(?:~|\.{1,2})?(?:/[\w.@+-]+){2,}/?|\b[A-Za-z]:\\\S+")
_ID = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{8,}\b")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_ESCAPE = re.compile(r"\\(.)")
_MARKUP = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)")
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_MASKS = ("⟨q⟩", "⟨url⟩", "⟨path⟩", "⟨id⟩", "⟨n⟩")


def prose_lines(markdown: str) -> list[str]:
    """The prose lines of a Markdown document: outside fences, not tables, headings, quotes."""
    out: list[str] = []
    fence: str | None = None
    for raw in markdown.splitlines():
        line = raw.strip()
        opener = re.match(r"(`{3,}|~{3,})", line)
        if fence is not None:
            if opener and line.startswith(fence) and line.strip("`~") == "":
                fence = None
            continue
        if opener:
            fence = opener.group(1)
            continue
        if not line or line.startswith(("|", "#", ">", "![")) or re.fullmatch(r"[-*_ ]{3,}", line):
            continue
        line = re.sub(r"^(?:[*+-]|\d+[.)])\s+", "", line)  # a list item's marker
        if line:
            out.append(line)
    return out


def shape(line: str) -> str:
    """``line`` with its quotes, URLs, paths, ids and numbers masked and emphasis removed."""
    text = _ESCAPE.sub(r"\1", line)
    text = _QUOTED.sub(" ⟨q⟩ ", text)
    text = _URL.sub(" ⟨url⟩ ", text)
    text = _PATH.sub(" ⟨path⟩ ", text)
    text = _ID.sub(" ⟨id⟩ ", text)
    text = _NUMBER.sub(" ⟨n⟩ ", text)
    text = _MARKUP.sub("", text)
    return " ".join(text.split())


def words(shaped: str) -> int:
    """Words of a shaped line; the masks themselves are not words."""
    for mask in _MASKS:
        shaped = shaped.replace(mask, " ")
    return len(_WORD.findall(shaped))


@dataclass(frozen=True)
class Repetition:
    share: float
    """Recurring words / all prose words (0 when there are no prose words)."""
    recurring_words: int
    prose_words: int
    documents: int
    top: tuple[tuple[str, int, int], ...]
    """The most costly recurring shapes: (shape, case studies holding it, words it costs)."""


def measure(documents: Mapping[str, str] | Iterable[str], *, top: int = 10) -> Repetition:
    """The repetition of ``documents`` (Markdown case studies, by name or as a list)."""
    texts = list(documents.values()) if isinstance(documents, Mapping) else list(documents)
    shaped_docs = [[shape(ln) for ln in prose_lines(t)] for t in texts]
    holders: dict[str, set[int]] = defaultdict(set)
    for n, lines in enumerate(shaped_docs):
        for s in lines:
            holders[s].add(n)
    total = recurring = 0
    cost: dict[str, int] = defaultdict(int)
    for lines in shaped_docs:
        for s in lines:
            w = words(s)
            total += w
            if len(holders[s]) >= RECURRING:
                recurring += w
                cost[s] += w
    worst = sorted(cost.items(), key=lambda kv: -kv[1])[:top]
    return Repetition(share=recurring / total if total else 0.0, recurring_words=recurring,
                      prose_words=total, documents=len(texts),
                      top=tuple((s, len(holders[s]), w) for s, w in worst))


def case_study_files(folder: Path) -> list[Path]:
    """The per-incident Markdown case studies ``forensics report`` wrote under ``folder``."""
    return sorted(p for p in Path(folder).rglob("FX*.md") if p.is_file())


def measure_folder(folder: Path, *, top: int = 10) -> Repetition:
    return measure({str(p): p.read_text(encoding="utf-8") for p in case_study_files(folder)},
                   top=top)
