"""The ``forensics`` command: a thin typed shell over the library.

This is the only module that turns errors into exit codes, all in ``exit_code``, which every
command calls:

* 0: nothing found
* 1: incidents found (at or above ``--fail-on``; harness events never count)
* 2: nothing could be read, a bad option or config (``--strict``: also any read problem or
  crashing rule, which otherwise are only reported)
"""

from __future__ import annotations

import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from collections.abc import Iterable, Mapping
from typing import Any

from forensics.errors import ForensicsError, IngestError, reading

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


class FailOn(str, Enum):
    low = "low"
    medium = "medium"
    high = "high"


Strict = Annotated[bool, typer.Option(
    "--strict", help="Exit 2 when anything could not be read or a rule crashed (otherwise "
                     "only reported).")]
FailOnOption = Annotated[FailOn, typer.Option(
    "--fail-on", help="Lowest severity that makes the exit code 1.")]
Redact = Annotated[bool, typer.Option(
    "--redact/--no-redact", help="Hide secrets (API keys, tokens, passwords) in every output.")]

_RANK = {"low": 0, "medium": 1, "high": 2}


def exit_code(findings: Iterable[tuple[str, str]], *, problems: int = 0, read_any: bool = True,
              strict: bool = False, fail_on: str = "low",
              specs: Mapping[str, Any] | None = None) -> int:
    """The one exit decision of every command.

    ``findings`` are ``(rule code, severity)`` pairs; ``problems`` counts what could not be read
    and crashed rules; ``read_any`` is False when no session could be read at all. Only findings
    at or above ``fail_on`` whose rule is not a harness event (``kind = "harness"`` in its rule
    file: interruptions, provider errors, compactions) make 1; problems never change 0/1 unless
    ``strict``.
    """
    if not read_any or (strict and problems):
        return EXIT_ERROR
    if specs is None:
        from forensics.rules import registry

        specs = registry()
    floor = _RANK[getattr(fail_on, "value", fail_on)]
    for code, severity in findings:
        spec = specs.get(code)
        if getattr(spec, "kind", "rule") == "harness":
            continue
        if _RANK.get(severity, 0) >= floor:
            return EXIT_FINDINGS
    return EXIT_CLEAN


def _findings(results) -> list[tuple[str, str]]:
    return [(i.code, i.severity) for r in results for i in r.incidents]


def _problems(results, read_errors) -> int:
    """What was not read or not checked: unreadable sources and records, crashed rules."""
    return len(read_errors) + sum(len(r.crashes) + len(r.session.issues) for r in results)


def fail(message: str) -> "typer.Exit":
    typer.echo(f"forensics: {message}", err=True)
    return typer.Exit(EXIT_ERROR)


def load_sessions(path: Path, input_format: str | None, *, quiet_empty: bool = False,
                  clean=None):
    """Sessions of PATH; a source that cannot be read (or crashes its reader) is printed and
    skipped, whether PATH is that file or a folder holding it."""
    from forensics.ingest import iter_sessions

    errors: list = []
    sessions: list = []
    try:
        for session in iter_sessions(path, format=input_format, errors=errors):
            sessions.append(session)
    except IngestError as exc:
        errors.append(exc)
    except ForensicsError as exc:
        raise fail(str(exc))
    for err in errors:
        typer.echo(f"forensics: {clean(str(err)) if clean else err}", err=True)
    if not sessions and not quiet_empty:
        raise typer.Exit(EXIT_ERROR) if errors else fail(f"{path}: no agent sessions found")
    return sessions, errors


def redactor(redact: bool):
    """The text filter of every output that quotes a transcript: ``redact`` or identity."""
    if not redact:
        return lambda text: text
    from forensics.report.redact import redact as hide

    return hide


def _redacted(value: Any, clean) -> Any:
    """Every string inside a JSON-able value through ``clean``."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [_redacted(v, clean) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v, clean) for k, v in value.items()}
    return value


def scan_all(sessions, cfg, rules) -> list:
    """Scan each session, tagging a bug with the session's file for the internal-error line."""
    from forensics.engine import scan_session

    out = []
    for s in sessions:
        with reading(s.source):
            out.append(scan_session(s, cfg, rules))
    return out


def render_report(results, fmt: str, redact: bool) -> str:
    """Markdown/HTML of every session; a session the renderer crashes on is left out and
    reported as ``file: renderer crashed: …``, the others are still rendered."""
    from forensics import report
    from forensics.errors import crash_text

    try:
        return report.render_sessions(results, fmt=fmt, redact=redact)
    except Exception:
        kept = []
        for r in results:
            try:
                with reading(r.session.source):
                    report.render_sessions([r], fmt=fmt, redact=redact)
                kept.append(r)
            except Exception as exc:
                typer.echo(f"forensics: {r.session.source}: renderer crashed: "
                           f"{crash_text(exc)}", err=True)
        if not kept:
            raise
        return report.render_sessions(kept, fmt=fmt, redact=redact)


