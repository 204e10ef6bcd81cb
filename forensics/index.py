"""The batch index page (``index.md`` and ``index.html``): where a team starts triage.

Totals; incidents per rule, agent, model, project and week (tables and inline SVG bars); the
worst sessions; every incident with a link to its case study when one was written; the
sources that could not be read. Figures are drawn by ``forensics.charts``; the page loads
nothing from the network and runs no script.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics import knowledge_cache
from forensics.resources import templates_dir

if TYPE_CHECKING:
    import polars as pl

    from forensics.batch import BatchSummary

WORST = 20
TOP = 15
MAX_LISTED = 500
"""Incidents listed one by one on the page; the tables hold them all."""


def _group(incidents: pl.DataFrame, sessions: pl.DataFrame, key: str) -> list[dict[str, Any]]:
    """Sessions and incidents per value of ``key`` (unknown values grouped as "unknown")."""
    import polars as pl

    s = (sessions.group_by(pl.col(key).fill_null("unknown"))
         .agg(sessions=pl.len(), with_incidents=(pl.col("incidents") > 0).sum()))
    i = incidents.group_by(pl.col(key).fill_null("unknown")).agg(incidents=pl.len())
    df = (s.join(i, on=key, how="full", coalesce=True)
          .with_columns(pl.col("sessions", "with_incidents", "incidents").fill_null(0))
          .sort(["incidents", "sessions", key], descending=[True, True, False]))
    return df.to_dicts()


def _by_week(incidents: pl.DataFrame, sessions: pl.DataFrame) -> list[dict[str, Any]]:
    import polars as pl

    def weekly(df: pl.DataFrame, name: str) -> pl.DataFrame:
        return (df.filter(pl.col("started").is_not_null())
                .group_by(pl.col("started").dt.truncate("1w").dt.date().alias("week"))
                .agg(pl.len().alias(name)))

    df = (weekly(sessions, "sessions")
          .join(weekly(incidents, "incidents"), on="week", how="full", coalesce=True)
          .with_columns(pl.col("sessions", "incidents").fill_null(0)).sort("week"))
    return [{**r, "week": r["week"].isoformat()} for r in df.to_dicts()]


HARNESS_KEYS = ("agent", "model", "week")
"""What the harness-event tables are counted by."""


def harness_counts(incidents: pl.DataFrame, by: str) -> pl.DataFrame:
    """Harness events (``kind == "harness"``) per value of ``by`` (agent, model or week of the
    session's start), one column per event slug plus ``total``; unknown values as "unknown"."""
    import polars as pl

    events = incidents.filter(pl.col("kind") == "harness")
    if by == "week":
        key = (pl.col("started").dt.truncate("1w").dt.date().cast(pl.String)
               .fill_null("unknown").alias("week"))
    else:
        key = pl.col(by).fill_null("unknown").alias(by)
    slugs = _harness_slugs()
    counts = events.group_by(key).agg(
        [(pl.col("rule") == slug).sum().alias(slug) for slug in slugs]
        + [pl.len().alias("total")])
    return counts.sort(["total", by], descending=[True, False]) if by != "week" else (
        counts.sort(by))


def _harness_slugs() -> list[str]:
    from forensics.rules import rule_files

    return [f.slug for f in rule_files().values() if f.is_harness]


def _by_rule(incidents: pl.DataFrame) -> list[dict[str, Any]]:
    import polars as pl

    return (incidents.group_by("code", "rule", "title", pl.col("kind").fill_null("rule"))
            .agg(incidents=pl.len(), sessions=pl.col("session_id").n_unique(),
                 high=(pl.col("severity") == "high").sum(),
                 medium=(pl.col("severity") == "medium").sum(),
                 low=(pl.col("severity") == "low").sum())
            .sort(["incidents", "code"], descending=[True, False]).to_dicts())


def worst_sessions(incidents: pl.DataFrame, sessions: pl.DataFrame,
                   limit: int | None = None) -> pl.DataFrame:
    """The sessions with the most of the assistant's mistakes, high ones first. Harness events
    (aborts, provider errors, compactions) are counted elsewhere and never make a session
    "worst": in this table ``incidents`` and ``high`` count the other rules only."""
    import polars as pl

    mistakes = (incidents.filter(pl.col("kind").fill_null("rule") != "harness")
                .group_by("session_id", "origin")
                .agg(pl.len().alias("mistakes"),
                     (pl.col("severity") == "high").sum().alias("mistakes_high")))
    return (sessions.join(mistakes, on=["session_id", "origin"], how="inner")
            .with_columns(pl.col("mistakes").alias("incidents"),
                          pl.col("mistakes_high").alias("high"))
            .drop("mistakes", "mistakes_high")
            # Ties end on the source too: one session id may come from two sources.
            .sort(["high", "incidents", "turns", "session_id", "origin"],
                  descending=[True, True, True, False, False])
            .head(limit or WORST))


def summarize_tables(tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """Everything the index templates show, as plain rows."""
    import polars as pl

    incidents, sessions = tables["incidents"], tables["sessions"]
    worst = worst_sessions(incidents, sessions)
    first_case = (incidents.filter(pl.col("case").is_not_null())
                  .group_by("session_id", "origin").agg(pl.col("case").first()))
    worst = worst.join(first_case, on=["session_id", "origin"], how="left")
    # maintain_order: ties keep the table's own order, the same whoever scanned the rows.
    listed = incidents.sort(["severity", "origin", "turn"], maintain_order=True).head(MAX_LISTED)
    return {
        "by_rule": _by_rule(incidents),
        "by_agent": _group(incidents, sessions, "agent"),
        "by_model": _group(incidents, sessions, "model")[:TOP],
        "by_project": _group(incidents, sessions, "project")[:TOP],
        "by_week": _by_week(incidents, sessions),
        "worst": _dated(worst.to_dicts()),
        "incidents": _dated(listed.to_dicts()),
        "errors": tables["errors"].to_dicts(),
        "more_incidents": max(0, incidents.height - MAX_LISTED),
        "harness_slugs": _harness_slugs(),
        "harness": {key: harness_counts(incidents, key).to_dicts() for key in HARNESS_KEYS},
    }


def _dated(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        started = r.get("started")
        r["started"] = started.strftime("%Y-%m-%d %H:%M") if started is not None else ""
    return rows


def charts(view: dict[str, Any]) -> dict[str, str]:
    from forensics.charts import bar_chart, column_chart

    return {
        "by_rule": bar_chart([(f"{r['code']} {r['rule']}", r["incidents"])
                              for r in view["by_rule"]], title="Incidents per rule"),
        "by_agent": bar_chart([(r["agent"], r["incidents"]) for r in view["by_agent"]],
                              title="Incidents per agent"),
        "by_model": bar_chart([(r["model"], r["incidents"]) for r in view["by_model"]],
                              title="Incidents per model"),
        "by_project": bar_chart([(r["project"], r["incidents"]) for r in view["by_project"]],
                                title="Incidents per project"),
        "by_week": column_chart([(r["week"], r["incidents"]) for r in view["by_week"]],
                                title="Incidents per week (by session start)"),
    }


@cache
def _environment_class():
    import jinja2

    class RowsEnvironment(jinja2.Environment):
        """``r.code`` reads a row's item first: the view's rows are dicts, and Jinja's own
        order (the attribute, then on its AttributeError the item) took half the page's
        render, ~10,000 lookups for 500 incidents. A row holds no key named as a dict method,
        so each lookup finds what Jinja's order would."""

        def getattr(self, obj: Any, attribute: str) -> Any:
            if type(obj) is dict:
                try:
                    return obj[attribute]
                except KeyError:
                    pass
            return super().getattr(obj, attribute)

    return RowsEnvironment


def _env(autoescape: bool):
    import jinja2

    return _environment_class()(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              autoescape=autoescape, trim_blocks=True, lstrip_blocks=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              auto_reload=False,
                              bytecode_cache=knowledge_cache.template_bytecode_cache())


def _md_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def write_index(tables: dict[str, pl.DataFrame] | None, summary: BatchSummary, out: Path, *,
                view: dict[str, Any] | None = None) -> dict[str, Any]:
    """Render ``index.md`` and ``index.html`` into ``out``; returns the figures they show
    (``view``: figures already summarized from the same tables, instead of ``tables``)."""
    from markupsafe import Markup

    if view is None:
        assert tables is not None
        view = summarize_tables(tables)
    context = {"s": summary, "v": view}
    md = _env(False)
    md.filters["cell"] = _md_cell
    (out / "index.md").write_text(md.get_template("batch_index.md.j2").render(**context),
                                  encoding="utf-8")
    html = _env(True)
    svgs = {k: Markup(v) for k, v in charts(view).items()}
    (out / "index.html").write_text(
        html.get_template("batch_index.html.j2").render(charts=svgs, **context), encoding="utf-8")
    return view


# -- the figures of the last run, for a rerun that changes no table --------------------------

VIEW_FILE = ".index-view.json"
"""The index's figures (``summarize_tables``) as of the tables in OUT, with a digest of those
tables: a rerun that keeps every table as it is re-renders the index from it without reading
the tables into frames (which costs polars' import alone several times the rest of such a
rerun)."""


TABLE_TWINS = ("incidents.ndjson", "sessions.ndjson", "errors.ndjson")


def tables_digest(out: Path, contents: dict[str, bytes] | None = None) -> str | None:
    """What the tables in OUT hold (their NDJSON twins), or None when one is missing.
    ``contents``: those files' bytes when the caller has read them already."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for name in TABLE_TWINS:
        try:
            data = contents[name] if contents is not None else (out / name).read_bytes()
        except OSError:
            return None
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def save_view(view: dict[str, Any], out: Path) -> None:
    """Keep ``view`` beside the tables it was summarized from (none when a value would not
    come back as it was)."""
    import orjson

    digest = tables_digest(out)
    try:
        data = orjson.dumps({"tables": digest, "view": _tagged(view)})
    except (TypeError, ValueError):
        data = None
    path = out / VIEW_FILE
    if digest is None or data is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def cached_view(out: Path, contents: dict[str, bytes] | None = None) -> dict[str, Any] | None:
    """The figures ``save_view`` kept, when they were summarized from the tables OUT holds now
    (``contents``: the tables' NDJSON bytes, as for ``tables_digest``)."""
    import orjson

    try:
        kept = orjson.loads((out / VIEW_FILE).read_bytes())
        if not isinstance(kept, dict) or kept.get("tables") != tables_digest(out, contents) \
                or kept.get("tables") is None:
            return None
        return _untagged(kept["view"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _tagged(value: Any) -> Any:
    """``value`` as JSON that ``_untagged`` turns back into equal values of the same types."""
    import datetime as dt
    import math

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite float")
        return value
    if isinstance(value, dt.datetime):
        zone = getattr(value.tzinfo, "key", None)
        if value.tzinfo is not None and zone is None:
            raise ValueError("a time zone without a name")
        return {"$datetime": value.replace(tzinfo=None).isoformat(), "zone": zone}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, list):
        return [_tagged(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$dict": [[k, _tagged(v)] for k, v in value.items()]}
    raise TypeError(f"cannot keep a {type(value).__name__}")


def _untagged(value: Any) -> Any:
    """What ``_tagged`` kept, as the values it was given."""
    import datetime as dt

    def untag(value: Any) -> Any:  # imports once, not at each of the view's ~14,000 values
        kind = type(value)  # what orjson makes: exactly list, dict or a scalar
        if kind is list:
            return [untag(v) for v in value]
        if kind is dict:
            if "$dict" in value:
                return {k: untag(v) for k, v in value["$dict"]}
            if "$datetime" in value:
                when = dt.datetime.fromisoformat(value["$datetime"])
                if value.get("zone") is not None:
                    from zoneinfo import ZoneInfo

                    when = when.replace(tzinfo=ZoneInfo(value["zone"]))
                return when
            if "$date" in value:
                return dt.date.fromisoformat(value["$date"])
            raise ValueError("unknown tag")
        return value

    return untag(value)
