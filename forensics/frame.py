"""The tabular shapes of forensics output: one definition per table, used by batch and notebook.

Rows are plain dicts built per session (cheap to pickle from a batch worker); frames are built
column by column from rows against a fixed schema, so a batch file and a notebook frame always
have the same columns and dtypes. ``docs/schema.md`` documents every column; bump
``SCHEMA_VERSION`` when a column changes meaning or type.

polars is imported only when a frame is built.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from forensics.findings import Incident
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, UserTurn

if TYPE_CHECKING:
    import polars as pl

    from forensics.engine import ScanResult

SCHEMA_VERSION = "1"

# Column name -> dtype name. Dtypes are spelled as strings so this module imports without
# polars; ``_dtype`` turns them into polars types.
INCIDENT_COLUMNS: dict[str, str] = {
    "code": "str",
    "rule": "str",
    "title": "str",
    "severity": "str",
    "severity_reason": "str",
    "session_id": "str",
    "agent": "str",
    "model": "str",
    "project": "str",
    "started": "datetime",
    "turn": "i64",
    "anchor": "str",
    "evidence": "list[str]",
    "evidence_turns": "list[i64]",
    "message": "str",
    "fingerprint": "str",
    "source": "str",
    "origin": "str",
    "case": "str",
    "kind": "str",
}

SESSION_COLUMNS: dict[str, str] = {
    "session_id": "str",
    "agent": "str",
    "format": "str",
    "agent_version": "str",
    "model": "str",
    "models": "list[str]",
    "project": "str",
    "title": "str",
    "parent_id": "str",
    "started": "datetime",
    "ended": "datetime",
    "turns": "i64",
    "user_turns": "i64",
    "assistant_turns": "i64",
    "tool_results": "i64",
    "events": "i64",
    "tool_calls": "i64",
    "failed_tools": "i64",
    "tokens_in": "i64",
    "tokens_out": "i64",
    "incidents": "i64",
    "high": "i64",
    "medium": "i64",
    "low": "i64",
    "rule_counts": "list[rule_count]",
    "read_issues": "i64",
    "issues": "list[str]",
    "crashes": "list[str]",
    "source": "str",
    "origin": "str",
}

ERROR_COLUMNS: dict[str, str] = {
    "origin": "str",
    "path": "str",
    "line": "i64",
    "kind": "str",
    "reason": "str",
}

TURN_COLUMNS: dict[str, str] = {
    "session_id": "str",
    "agent": "str",
    "ordinal": "i64",
    "kind": "str",
    "anchor": "str",
    "line": "i64",
    "time": "datetime",
    "text": "str",
    "model": "str",
    "tools": "list[str]",
    "commands": "list[str]",
    "call_id": "str",
    "tool": "str",
    "exit_code": "i64",
    "failed": "bool",
    "error": "str",
    "event": "str",
    "finish": "str",
    "aborted": "bool",
    "tokens_in": "i64",
    "tokens_out": "i64",
    "source": "str",
}


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _i64(value: int | None) -> int | None:
    """A count a table can hold: a hostile log's 2**64 token count becomes null, not a crash."""
    if value is None or -(2**63) <= value < 2**63:
        return value
    return None


def _micros(value: float | datetime) -> int | None:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return (value - _EPOCH) // timedelta(microseconds=1)
    try:
        return int(value * 1_000_000)
    except (OverflowError, ValueError):  # inf, NaN
        return None


def _dtype(name: str) -> pl.DataType:
    import polars as pl

    simple = {"str": pl.String(), "i64": pl.Int64(), "bool": pl.Boolean(),
              "datetime": pl.Datetime("us", "UTC"), "f64": pl.Float64()}
    if name in simple:
        return simple[name]
    if name == "list[str]":
        return pl.List(pl.String())
    if name == "list[i64]":
        return pl.List(pl.Int64())
    if name == "list[rule_count]":
        return pl.List(pl.Struct({"code": pl.String(), "count": pl.Int64()}))
    raise ValueError(name)


def schema(columns: dict[str, str]) -> dict[str, pl.DataType]:
    """The polars schema of a table (``INCIDENT_COLUMNS``, ``SESSION_COLUMNS``…)."""
    return {name: _dtype(kind) for name, kind in columns.items()}


