"""Cutting transcript text for messages and quotes: the one place that shortens text."""

from __future__ import annotations


def shorten(text: str | None, width: int = 100) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis. Looks only at the head, so a
    pasted megabyte costs no more than a short message."""
    text = text or ""
    head = text[: width * 4 + 64]
    flat = " ".join(head.split())
    if len(flat) <= width and len(head) == len(text):
        return flat
    return flat[: width - 1].rstrip() + "…"


def line_at(text: str, pos: int, width: int = 60) -> str:
    """The line of ``text`` that holds position ``pos``, shortened."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return shorten(text[start:end if end >= 0 else None].strip(), width)


def edges(text: str, size: int = 2000) -> str:
    """Head and tail of a long text (where status lines and errors sit)."""
    return text if len(text) <= 2 * size else text[:size] + "\n" + text[-size:]


def code_span(command: str, width: int = 100) -> str:
    """A command in backticks; a long one keeps its head and its tail (where flags differ)."""
    text = " ".join(command.split())
    if len(text) > width:
        head = text[: width // 2].rsplit(" ", 1)[0]
        tail = text[-(width // 2):].split(" ", 1)[-1]
        text = f"{head} … {tail}"
    return f"`{text}`"
