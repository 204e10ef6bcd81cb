"""Small bar charts as inline SVG for the batch index: no plotting library, no script, no network.

Every label and value is escaped here, so callers can mark the result safe in a template. Text
has no layout engine here, so its width is estimated per character, generously (wide Latin
letters, CJK at a full em): a label is cut to the room it has, and axis labels are thinned
until they cannot touch. Rows whose value is zero are not drawn: an empty bar says nothing the
table beside the chart does not, and a chart of empty rows hides the ones that matter.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from html import escape

BAR = "#2563eb"
FONT_PX = 12
FONT = f"font-family:system-ui,sans-serif;font-size:{FONT_PX}px"


def char_px(ch: str, size: float = FONT_PX) -> float:
    """A generous estimate of one character's advance at ``size`` px."""
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return size * 1.05
    if ch in "mwMW@%":
        return size * 0.95
    if ch.isupper() or ch.isdigit() or ch in "_#&":
        return size * 0.72
    if ch in "il.,:;|!'` ":
        return size * 0.34
    return size * 0.6


def text_px(text: str, size: float = FONT_PX) -> float:
    return sum(char_px(c, size) for c in text)


def fit(text: str, room: float, size: float = FONT_PX) -> str:
    """``text`` cut (keeping its end, where ids and file names differ) to fit ``room`` px."""
    if text_px(text, size) <= room:
        return text
    out = ""
    budget = room - char_px("…", size)
    for ch in reversed(text):
        if text_px(out, size) + char_px(ch, size) > budget:
            break
        out = ch + out
    return "…" + out


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, width: int = 640,
              color: str = BAR, label_width: int = 220) -> str:
    """Horizontal bars, one per ``(label, value)`` with a value, longest first as given."""
    items = [(label, value) for label, value in items if value]
    if not items:
        return ""
    row = 20
    height = row * len(items) + 28
    top = max(v for _l, v in items)
    value_room = text_px(_num(top)) + 8
    span = width - label_width - value_room
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" style="{FONT}" class="chart">',
             f"<title>{escape(title)}</title>",
             f'<text x="0" y="14" font-weight="bold">{escape(fit(title, width))}</text>']
    for i, (label, value) in enumerate(items):
        y = 24 + i * row
        w = max(1.0, span * value / top)
        short = fit(str(label), label_width - 10)
        parts.append(f'<text x="{label_width - 6}" y="{y + 13}" text-anchor="end" '
                     f'class="label"><title>{escape(str(label))}</title>{escape(short)}</text>')
        parts.append(f'<rect x="{label_width}" y="{y + 2}" width="{w:.1f}" height="{row - 6}" '
                     f'fill="{color}"><title>{escape(str(label))}: {_num(value)}</title></rect>')
        parts.append(f'<text x="{label_width + w + 4:.1f}" y="{y + 13}" class="value">'
                     f'{_num(value)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def column_chart(items: Sequence[tuple[str, float]], *, title: str, width: int = 640,
                 height: int = 180, color: str = BAR) -> str:
    """Vertical columns in the given order (a time series such as incidents per week); every
    k-th label is shown, k chosen so that no two labels touch."""
    if not items or not any(v for _l, v in items):
        return ""
    top = max(v for _l, v in items)
    plot_h = height - 50
    left, right = 30, 10
    step = (width - left - right) / len(items)
    bar_w = max(1.0, step * 0.8)
    widest = max(text_px(str(label)) for label, _v in items) + 8
    every = max(1, math.ceil(widest / step))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" style="{FONT}" class="chart">',
             f"<title>{escape(title)}</title>",
             f'<text x="0" y="14" font-weight="bold">{escape(fit(title, width))}</text>',
             f'<text x="0" y="34" class="value">{_num(top)}</text>']
    for i, (label, value) in enumerate(items):
        x = left + i * step
        h = plot_h * value / top
        y = 24 + plot_h - h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{escape(str(label))}: {_num(value)}</title></rect>')
        if i % every == 0:
            cx = min(max(x + bar_w / 2, widest / 2), width - widest / 2)
            parts.append(f'<text x="{cx:.1f}" y="{height - 8}" text-anchor="middle" '
                         f'class="axis">{escape(str(label))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
