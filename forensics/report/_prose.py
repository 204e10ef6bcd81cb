"""Sentence pieces and the text helpers that quote transcripts fairly.

A sentence is a tuple of ``Piece``s: our words, a rule's words, code, quoted transcript text, a
reference to a turn. Markdown and HTML each escape and link them their own way (``render``).
Quotes are cut from the head of a text only, so a pasted megabyte costs no more than a line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from forensics.model import Turn
from forensics.timeline import shorten  # noqa: F401  (quoting helpers live together here)


@dataclass(frozen=True)
class Piece:
    kind: str
    """``text`` (our words), ``words`` (a rule's or transcript's words, unquoted), ``code``,
    ``quote`` (transcript words), ``ref`` (a turn)."""
    text: str
    ordinal: int = 0


Sentence = tuple[Piece, ...]


def S(*parts: str | Piece) -> Sentence:
    """A sentence from plain strings (our words) and pieces."""
    return tuple(Piece("text", p) if isinstance(p, str) else p for p in parts if p != "")


def code(text: str) -> Piece:
    return Piece("code", text)


def quote(text: str, width: int = 240) -> Piece:
    return Piece("quote", shorten(text, width))


def prose(text: str) -> list[Piece]:
    """A rule's message: its `backticked` spans become code, the rest stays words."""
    out: list[Piece] = []
    for i, chunk in enumerate(re.split(r"`([^`\n]+)`", text)):
        if chunk:
            out.append(Piece("code" if i % 2 else "words", chunk))
    return out


def ref(turn: Turn) -> Piece:
    return Piece("ref", f"turn {turn.ordinal}", turn.ordinal)


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def gist(text: str, width: int = 240) -> list[Piece | str]:
    """A long message as its telling end: pasted tables and logs usually close on the question.

    Short messages are quoted whole; a long one becomes "a message of N lines ending with
    “…”",
    which says plainly that the quote is partial."""
    text = text.strip()
    if len(text) <= width or len(" ".join(text[: width * 2].split())) <= width \
            and len(text) <= width * 2:
        return [quote(text, width)]
    n_lines = sum(1 for ln in text.splitlines() if ln.strip())
    lines = [ln.strip() for ln in text[-4000:].splitlines() if ln.strip()]
    questions = [ln for ln in lines if ln.endswith(("?", "？"))]
    tail = questions[-1] if questions else (lines[-1] if lines else text[-width:])
    if len(tail) > width:
        tail = "…" + " ".join(tail[-width:].split())
    return [f"a message of {n_lines} line{'s' * (n_lines != 1)} "
            f"({len(text)} characters) ending with ", quote(tail, width + 2)]


def opening(text: str) -> str:
    """The first paragraph of a reply (before a blank line, a table or a list), unformatted."""
    lines: list[str] = []
    for line in plain(text).strip().splitlines():
        if not line.strip():
            if lines:
                break
            continue
        if line.lstrip().startswith(("|", "```")) and lines:
            break
        lines.append(line.strip())
    return " ".join(lines)


def plain(text: str) -> str:
    """Transcript prose without Markdown emphasis markers (they are noise inside a quote)."""
    return re.sub(r"\*\*|__", "", text)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def joined_quotes(items: Sequence[str]) -> list[Piece | str]:
    out: list[Piece | str] = []
    for i, item in enumerate(items):
        if i:
            out.append(" … ")
        out.append(quote(item, 220))
    return out


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


def shorten_block(text: str, width: int = 1200) -> str:
    """Keep a command's lines, cut only when very long."""
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def para(text: str) -> str:
    """Rule-file prose wraps lines at 100 columns; join them back into paragraphs."""
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", (text or "").strip())]
    return "\n\n".join(p for p in paras if p)
