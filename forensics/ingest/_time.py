"""ISO-8601 timestamps to Unix seconds, fast enough to call on every line of a large log.

Claude Code and Codex stamp every line with an RFC 3339 UTC time (``2025-11-20T10:15:03.004Z``).
Consecutive lines share their date, hour and minute, so the epoch of that minute is cached and
only the seconds are parsed per line; anything else goes through ``datetime.fromisoformat``.
"""

from __future__ import annotations

from datetime import datetime, timezone

_MINUTES: dict[str, float] = {}
_MAX_CACHED = 4096

LATEST = 253402300799.0
"""9999-12-31T23:59:59Z: past it a time cannot be shown as a date (nor stored in a table)."""


def in_range(seconds: float | None) -> float | None:
    """``seconds`` if it is a time every renderer and table can hold (1970 to 9999), else None."""
    if seconds is None or not 0.0 <= seconds <= LATEST:  # NaN fails both comparisons too
        return None
    return seconds


def iso_to_unix(value: object) -> float | None:
    """Unix seconds for an ISO-8601 string or a number (seconds or ms); None if unreadable."""
    if type(value) is str and len(value) >= 20 and value[-1] == "Z" and value[16] == ":":
        # Fast path: "YYYY-MM-DDTHH:MM:SS[.fff]Z" in a minute seen before. A cached minute
        # starts at 1970 or later and ends a minute before LATEST at the latest, so any
        # seconds from 0 to 61 keep the sum in range: no check of it is needed here.
        base = _MINUTES.get(value[:16])
        if base is not None:
            try:
                seconds = float(value[17:-1])
            except ValueError:
                return _slow(value)
            if 0.0 <= seconds < 61.0:
                return seconds + base
            return _slow(value)
        if value[10] == "T":
            return _new_minute(value)
    if isinstance(value, str):
        return _slow(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not 0 < value < 1e15:
            return None
        return in_range(float(value) / 1000.0 if value > 1e11 else float(value))
    return None


def _new_minute(value: str) -> float | None:
    """``value`` (of the fast path's shape) in a minute not cached yet: cache it if it can be."""
    minute = value[:16]
    base = _slow(minute + ":00+00:00")
    if base is None:
        return _slow(value)
    if base <= LATEST - 61.0:
        if len(_MINUTES) >= _MAX_CACHED:
            _MINUTES.clear()
        _MINUTES[minute] = base
    try:
        seconds = float(value[17:-1])
    except ValueError:
        return _slow(value)
    if 0.0 <= seconds < 61.0:
        seconds += base
        return seconds if 0.0 <= seconds <= LATEST else None
    return _slow(value)


def _slow(value: str) -> float | None:
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return in_range(dt.timestamp())
    except (OverflowError, OSError, ValueError):
        return None
