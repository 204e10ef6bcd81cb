"""The session timeline figure: every turn as a small mark, every incident as a large one.

Pure string building, no plotting library: the figure is inline SVG inside the HTML report, so it
needs no network and no script. Turns sit along time (or along their ordinal when the transcript
has no times), one row per kind; incidents sit on their own row, colored by severity, with a
``<title>`` so hovering shows the anchor and the rule. Marks that fall on the same pixel column
are drawn once, so a session of fifty thousand turns stays a figure of a few hundred elements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from forensics.findings import Incident
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, Turn, UserTurn

WIDTH = 960
LEFT = 92
RIGHT = 16
ROW = 16
ROWS = ("user", "assistant", "tool", "event")
ROW_LABELS = {"user": "user", "assistant": "assistant", "tool": "tool result", "event": "event",
              "incidents": "incidents"}
KIND_COLORS = {
    "user": "#2563eb", "assistant": "#6b7280", "empty": "#111827", "tool": "#16a34a",
    "tool-failed": "#dc2626", "event": "#d97706",
}
SEVERITY_COLORS = {"high": "#b91c1c", "medium": "#ea580c", "low": "#ca8a04"}


def _row_and_color(turn: Turn) -> tuple[str, str]:
    if isinstance(turn, UserTurn):
        return "user", KIND_COLORS["user"]
    if isinstance(turn, AssistantTurn):
        return "assistant", KIND_COLORS["assistant" if turn.visible else "empty"]
    if isinstance(turn, ToolResultTurn):
        return "tool", KIND_COLORS["tool-failed" if turn.failed else "tool"]
    assert isinstance(turn, EventTurn)
    return "event", KIND_COLORS["event"]


def _position(session: Session) -> tuple[Callable[[Turn], float], str]:
    """A function mapping a turn to an x pixel, and the axis name (time or turn number)."""
    turns = session.turns
    times = [t.time for t in turns]
    span_left, span_right = LEFT, WIDTH - RIGHT
    known = [t for t in times if t is not None]
    if turns and len(known) == len(times) and max(known) > min(known):
        lo, hi = min(known), max(known)
        scale = (span_right - span_left) / (hi - lo)
        return (lambda t: span_left + (t.time - lo) * scale), "time"  # type: ignore[operator]
    n = max(len(turns) - 1, 1)
    scale = (span_right - span_left) / n
    return (lambda t: span_left + (t.ordinal - 1) * scale), "turn"


def timeline_svg(session: Session, incidents: Sequence[Incident], *,
                 clean: Callable[[str], str] = lambda s: s, id_prefix: str = "") -> str:
    """An inline ``<svg>`` of ``session`` with ``incidents`` marked; ``clean`` filters titles."""
    x_of, axis = _position(session)
    rows = {name: i for i, name in enumerate(ROWS + ("incidents",))}
    placed = _incident_lanes(session, incidents, x_of)
    lanes = max((lane for _i, _x, lane in placed), default=0) + 1
    top = 10
    height = top + ROW * len(ROWS) + LANE * lanes + 28
    out: list[str] = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}"'
        f' width="100%" role="img" aria-label="Timeline of {len(session.turns)} turns and '
        f'{len(incidents)} incidents">',
    ]
    for name, i in rows.items():
        y = top + i * ROW + ROW / 2 if name != "incidents" else top + i * ROW + LANE / 2
        out.append(f'<text x="{LEFT - 8}" y="{y + 4:.0f}" text-anchor="end" '
                   f'class="row-label">{ROW_LABELS[name]}</text>')
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.0f}" y2="{y:.0f}" '
                   f'class="row-line"/>')
    seen: set[tuple[int, str, str]] = set()
    for turn in session.turns:
        row, color = _row_and_color(turn)
        x = round(x_of(turn))
        key = (x, row, color)
        if key in seen:
            continue
        seen.add(key)
        y = top + rows[row] * ROW + 3
        out.append(f'<rect x="{x}" y="{y}" width="2" height="{ROW - 6}" fill="{color}">'
                   f'<title>turn {turn.ordinal} · {escape(clean(turn.anchor))} · '
                   f'{turn.kind}</title></rect>')
    base = top + rows["incidents"] * ROW + LANE / 2
    for inc, x, lane in placed:
        y = base + lane * LANE
        color = SEVERITY_COLORS.get(inc.severity, "#ca8a04")
        label = (f"{inc.code} {inc.rule} ({inc.severity}) · turn {inc.turn} · "
                 f"{clean(inc.anchor)}")
        out.append(f'<a href="#{id_prefix}{incident_id(inc)}"><circle cx="{x:.1f}" cy="{y:.0f}" '
                   f'r="{MARK_R}" fill="{color}" stroke="#fff" stroke-width="1.5" '
                   f'class="incident-mark"><title>{escape(label)}</title></circle></a>')
    axis_y = top + len(ROWS) * ROW + LANE * lanes + 14
    first, last = (session.turns[0], session.turns[-1]) if session.turns else (None, None)
    if axis == "time" and first is not None and last is not None:
        left_label, right_label = _clock(first.time), _clock(last.time)
    else:
        left_label = "turn 1"
        right_label = f"turn {len(session.turns)}"
    out.append(f'<text x="{LEFT}" y="{axis_y}" class="axis">{escape(left_label)}</text>')
    out.append(f'<text x="{WIDTH - RIGHT}" y="{axis_y}" text-anchor="end" class="axis">'
               f'{escape(right_label)}</text>')
    out.append("</svg>")
    return "".join(out)


MARK_R = 6
LANE = 16
MAX_LANES = 6
GAP = 2 * MARK_R + 3
"""Centres of two incident marks in one lane are at least this far apart, so they never
touch; marks that would are stacked in the next lane, and past the last lane shifted right."""


def _incident_lanes(session: Session, incidents: Sequence[Incident],
                    x_of: Callable[[Turn], float]) -> list[tuple[Incident, float, int]]:
    """Each incident with its x and lane: in time order, the first lane with room."""
    marks = []
    for inc in incidents:
        turn = session.turns[inc.turn - 1] if 0 < inc.turn <= len(session.turns) else None
        marks.append((x_of(turn) if turn is not None else LEFT, inc))
    marks.sort(key=lambda m: (m[0], m[1].turn))
    last: list[float] = []
    out: list[tuple[Incident, float, int]] = []
    for x, inc in marks:
        x = max(x, LEFT + MARK_R)
        lane = next((i for i, end in enumerate(last) if x - end >= GAP), None)
        if lane is None and len(last) < MAX_LANES:
            last.append(-1e9)
            lane = len(last) - 1
        if lane is None:
            lane = min(range(len(last)), key=lambda i: last[i])
            x = last[lane] + GAP
        last[lane] = x
        out.append((inc, x, lane))
    return out


def incident_id(incident: Incident) -> str:
    """The HTML id of an incident's section: stable, and safe whatever the anchor holds."""
    return f"incident-{incident.code}-{incident.turn}"


