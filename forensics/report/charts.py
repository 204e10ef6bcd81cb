"""Small bar charts as inline SVG for the batch index: no plotting library, no script, no network.

Every label and value is escaped here, so callers can mark the result safe in a template.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

BAR = "#2563eb"
FONT = "font-family:system-ui,sans-serif;font-size:12px"


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, width: int = 640,
              color: str = BAR, label_width: int = 220) -> str:
    """Horizontal bars, one per ``(label, value)``, longest first as given."""
    if not items:
        return ""
    row = 20
    height = row * len(items) + 28
    top = max((v for _l, v in items), default=0) or 1
    span = width - label_width - 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" style="{FONT}">',
             f"<title>{escape(title)}</title>",
             f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = 24 + i * row
        w = max(1.0, span * value / top) if value else 0
        short = label if len(label) <= 34 else "…" + label[-33:]
        parts.append(f'<text x="{label_width - 6}" y="{y + 13}" text-anchor="end">'
                     f"<title>{escape(label)}</title>{escape(short)}</text>")
        parts.append(f'<rect x="{label_width}" y="{y + 2}" width="{w:.1f}" height="{row - 6}" '
                     f'fill="{color}"><title>{escape(label)}: {_num(value)}</title></rect>')
        parts.append(f'<text x="{label_width + w + 4:.1f}" y="{y + 13}">{_num(value)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def column_chart(items: Sequence[tuple[str, float]], *, title: str, width: int = 640,
                 height: int = 180, color: str = BAR) -> str:
    """Vertical columns in the given order (a time series such as incidents per week)."""
    if not items:
        return ""
    top = max((v for _l, v in items), default=0) or 1
    plot_h = height - 50
    step = (width - 40) / len(items)
    bar_w = max(1.0, step * 0.8)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" style="{FONT}">',
             f"<title>{escape(title)}</title>",
             f'<text x="0" y="14" font-weight="bold">{escape(title)}</text>',
             f'<text x="0" y="34">{_num(top)}</text>']
    every = max(1, len(items) // 8)
    for i, (label, value) in enumerate(items):
        x = 30 + i * step
        h = plot_h * value / top
        y = 24 + plot_h - h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{escape(label)}: {_num(value)}</title></rect>')
        if i % every == 0:
            parts.append(f'<text x="{x:.1f}" y="{height - 8}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