@app.command()
def turns(
    path: Annotated[Path, typer.Argument(help="Session file, folder or opencode data dir.")],
    format: Annotated[TurnsFormat, typer.Option("--format", "-f")] = TurnsFormat.text,
    input_format: InputFormat = None,
    strict: Strict = False,
    redact: Redact = True,
) -> None:
    """Print the typed timeline of each session: what forensics understood."""
    from forensics.timeline import summarize

    clean = redactor(redact)
    sessions, errors = load_sessions(path, input_format, clean=clean)
    if format is TurnsFormat.json:
        import orjson

        docs = [_redacted(s.model_dump(mode="json"), clean) for s in sessions]
        sys.stdout.buffer.write(orjson.dumps(docs if len(docs) > 1 else docs[0],
                                             option=orjson.OPT_INDENT_2))
        sys.stdout.write("\n")
    else:
        for s in sessions:
            parent = f"  (subagent of {s.parent_id})" if s.parent_id else ""
            typer.echo(clean(f"session {s.id}  [{s.agent} {s.agent_version or ''}]  "
                             f"{s.source}{parent}"))
            for note in s.notes:
                typer.echo(clean(f"  note: {note}"))
            for t in s.turns:
                typer.echo(clean(f"{t.ordinal:>5}  {t.anchor:<32}  {t.kind:<11}  "
                                 f"{summarize(t)}"))
            for issue in s.issues:
                typer.echo(clean(f"  issue: {issue}"))
            typer.echo("")
    problems = len(errors) + sum(len(s.issues) for s in sessions)
    raise typer.Exit(exit_code([], problems=problems, strict=strict))


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
    strict: Strict = False,
    fail_on: FailOnOption = FailOn.low,
    redact: Redact = True,
) -> None:
    """Find incidents in sessions: empty replies, duplicate launches, ignored errors, re-sends."""
    cfg = build_config(config, select, ignore)
    clean = redactor(redact)
    results, read_errors = [], []
    for path in paths:
        sessions, errors = load_sessions(path, input_format, quiet_empty=True, clean=clean)
        read_errors.extend(errors)
        results.extend(scan_all(sessions, cfg, cfg.rules()))
    if not results:
        raise fail(f"{paths[0]}: no agent sessions found" if len(paths) == 1 and not read_errors
                   else "no agent sessions could be read")
    if format is ScanFormat.json:
        text = render_json(results, read_errors, clean)
    elif format is ScanFormat.text:
        text = render_text(results, read_errors, clean)
    else:
        text = render_report(results, format.value, redact)
    if output:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    raise typer.Exit(exit_code(_findings(results), problems=_problems(results, read_errors),
                               strict=strict, fail_on=fail_on))


def render_json(results, read_errors, clean=None) -> str:
    """The ``scan --format json`` contract that CI scripts rely on (see README); every string
    that may quote a transcript goes through ``clean`` (redaction)."""
    import orjson

    clean = clean or redactor(True)

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
    return orjson.dumps(_redacted(doc, clean), option=orjson.OPT_INDENT_2).decode() + "\n"


def render_text(results, read_errors, clean=None) -> str:
    clean = clean or redactor(True)
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
    return clean("\n".join(lines)) + "\n"