def _clock(t: float | None) -> str:
    from forensics.timeline import utc_text

    return utc_text(t)


ORDER_WIDTH = 960
ORDER_STEP_MIN = 24
"""Marks closer than this would touch; a longer chain gets a wider viewBox, scaled to fit."""


def order_svg(steps: Sequence, *, clean: Callable[[str], str] = lambda s: s,
              id_prefix: str = "") -> str:
    """The chain of events around one incident in order, one evenly spaced mark per step, so
    the sequence reads even when everything happened in the same minute. Turn numbers sit
    under the marks; a label is skipped when it would touch the previous one."""
    if not steps:
        return ""
    n = len(steps)
    left, right = 24, 24
    step = max(ORDER_STEP_MIN, (ORDER_WIDTH - left - right) / max(n - 1, 1))
    width = max(ORDER_WIDTH, round(left + right + step * max(n - 1, 0)))
    height = 54
    y = 18
    out = [f'<svg class="order" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
           f' width="100%" role="img" aria-label="Order of {n} events">',
           f'<line x1="{left}" x2="{width - right}" y1="{y}" y2="{y}" class="row-line"/>']
    last_label_end = -1e9
    for i, s in enumerate(steps):
        x = left + i * step if n > 1 else width / 2
        color = _step_color(s.label)
        r = 7 if s.flagged else 5
        stroke = ' stroke="#000" stroke-width="1.5"' if s.flagged else ""
        out.append(f'<a href="#{id_prefix}turn-{s.ordinal}"><circle cx="{x:.1f}" cy="{y}" r="{r}"'
                   f' fill="{color}"{stroke} class="order-mark"><title>turn {s.ordinal} · '
                   f'{escape(clean(s.anchor))} · {escape(s.label)}</title></circle></a>')
        label = str(s.ordinal)
        half = len(label) * 3.4
        if x - half > last_label_end + 4:
            out.append(f'<text x="{x:.1f}" y="{y + 26}" text-anchor="middle" class="axis '
                       f'order-label">{label}</text>')
            last_label_end = x + half
    out.append("</svg>")
    return "".join(out)


def _step_color(label: str) -> str:
    if label == "user":
        return KIND_COLORS["user"]
    if label in ("failed call", "aborted call"):
        return KIND_COLORS["tool-failed"]
    if label in ("result",):
        return KIND_COLORS["tool"]
    if label in ("empty reply",):
        return KIND_COLORS["empty"]
    if label in ("api error", "provider error", "abort", "interrupt", "compaction",
                 "aborted reply", "turn ended", "notification", "shell", "retry"):
        return KIND_COLORS["event"]
    return KIND_COLORS["assistant"]