def frame(rows: Sequence[dict[str, Any]], columns: dict[str, str]) -> pl.DataFrame:
    """A DataFrame with exactly ``columns`` from dict rows, built one column at a time.

    Datetime columns hold unix seconds (float) in rows and become UTC microseconds here; a
    ``datetime`` (a row read back from a table) is taken to the microsecond exactly, so rows a
    batch rerun carries over equal a clean run's.
    """
    import polars as pl

    return pl.DataFrame({name: _series(name, kind, [r.get(name) for r in rows])
                         for name, kind in columns.items()})


def frame_of_tuples(rows: Sequence[tuple[Any, ...]], columns: dict[str, str]) -> pl.DataFrame:
    """``frame`` of rows held as tuples in ``columns``' order (``as_tuple``): the same frame
    from a fifth of the memory while the rows wait (a 37-key dict is about 2.3 KB, the tuple of
    its values 0.3 KB)."""
    import polars as pl

    return pl.DataFrame({name: _series(name, kind, [r[i] for r in rows])
                         for i, (name, kind) in enumerate(columns.items())})


def as_tuple(row: dict[str, Any], columns: dict[str, str]) -> tuple[Any, ...]:
    """``row``'s values in ``columns``' order, a missing one None (as ``frame`` reads it)."""
    return tuple(row.get(name) for name in columns)


def _series(name: str, kind: str, values: list[Any]) -> pl.Series:
    """One column of ``frame``: ``values`` converted to the column's dtype."""
    import polars as pl

    if kind == "datetime":
        micros = [None if v is None else _i64(_micros(v)) for v in values]
        return pl.Series(name, micros, dtype=pl.Int64).cast(_dtype(kind))
    if kind == "i64":
        return pl.Series(name, [_i64(v) for v in values], dtype=pl.Int64)
    if kind == "list[i64]":
        return _nested(name, [None if v is None else [_i64(x) for x in v] for v in values],
                       _dtype(kind))
    if kind.startswith("list["):
        return _nested(name, values, _dtype(kind))
    return pl.Series(name, values, dtype=_dtype(kind))


NESTED_CHUNK = 128
"""Rows per piece of a list column (``_nested``)."""


def _nested(name: str, values: list[Any], dtype: pl.DataType) -> pl.Series:
    """A list column built ``NESTED_CHUNK`` rows at a time, then joined into one chunk.

    polars builds a list column from Python lists with a temporary that grows with the rows
    and is kept by its allocator: about 3 KB a row, so the incidents frame of 2,160 rows cost
    7.7 MB and 20,000 rows 59 MB, for an 0.8 MB column. In pieces the same column costs 3 and
    5.5 MB (``docs/performance.md``, "List columns in pieces")."""
    import polars as pl

    if len(values) <= NESTED_CHUNK:
        return pl.Series(name, values, dtype=dtype)
    return pl.concat([pl.Series(name, values[i:i + NESTED_CHUNK], dtype=dtype)
                      for i in range(0, len(values), NESTED_CHUNK)], rechunk=True)


# -- rows --------------------------------------------------------------------------------------

IDENTITY_COLUMNS = frozenset({"origin", "session_id", "parent_id", "fingerprint", "anchor", "case",
                              "code", "rule", "severity", "agent", "format", "kind", "call_id"})
"""Columns that join or group rows and never quote a transcript: never redacted."""


