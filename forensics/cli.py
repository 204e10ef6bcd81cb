"""The ``forensics`` command: a thin typed shell over the library.

This is the only module that turns errors into exit codes:

* 0: read everything, found nothing
* 1: found incidents
* 2: an error (nothing could be read, a bad option, a bad config)
"""

from __future__ import annotations

import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from forensics.errors import ForensicsError

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

app = typer.Typer(
    name="forensics",
    help="Find what went wrong in AI coding-agent sessions (opencode, Claude Code, Codex).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class TurnsFormat(str, Enum):
    text = "text"
    json = "json"


InputFormat = Annotated[
    Optional[str],
    typer.Option("--input-format", help="Skip sniffing: opencode-export, opencode-run, "
                 "opencode-storage, opencode-sqlite, claude-code, codex."),
]


def fail(message: str) -> "typer.Exit":
    typer.echo(f"forensics: {message}", err=True)
    return typer.Exit(EXIT_ERROR)


def load_sessions(path: Path, input_format: str | None, *, quiet_empty: bool = False):
    """Sessions of PATH; per-file errors in a folder are printed and skipped."""
    from forensics.ingest import iter_sessions

    errors: list = []
    try:
        sessions = list(iter_sessions(path, format=input_format, errors=errors))
    except ForensicsError as exc:
        raise fail(str(exc))
    for err in errors:
        typer.echo(f"forensics: {err}", err=True)
    if not sessions and not quiet_empty:
        raise fail(f"{path}: no agent sessions found")
    return sessions, errors


@app.command()
def turns(
    path: Annotated[Path, typer.Argument(help="Session file, folder or opencode data dir.")],
    format: Annotated[TurnsFormat, typer.Option("--format", "-f")] = TurnsFormat.text,
    input_format: InputFormat = None,
) -> None:
    """Print the typed timeline of each session: what forensics understood."""
    from forensics.timeline import summarize

    sessions, _ = load_sessions(path, input_format)
    if format is TurnsFormat.json:
        import orjson

        docs = [s.model_dump(mode="json") for s in sessions]
        sys.stdout.buffer.write(orjson.dumps(docs if len(docs) > 1 else docs[0],
                                             option=orjson.OPT_INDENT_2))
        sys.stdout.write("\n")
        return
    for s in sessions:
        parent = f"  (subagent of {s.parent_id})" if s.parent_id else ""
        typer.echo(f"session {s.id}  [{s.agent} {s.agent_version or ''}]  {s.source}{parent}")
        for note in s.notes:
            typer.echo(f"  note: {note}")
        for t in s.turns:
            typer.echo(f"{t.ordinal:>5}  {t.anchor:<32}  {t.kind:<11}  {summarize(t)}")
        for issue in s.issues:
            typer.echo(f"  issue: {issue}")
        typer.echo("")


class ScanFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"


SCHEMA_VERSION = 1
"""Version of the ``scan --format json`` document; bumped only on breaking changes."""

Select = Annotated[Optional[list[str]], typer.Option(
    "--select", help="Only these rules (code, code prefix or slug); repeatable.")]
Ignore = Annotated[Optional[list[str]], typer.Option(
    "--ignore", help="Skip these rules (code, code prefix or slug); repeatable.")]
ConfigPath = Annotated[Optional[Path], typer.Option(
    "--config", help="forensics.toml or pyproject.toml with [tool.forensics].")]


def build_config(config: Path | None, select: list[str] | None, ignore: list[str] | None):
    """The effective config: file (given or discovered), then command-line selection."""
    from forensics.config import load_config

    try:
        cfg = load_config(config)
        if select:
            cfg.select = list(select)
        if ignore:
            cfg.ignore = cfg.ignore + list(ignore)
        cfg.rules()  # validates names
    except ForensicsError as exc:
        raise fail(str(exc))
    return cfg


@app.command()
def scan(
    paths: Annotated[list[Path], typer.Argument(help="Session files, folders or data dirs.")],
    format: Annotated[ScanFormat, typer.Option("--format", "-f")] = ScanFormat.text,
    output: Annotated[Optional[Path], typer.Option("--output", "-o",
                      help="Write to this file instead of standard output.")] = None,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Treat unreadable records and rule crashes as errors (exit 2).")] = False,
    redact: Annotated[bool, typer.Option(
        "--redact/--no-redact", help="Redact secrets in markdown/html output.")] = True,
) -> None:
    """Find incidents in sessions: empty replies, duplicate launches, ignored errors, re-sends."""
    from forensics.engine import scan_session

    cfg = build_config(config, select, ignore)
    results, read_errors = [], []
    for path in paths:
        sessions, errors = load_sessions(path, input_format, quiet_empty=len(paths) > 1)
        read_errors.extend(errors)
        rules = cfg.rules()
        results.extend(scan_session(s, cfg, rules) for s in sessions)
    if not results:
        raise fail("no agent sessions could be read")
    if format is ScanFormat.json:
        text = render_json(results, read_errors)
    elif format is ScanFormat.text:
        text = render_text(results, read_errors)
    else:
        from forensics import report

        text = report.render_sessions(results, fmt=format.value, redact=redact)
    if output:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    incidents = sum(len(r.incidents) for r in results)
    problems = read_errors or any(r.crashes or r.session.issues for r in results)
    if strict and problems:
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_FINDINGS if incidents else EXIT_CLEAN)