@app.command("report")
def report_command(
    path: Annotated[Path, typer.Argument(help="Session file, folder or opencode data dir.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the reports to.")],
    redact: Redact = True,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
    strict: Strict = False,
    fail_on: FailOnOption = FailOn.low,
) -> None:
    """Write a case study per incident (Markdown and HTML), one folder per session."""
    from forensics.report import write_reports

    cfg = build_config(config, select, ignore)
    sessions, read_errors = load_sessions(path, input_format, clean=redactor(redact))
    results = scan_all(sessions, cfg, cfg.rules())
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
    for r in results:
        for crash in r.crashes:
            typer.echo(f"forensics: {crash}", err=True)
    raise typer.Exit(exit_code(_findings(results), problems=_problems(results, read_errors),
                               strict=strict, fail_on=fail_on))


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
    strict: Strict = False,
    fail_on: FailOnOption = FailOn.low,
    redact: Redact = True,
    archive_limits: Annotated[Optional[str], typer.Option(
        "--archive-limits", help="Raise the per-archive limits, e.g. "
        "member=2G,total=100G,members=5000000 (default member=512M,total=32G,"
        "members=1000000).")] = None,
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

    from forensics.archive import DEFAULT_LIMITS, Limits
    from forensics.batch import BatchLost, run_batch
    from forensics.remote import is_url

    cfg = build_config(config, select, ignore)
    inputs = [p if is_url(p) else Path(p) for p in paths]
    try:
        limits = Limits.parse(archive_limits) if archive_limits else DEFAULT_LIMITS
    except ValueError as exc:
        raise fail(str(exc))
    try:
        if cluster is None:
            engine = nullcontext(None)
        else:
            from forensics.cluster import dask_executor

            engine = dask_executor(cluster)
        with engine as executor:
            summary = run_batch(inputs, output, workers=workers, full=full, config=cfg,
                                progress=progress, redact=redact, limits=limits,
                                executor=executor, partitioned=partitioned)
    except BatchLost as exc:
        typer.echo(redactor(redact)(str(exc.summary)))
        raise fail(str(exc))
    except ForensicsError as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"{exc.filename or output}: {exc.strerror or exc}")
    typer.echo(redactor(redact)(str(summary)))
    if summary.sessions == 0:
        typer.echo("forensics: no agent sessions could be read", err=True)
    raise typer.Exit(exit_code(summary.findings, problems=len(summary.errors) + summary.read_issues,
                               read_any=summary.sessions > 0, strict=strict, fail_on=fail_on))


class EvalFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


@app.command("eval")
def eval_command(
    labels: Annotated[list[Path], typer.Argument(
        help="labels.json files, or folders searched for them (see docs/accuracy.md).",
        metavar="LABELS...")],
    format: Annotated[EvalFormat, typer.Option("--format", "-f")] = EvalFormat.text,
    include_low: Annotated[bool, typer.Option(
        "--include-low", help="Count low-confidence incidents (optional by default).")] = False,
    min_f1: Annotated[Optional[float], typer.Option(
        "--min-f1", help="Exit 1 when a measured rule's F1 (or all rules') is below this.")
    ] = None,
    max_fp_per_10: Annotated[Optional[float], typer.Option(
        "--max-fp-per-10", help="Exit 1 when a measured rule (or all rules together) raises "
        "more false alarms per 10 sessions.")] = None,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    redact: Annotated[bool, typer.Option(
        "--redact/--no-redact", help="Redact secrets in quoted notes and messages.")] = True,
) -> None:
    """Measure the rules against hand-labelled sessions: TP/FP/FN, precision, recall, F1."""
    from forensics import evaluation

    cfg = build_config(config, select, ignore)
    try:
        label_files = evaluation.load_labels(labels)
    except ForensicsError as exc:
        raise fail(str(exc))
    ev = evaluation.evaluate(label_files, cfg, include_low=include_low)
    if format is EvalFormat.json:
        sys.stdout.write(evaluation.render_json(ev, redact=redact))
    elif format is EvalFormat.markdown:
        sys.stdout.write(evaluation.render_markdown_table(ev))
    else:
        sys.stdout.write(evaluation.render_text(ev, redact=redact))
    for err in ev.errors:
        typer.echo(f"forensics: {err}", err=True)
    if not ev.cases:
        raise fail("no labelled session could be read")
    failed = ev.failed_gates(min_f1=min_f1, max_fp_per_10=max_fp_per_10)
    for line in failed:
        typer.echo(f"forensics: gate failed: {line}", err=True)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_CLEAN)


@app.command("label")
def label_command(
    path: Annotated[Path, typer.Argument(help="The session file to label.")],
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write labels.json here (input path made relative to it).")
    ] = None,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
    redact: Annotated[bool, typer.Option(
        "--redact/--no-redact", help="Redact secrets in the candidates' notes.")] = True,
) -> None:
    """Write a starting labels.json: each finding as a candidate incident to review."""
    import orjson

    from forensics.engine import scan_session
    from forensics.evaluation import label_document

    cfg = build_config(config, select, ignore)
    sessions, _ = load_sessions(path, input_format)
    rules = cfg.rules()
    results = [scan_session(s, cfg, rules) for s in sessions]
    where = output.parent if output else Path.cwd()
    doc = label_document(path, results, relative_to=where, rules=[r.slug for r in rules],
                         redact=redact)
    text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    if output:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise fail(f"{output}: {exc.strerror or exc}")
        typer.echo(f"wrote {output} ({len(doc['incidents'])} candidate incidents to review)")
    else:
        sys.stdout.write(text)


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
        source = getattr(exc, "forensics_source", None)
        on = f" while reading {source}" if source else ""
        typer.echo(f"forensics: internal error {type(exc).__name__} at "
                   f"{Path(where.filename).name}:{where.lineno}{on}; please report it "
                   "(FORENSICS_DEBUG=1 shows the traceback)", err=True)
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":
    main()