def redact_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every text cell of a row that may quote a transcript (message, title, project, model,
    issues…) through the redaction helper, in place; returns the row."""
    from forensics.redact import redact

    for key, value in row.items():
        if key in IDENTITY_COLUMNS:
            continue
        if isinstance(value, str):
            row[key] = redact(value)
        elif isinstance(value, list) and value and isinstance(value[0], str):
            row[key] = [redact(v) for v in value]
    return row


def main_model(session: Session) -> str | None:
    """The model that wrote most assistant turns, else the first the session names."""
    counts = Counter(t.model for t in session.turns if isinstance(t, AssistantTurn) and t.model)
    if counts:
        return counts.most_common(1)[0][0]
    return session.models[0] if session.models else None


def _started(session: Session) -> float | None:
    if session.started is not None:
        return session.started
    return next((t.time for t in session.turns if t.time is not None), None)


def _ended(session: Session) -> float | None:
    if session.ended is not None:
        return session.ended
    return next((t.time for t in reversed(session.turns) if t.time is not None), None)


def session_row(result: ScanResult, *, origin: str | None = None) -> dict[str, Any]:
    """One ``sessions`` row for a scanned session."""
    s = result.session
    counts = s.counts()
    tokens_in = tokens_out = None
    for t in s.turns:
        if isinstance(t, AssistantTurn):
            if t.tokens_in is not None:
                tokens_in = (tokens_in or 0) + t.tokens_in
            if t.tokens_out is not None:
                tokens_out = (tokens_out or 0) + t.tokens_out
    severities = Counter(i.severity for i in result.incidents)
    per_rule = Counter(i.code for i in result.incidents)
    return {
        "session_id": s.id,
        "agent": s.agent,
        "format": s.format,
        "agent_version": s.agent_version,
        "model": main_model(s),
        "models": list(s.models) or sorted({t.model for t in s.turns
                                            if isinstance(t, AssistantTurn) and t.model}),
        "project": s.project_dir,
        "title": s.title,
        "parent_id": s.parent_id,
        "started": _started(s),
        "ended": _ended(s),
        "turns": len(s.turns),
        "user_turns": counts["user"],
        "assistant_turns": counts["assistant"],
        "tool_results": counts["tool_result"],
        "events": counts["event"],
        "tool_calls": counts["tool_calls"],
        "failed_tools": counts["failed_tools"],
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "incidents": len(result.incidents),
        "high": severities.get("high", 0),
        "medium": severities.get("medium", 0),
        "low": severities.get("low", 0),
        "rule_counts": [{"code": c, "count": n} for c, n in sorted(per_rule.items())],
        "read_issues": len(s.issues),
        "issues": [str(i) for i in s.issues],
        "crashes": [str(c) for c in result.crashes],
        "source": s.source,
        "origin": origin if origin is not None else s.source,
    }


def incident_row(incident: Incident, session: Session, *, origin: str | None = None,
                 case: str | None = None, model: str | None = None) -> dict[str, Any]:
    """One ``incidents`` row: the incident plus the session facts a triage groups by."""
    row = incident.dump(exclude=frozenset({"facts"}))
    row.update(
        model=model if model is not None else main_model(session),
        project=session.project_dir,
        started=_started(session),
        origin=origin if origin is not None else session.source,
        case=case,
        kind=rule_kind(incident.code),
    )
    return row


def rule_kind(code: str) -> str:
    """``rule`` or ``harness`` (the rule file's ``kind``); ``rule`` for a code no file has."""
    from forensics.rules import registry

    spec = registry().get(code)
    return spec.kind if spec is not None else "rule"


def incident_rows(result: ScanResult, *, origin: str | None = None,
                  cases: dict[str, str] | None = None) -> list[dict[str, Any]]:
    model = main_model(result.session)
    return [incident_row(i, result.session, origin=origin, model=model,
                         case=(cases or {}).get(i.fingerprint))
            for i in result.incidents]


def turn_rows(session: Session) -> Iterable[dict[str, Any]]:
    """One ``turns`` row per turn: the fields a notebook filters on, text in full."""
    for t in session.turns:
        row: dict[str, Any] = {
            "session_id": session.id, "agent": session.agent, "ordinal": t.ordinal,
            "kind": t.kind, "anchor": t.anchor, "line": t.line, "time": t.time,
            "source": t.file or session.source,
        }
        if isinstance(t, UserTurn):
            row["text"] = t.text
        elif isinstance(t, AssistantTurn):
            row.update(text=t.text, model=t.model, finish=t.finish, aborted=t.aborted,
                       tools=[c.name for c in t.tool_calls],
                       commands=[c.command for c in t.tool_calls if c.command],
                       error=t.error.name if t.error else None,
                       tokens_in=t.tokens_in, tokens_out=t.tokens_out)
        elif isinstance(t, ToolResultTurn):
            row.update(text=t.output, call_id=t.call_id, tool=t.name, exit_code=t.exit_code,
                       aborted=t.aborted, error=t.error,
                       failed=t.failed)
        elif isinstance(t, EventTurn):
            row.update(text=t.text, event=t.event)
        yield row


# -- frames ------------------------------------------------------------------------------------


def turns_frame(sessions: Iterable[Session]) -> pl.DataFrame:
    """Every turn of ``sessions``, one row each (see ``docs/schema.md``, table ``turns``)."""
    return frame([row for s in sessions for row in turn_rows(s)], TURN_COLUMNS)


def incidents_frame(results: Iterable[ScanResult]) -> pl.DataFrame:
    """Every incident of scanned sessions (table ``incidents``)."""
    return frame([row for r in results for row in incident_rows(r)], INCIDENT_COLUMNS)


def sessions_frame(results: Iterable[ScanResult]) -> pl.DataFrame:
    """One row per scanned session (table ``sessions``)."""
    return frame([session_row(r) for r in results], SESSION_COLUMNS)