def render_json(results, read_errors) -> str:
    """The ``scan --format json`` contract that CI scripts rely on (see README)."""
    import orjson

    doc = {
        "schema_version": SCHEMA_VERSION,
        "sessions": [
            {
                "id": r.session.id,
                "source": r.session.source,
                "agent": r.session.agent,
                "format": r.session.format,
                "parent_id": r.session.parent_id,
                "turns": len(r.session.turns),
                "issues": [str(i) for i in r.session.issues],
                "notes": r.session.notes,
                "rule_errors": [str(c) for c in r.crashes],
            }
            for r in results
        ],
        "findings": [
            {
                "rule": i.rule,
                "code": i.code,
                "severity": i.severity,
                "severity_reason": i.severity_reason,
                "session_id": i.session_id,
                "source": i.source,
                "turn": i.turn,
                "anchor": i.anchor,
                "evidence": i.evidence,
                "message": i.message,
                "fingerprint": i.fingerprint,
            }
            for r in results
            for i in r.incidents
        ],
        "errors": [str(e) for e in read_errors],
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def render_text(results, read_errors) -> str:
    lines: list[str] = []
    total = 0
    for r in results:
        s = r.session
        head = f"{s.source}  session {s.id} ({s.agent}, {len(s.turns)} turns)"
        if s.parent_id:
            head += f", subagent of {s.parent_id}"
        lines.append(head)
        if not r.incidents:
            lines.append("  no incidents")
        for i in r.incidents:
            total += 1
            lines.append(f"  {i.severity.upper():<6} {i.code} {i.rule:<20} turn {i.turn:<5} "
                         f"{i.anchor}")
            lines.append(f"         {i.message}")
            if i.evidence:
                lines.append(f"         evidence: {', '.join(i.evidence[:6])}"
                             + (" …" if len(i.evidence) > 6 else ""))
            lines.append(f"         severity: {i.severity_reason}")
        for issue in s.issues[:20]:
            lines.append(f"  read issue: {issue}")
        if len(s.issues) > 20:
            lines.append(f"  … {len(s.issues) - 20} more read issues")
        for crash in r.crashes:
            lines.append(f"  rule error: {crash}")
        lines.append("")
    for err in read_errors:
        lines.append(f"unreadable: {err}")
    sessions = len(results)
    lines.append(f"{total} incident{'s' * (total != 1)} in {sessions} "
                 f"session{'s' * (sessions != 1)}" + (f", {len(read_errors)} unreadable"
                                                     if read_errors else ""))
    return "\n".join(lines) + "\n"


@app.command("report")
def report_command(
    path: Annotated[Path, typer.Argument(help="Session file, folder or opencode data dir.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the reports to.")],
    redact: Annotated[bool, typer.Option(
        "--redact/--no-redact", help="Redact secrets (API keys, tokens, passwords).")] = True,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
) -> None:
    """Write a case study per incident (Markdown and HTML), one folder per session."""
    from forensics.engine import scan_session
    from forensics.report import write_reports

    cfg = build_config(config, select, ignore)
    sessions, _ = load_sessions(path, input_format)
    rules = cfg.rules()
    results = [scan_session(s, cfg, rules) for s in sessions]
    try:
        written = write_reports(results, output, redact=redact)
    except OSError as exc:
        raise fail(f"{exc.filename or output}: {exc.strerror or exc}")
    incidents = sum(len(r.incidents) for r in results)
    folders = sorted({p.parent for p in written if p.name == "index.html"})
    for folder in folders:
        n = sum(1 for p in written if p.parent == folder and p.suffix == ".md"
                and p.name != "index.md")
        typer.echo(f"{folder}/index.html  ({n} incident report{'s' * (n != 1)})")
    typer.echo(f"wrote {len(written)} files to {output} "
               f"({incidents} incident{'s' * (incidents != 1)} in {len(results)} "
               f"session{'s' * (len(results) != 1)})")
    raise typer.Exit(EXIT_FINDINGS if incidents else EXIT_CLEAN)


@app.command("rules")
def rules_command(
    name: Annotated[Optional[str], typer.Argument(help="Show one rule's documentation.")] = None,
) -> None:
    """List the rules, or print one rule's documentation."""
    from forensics.rules import registry, resolve

    try:
        specs = resolve([name]) if name else list(registry().values())
    except ForensicsError as exc:
        raise fail(str(exc))
    if not name:
        for s in specs:
            typer.echo(f"{s.code}  {s.slug:<20} {s.severity:<7} {s.status:<8} {s.title}")
        return
    for s in specs:
        typer.echo(f"{s.code} {s.slug}: {s.title}\n")
        typer.echo(f"{s.summary}\n")
        if s.rationale:
            typer.echo(f"Why it matters:\n{s.rationale.strip()}\n")
        if s.falsepositives:
            typer.echo("Not flagged / known false positives:")
            for fp in s.falsepositives:
                typer.echo(f"  - {fp}")
            typer.echo("")
        if s.remediation:
            typer.echo(f"What to do:\n{s.remediation.strip()}\n")
        typer.echo("Parameters (override in forensics.toml under [rules." + s.slug + "]):")
        for k, v in s.params.items():
            shown = repr(v)
            typer.echo(f"  {k} = {shown if len(shown) < 100 else shown[:97] + '...'}")


@app.command()
def batch(
    paths: Annotated[list[str], typer.Argument(
        help="Session files, folders (agent data dirs, any tree mixing formats) and archives "
             "(.zip, .tar, .tar.gz, .tar.zst), read in place; also fsspec URLs (s3://…, "
             "gs://…, file://…).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the tables "
                                         "and index page to; reruns skip unchanged sources.")],
    workers: Annotated[Optional[int], typer.Option(
        "--workers", "-j", min=1, help="Worker processes (default: one per core).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Rescan every source, changed or not.")
                    ] = False,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    progress: Annotated[bool, typer.Option(
        "--progress/--no-progress", help="Progress line on stderr (when it is a terminal).")
    ] = True,
    cluster: Annotated[Optional[str], typer.Option(
        "--cluster", help="Run on a Dask cluster: a scheduler address (tcp://host:8786) or "
                          "local[:N] for N local worker processes (needs forensics[dask]).")
    ] = None,
    partitioned: Annotated[bool, typer.Option(
        "--partitioned", help="Also write incidents/ and sessions/ as parquet datasets "
                              "partitioned by agent and month.")] = False,
) -> None:
    """Scan many sessions in parallel: incidents.parquet, sessions.parquet, index.html."""
    from contextlib import nullcontext

    from forensics.batch import BatchLost, run_batch
    from forensics.remote import is_url

    cfg = build_config(config, select, ignore)
    inputs = [p if is_url(p) else Path(p) for p in paths]
    try:
        if cluster is None:
            engine = nullcontext(None)
        else:
            from forensics.cluster import dask_executor

            engine = dask_executor(cluster)
        with engine as executor:
            summary = run_batch(inputs, output, workers=workers, full=full, config=cfg,
                                progress=progress, executor=executor, partitioned=partitioned)
    except BatchLost as exc:
        typer.echo(str(exc.summary))
        raise fail(str(exc))
    except ForensicsError as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"{exc.filename or output}: {exc.strerror or exc}")
    typer.echo(str(summary))
    if summary.sessions == 0:
        typer.echo("forensics: no agent sessions could be read", err=True)
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_FINDINGS if summary.incidents else EXIT_CLEAN)


@app.command()
def sample() -> None:
    """Print the path of the sample session that ships with forensics."""
    from forensics.resources import sample_session

    typer.echo(str(sample_session()))


def main() -> None:
    try:
        app()
    except ForensicsError as exc:  # last resort: never a traceback for our own errors
        typer.echo(f"forensics: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        typer.echo("forensics: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug: one line (no locals, transcripts hold secrets), exit 2
        if os.environ.get("FORENSICS_DEBUG"):
            raise
        where = traceback.extract_tb(exc.__traceback__)[-1]
        typer.echo(f"forensics: internal error {type(exc).__name__} at "
                   f"{Path(where.filename).name}:{where.lineno}; please report it "
                   "(FORENSICS_DEBUG=1 shows the traceback)", err=True)
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":
    main()
