"""One-line summaries of turns: what ``forensics turns`` prints and reports reuse."""

from __future__ import annotations

from datetime import datetime, timezone

from forensics.model import AssistantTurn, EventTurn, ToolResultTurn, Turn, UserTurn


def utc_text(t: float | None, fmt: str = "%Y-%m-%d %H:%M UTC") -> str:
    """A Unix time as UTC text; "" when there is none or it is no date (NaN, past 9999), so a
    hostile timestamp never stops a report."""
    if t is None:
        return ""
    try:
        return datetime.fromtimestamp(t, timezone.utc).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return ""


def shorten(text: str | None, width: int = 100) -> str:
    """``text`` on one line, cut to ``width`` with an ellipsis. Looks only at the head, so a
    pasted megabyte costs no more than a short message."""
    text = text or ""
    head = text[: width * 4 + 64]
    flat = " ".join(head.split())
    if len(flat) <= width and len(head) == len(text):
        return flat
    return flat[: width - 1].rstrip() + "…"


def summarize(turn: Turn, width: int = 100) -> str:
    if isinstance(turn, UserTurn):
        prefix = f"{turn.command} " if turn.command else ""
        return shorten(prefix + (turn.arguments if turn.command and turn.arguments is not None
                                 else turn.text), width) or "(empty)"
    if isinstance(turn, AssistantTurn):
        bits = []
        if turn.error:
            bits.append(f"[{turn.error.name}]")
        if turn.aborted:
            bits.append("[aborted]")
        if turn.text.strip():
            bits.append(shorten(turn.text, width))
        for call in turn.tool_calls:
            bits.append(f"→ {call.name}: {shorten(call.command or _args(call.input), 60)}")
        if not bits:
            bits.append("(reasoning only)" if turn.reasoning.strip() else "(empty)")
        return shorten(" ".join(bits), width)
    if isinstance(turn, ToolResultTurn):
        status = []
        if turn.exit_code is not None:
            status.append(f"exit {turn.exit_code}")
        for flag in ("is_error", "killed", "timed_out", "aborted"):
            if getattr(turn, flag):
                status.append(flag.replace("is_", ""))
        head = f"{turn.name} ({', '.join(status) or 'ok'})"
        body = turn.error or turn.output
        return shorten(f"{head}: {body}" if body.strip() else head, width)
    if isinstance(turn, EventTurn):
        return shorten(f"{turn.event}: {turn.text}" if turn.text else turn.event, width)
    return ""


def _args(data: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in list(data.items())[:3])
