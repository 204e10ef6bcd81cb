"""The ``forensics`` command: a thin typed shell over the library.

This is the only module that turns errors into exit codes, all in ``exit_code``, which every
command calls:

* 0: nothing found
* 1: incidents found (at or above ``--fail-on``; harness events never count)
* 2: nothing could be read, a bad option or config (``--strict``: also any read problem or
  crashing rule, which otherwise are only reported)

Inputs are named the same way in every command (``forensics.inputs``); what ``scan`` prints is
``forensics.output``'s.
"""

# No ``from __future__ import annotations`` here: typer reads every command's annotations each
# time it starts, and string annotations were eval'd again on every run (about 400 evals).
import gc
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, TextIO

import typer
import typer.core

from forensics import _typer_coercion
from forensics.errors import ForensicsError, reading
from forensics.output import Format as ScanFormat

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


def _version(value: bool) -> None:
    if value:
        from forensics import __version__

        typer.echo(f"forensics {__version__}")
        raise typer.Exit(EXIT_CLEAN)


app = typer.Typer(
    name="forensics",
    help="Find what went wrong in AI coding-agent sessions (opencode, Claude Code, Codex).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: [tool.forensics] must not read as markup
)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Find what went wrong in AI coding-agent sessions (opencode, Claude Code, Codex)."""


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
              strict: bool = False, fail_on: str = "low", exit_zero: bool = False,
              specs: Mapping[str, Any] | None = None) -> int:
    """The one exit decision of every command.

    ``findings`` are ``(rule code, severity)`` pairs; ``problems`` counts what could not be read
    and crashed rules; ``read_any`` is False when no session could be read at all. Only findings
    at or above ``fail_on`` whose rule is not a harness event (``kind = "harness"`` in its rule
    file: interruptions, provider errors, compactions) make 1; problems never change 0/1 unless
    ``strict``. ``exit_zero`` (``--exit-zero``) turns 1 into 0, never an error into 0.
    """
    if not read_any or (strict and problems):
        return EXIT_ERROR
    if specs is None:
        from forensics.rules import rule_files  # the kinds are in the files: no rule's code

        specs = rule_files()
    floor = _RANK[getattr(fail_on, "value", fail_on)]
    for code, severity in findings:
        spec = specs.get(code)
        if getattr(spec, "kind", "rule") == "harness":
            continue
        if _RANK.get(severity, 0) >= floor:
            return EXIT_CLEAN if exit_zero else EXIT_FINDINGS
    return EXIT_CLEAN


class Outcome:
    """What a run's exit code and closing lines need of its results, kept as they go by, so a
    command that streams lets each result go: the findings' rules and severities, the crashed
    rules, the records that could not be read."""

    def __init__(self) -> None:
        self.sessions = 0
        self.incidents = 0
        self.findings: set[tuple[str, str]] = set()
        """``(rule code, severity)`` of every finding: all ``exit_code`` asks."""
        self.crashes: list = []
        self.issues = 0
        self.sessions_with_issues = 0

    def add(self, result) -> None:
        self.sessions += 1
        self.incidents += len(result.incidents)
        self.findings.update((i.code, i.severity) for i in result.incidents)
        self.crashes.extend(result.crashes)
        self.issues += len(result.session.issues)
        self.sessions_with_issues += bool(result.session.issues)

    def problems(self, read_errors) -> int:
        """What was not read or not checked: unreadable sources and records, crashed rules."""
        return len(read_errors) + len(self.crashes) + self.issues

    def tell(self) -> None:
        """On stderr, whatever the output format: every crashed rule, and how many records
        could not be read (each is listed in the output itself)."""
        for crash in self.crashes:
            typer.echo(f"forensics: {crash}", err=True)
        issues, sessions = self.issues, self.sessions_with_issues
        if issues:
            typer.echo(f"forensics: {issues} unreadable record{'s' * (issues != 1)} in "
                       f"{sessions} session{'s' * (sessions != 1)} (listed in the output; "
                       "--strict makes this exit 2)", err=True)

    def exit_code(self, read_errors, **options) -> int:
        return exit_code(self.findings, problems=self.problems(read_errors), **options)


def outcome_of(results) -> Outcome:
    outcome = Outcome()
    for r in results:
        outcome.add(r)
    return outcome


def redactor(redact: bool):
    """The text filter of every output that quotes a transcript: ``redact`` or identity."""
    if not redact:
        return lambda text: text
    from forensics.redact import redact as hide

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


def _without_renderer_crashes(results, render, probe=None):
    """``render(results)``; if it raises, each session is tried alone with ``probe`` (default
    ``render``), the ones it raises on are left out (reported as ``file: renderer crashed:
    …``) and the others are rendered."""
    from forensics.errors import crash_text

    try:
        return render(results)
    except OSError:
        raise
    except Exception:
        kept = []
        for r in results:
            try:
                with reading(r.session.source):
                    (probe or render)([r])
                kept.append(r)
            except OSError:
                raise
            except Exception as exc:
                typer.echo(f"forensics: {r.session.source}: renderer crashed: "
                           f"{crash_text(exc)}", err=True)
        if not kept:
            raise
        return render(kept)


def render_report(results, fmt: str, redact: bool) -> str:
    """Markdown/HTML of every session, without the sessions the renderer crashes on."""
    from forensics import report

    return _without_renderer_crashes(
        results, lambda rs: report.render_sessions(rs, fmt=fmt, redact=redact))


def write_report_files(results, output: Path, redact: bool) -> list[Path]:
    """``report``'s folders, written as the results come, without the sessions the renderer
    crashes on (each named on stderr)."""
    from forensics.errors import crash_text
    from forensics.report import write_reports

    def crashed(result, exc: Exception) -> None:
        typer.echo(f"forensics: {result.session.source}: renderer crashed: "
                   f"{crash_text(exc)}", err=True)

    return write_reports(results, output, redact=redact, on_crash=crashed)


class TurnsFormat(str, Enum):
    text = "text"
    json = "json"


PATHS_HELP = ("Session files, folders, agent data dirs, archives (.zip, .tar, .tar.gz, .tar.zst) "
              "or - for standard input; several of each. None: every agent's default location.")
Paths = Annotated[Optional[list[str]], typer.Argument(metavar="PATH", help=PATHS_HELP,
                                                      show_default=False)]


def _argument_type(self, ctx):
    """Help shows an argument's metavar alone, not typer's ``<list[str]>`` beside it."""
    return None if self.metavar else _typer_argument_type(self, ctx)


def _argument_usage(self) -> str:
    """Usage names a required argument ``NAME`` (POSIX style), not typer's ``{NAME}``."""
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 else "")


_typer_argument_type = typer.core.TyperArgument.display_type_rich
typer.core.TyperArgument.display_type_rich = _argument_type
typer.core.TyperArgument._usage_display_name = _argument_usage
_typer_coercion.install()

InputFormat = Annotated[
    Optional[str],
    typer.Option("--input-format", metavar="FORMAT",
                 help="Skip sniffing: opencode-export, opencode-run, opencode-storage, "
                      "opencode-sqlite, claude-code, codex, gemini-cli, qwen-code, cline (a "
                      "task folder or one of its JSON files), pi, copilot-cli."),
]
Select = Annotated[Optional[list[str]], typer.Option(
    "--select", metavar="RULE", help="Only these rules (code, code prefix or slug); repeatable.")]
Ignore = Annotated[Optional[list[str]], typer.Option(
    "--ignore", metavar="RULE", help="Skip these rules (code, code prefix or slug); repeatable.")]
ConfigPath = Annotated[Optional[Path], typer.Option(
    "--config", metavar="FILE", help="forensics.toml, or pyproject.toml with [tool.forensics] "
    "(default: the nearest one in this folder or above).")]
Since = Annotated[Optional[str], typer.Option(
    "--since", metavar="WHEN", help="Only sessions active since then: 2026-11-30, 20261130, "
    "an ISO date-time, or 7d / 12h / 2w ago.")]
Until = Annotated[Optional[str], typer.Option(
    "--until", metavar="WHEN", help="Only sessions started before then (a date: its end).")]
Project = Annotated[Optional[list[str]], typer.Option(
    "--project", metavar="TEXT", help="Only sessions whose project folder contains TEXT; "
    "repeatable.")]
Agent = Annotated[Optional[list[str]], typer.Option(
    "--agent", metavar="AGENT", help="Only sessions of this agent (opencode, claude-code, "
    "codex); repeatable.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v",
                                       help="Also list clean sessions and every read issue.")]


def fail(message: str) -> "typer.Exit":
    typer.echo(f"forensics: {message}", err=True)
    return typer.Exit(EXIT_ERROR)


def warn(message: str) -> None:
    typer.echo(f"forensics: {message}", err=True)


def build_config(config: Path | None, select: list[str] | None, ignore: list[str] | None):
    """The effective config: file (given or discovered), then command-line selection."""
    from forensics.config import load_config

    try:
        cfg = load_config(config)
        if select:
            cfg.select = list(select)
        if ignore:
            cfg.ignore = cfg.ignore + list(ignore)
        cfg.rule_files()  # validates names
    except ForensicsError as exc:
        raise fail(str(exc))
    started()
    return cfg


START_UP_COLLECTIONS_EVERY = 1_000_000  # allocations; start-up makes a few hundred thousand
_thresholds_before_start: tuple[int, int, int] | None = None


def started() -> None:
    """Start-up is over (``main`` made the collector rare): what it made (modules, classes,
    the rules and their knowledge) lives as long as the process, so the collector stops
    walking it (``gc.freeze``) and runs as often as before. Every command that reads sessions
    calls this first (``build_config`` and ``load_sessions`` do); a command that does not still
    collects, only rarely."""
    global _thresholds_before_start
    if _thresholds_before_start is None:  # not paused by main (a test's CliRunner), or done
        return
    gc.freeze()
    gc.set_threshold(*_thresholds_before_start)
    _thresholds_before_start = None


def build_filter(since, until, project, agent):
    from forensics.inputs import SessionFilter

    try:
        return SessionFilter.parse(since, until, project, agent)
    except ForensicsError as exc:
        raise fail(str(exc))


def resolve_paths(paths: list[str] | None) -> list[str]:
    """The names given, or every default location found (saying what was found where)."""
    from forensics.inputs import inputs_or_defaults

    try:
        names, said = inputs_or_defaults(paths or [])
    except ForensicsError as exc:
        raise fail(str(exc))
    for line in said:
        warn(line)
    return names


def load_sessions(paths: list[str] | None, input_format: str | None, keep=None):
    """Sessions of every input; unreadable inputs are printed on stderr and skipped, and
    nothing readable at all is an error (exit 2)."""
    from forensics.inputs import read_inputs

    started()
    errors: list = []
    sessions = [s for s in read_inputs(resolve_paths(paths), format=input_format, errors=errors)
                if keep is None or keep.keeps(s)]
    _after_reading(len(sessions), errors, keep)
    return sessions, errors


def _after_reading(count: int, errors: list, keep) -> None:
    for err in errors:
        warn(str(err))
    if count:
        return
    if errors:  # each unreadable input has had its line
        raise typer.Exit(EXIT_ERROR)
    if keep is not None and keep.active:  # read fine, none wanted: not an error
        warn("no session matches --since/--until/--project/--agent")
        return
    raise fail("no agent sessions could be read")


PROGRESS_DELAY = 1.0
"""Seconds a run lasts before it draws a progress line (short runs stay quiet)."""


def read_and_scan(paths: list[str] | None, input_format: str | None, keep, cfg, *,
                  progress: bool = True, release: bool = False):
    """Every session of the inputs, scanned as it is read, with a progress line on stderr
    (a terminal, or ``FORENSICS_PROGRESS=1``) once the run lasts; ``(results, read errors)``.

    ``release``: each result keeps only the turns its incidents name
    (``ScanResult.released``), so memory follows the largest source, not the whole input."""
    results: list = []
    errors: list = []
    for result in scan_stream(paths, input_format, keep, cfg, errors, progress=progress):
        results.append(result.released() if release else result)
        del result
    return results, errors


class _Quiet:
    """The progress line when none is drawn."""

    width = 0

    def update(self, *args, **kwargs) -> None:
        pass


def scan_stream(paths: list[str] | None, input_format: str | None, keep, cfg, errors: list, *,
                progress: bool = True):
    """``read_and_scan``'s results one at a time, for a caller that lets each go when done
    with it; read errors go to ``errors``, and nothing read at all ends the command (exit 2)
    once the stream is exhausted."""
    from forensics.engine import scan_session
    from forensics.inputs import read_inputs

    names = resolve_paths(paths)
    rules = cfg.rules()
    forced = os.environ.get("FORENSICS_PROGRESS") == "1"
    bar = _Quiet()
    if progress and (forced or sys.stderr.isatty()):  # batch (and polars) load only then
        from forensics.batch import Progress

        bar = Progress(True, sources=False)
        if not forced:
            bar.last = bar.start + PROGRESS_DELAY - 0.1  # first line after PROGRESS_DELAY
    count = found = 0
    for s in read_inputs(names, format=input_format, errors=errors):
        if keep is not None and not keep.keeps(s):
            continue
        with reading(s.source):  # a bug names the file it happened on
            result = scan_session(s, cfg, rules)
        del s
        count += 1
        found += len(result.incidents)
        bar.update(count, None, count, found)
        yield result
        del result
    if bar.width:  # something was drawn: end its line before anything else is printed
        bar.update(count, None, count, found, final=True)
    _after_reading(count, errors, keep)


def use_color(output: Path | None) -> bool:
    """Colour on a terminal only: never into a file, a pipe, or with NO_COLOR set."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return output is None and sys.stdout.isatty()


def report_read_issues(results, verbose: bool) -> None:
    """Records a reader could not use, on stderr (the findings stay clean on stdout); crashed
    rules and the count are ``Outcome.tell``'s."""
    for r in results:
        issues = r.session.issues
        shown = issues if verbose else issues[:5]
        for issue in shown:
            warn(f"{issue}")
        if len(issues) > len(shown):
            warn(f"{r.session.source}: {len(issues) - len(shown)} more unreadable records "
                 "(-v lists them)")


@app.command()
def turns(
    paths: Paths = None,
    format: Annotated[TurnsFormat, typer.Option("--format", "-f")] = TurnsFormat.text,
    input_format: InputFormat = None,
    since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
    strict: Strict = False,
    redact: Redact = True,
) -> None:
    """Print the typed timeline of each session: what forensics understood."""
    from forensics.timeline import summarize

    clean = redactor(redact)
    keep = build_filter(since, until, project, agent)
    sessions, errors = load_sessions(paths, input_format, keep)
    if format is TurnsFormat.json:
        import orjson

        docs = [_redacted(s.dump(), clean) for s in sessions]
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


@app.command()
def scan(
    paths: Paths = None,
    format: Annotated[ScanFormat, typer.Option(
        "--format", "-f", help="text (terminal), json, jsonl (one finding a line), sarif "
        "(2.1.0), github (workflow annotations), markdown or html (case studies).")
    ] = ScanFormat.text,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE",
                      help="Write to this file instead of standard output.")] = None,
    statistics: Annotated[bool, typer.Option(
        "--statistics", help="Counts per rule instead of the findings.")] = False,
    baseline: Annotated[Optional[Path], typer.Option(
        "--baseline", metavar="FILE", help="Show only findings not in this baseline "
        "(written by `forensics baseline`).")] = None,
    exit_zero: Annotated[bool, typer.Option(
        "--exit-zero", help="Exit 0 even when incidents are found (errors still exit 2).")
    ] = False,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
    since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
    verbose: Verbose = False,
    strict: Strict = False,
    fail_on: FailOnOption = FailOn.low,
    redact: Redact = True,
) -> None:
    """Find incidents in sessions: empty replies, duplicate launches, ignored errors, re-sends."""
    from forensics.output import Rendering

    cfg = build_config(config, select, ignore)
    keep = build_filter(since, until, project, agent)
    known = None
    if baseline is not None:
        from forensics.baseline import load_baseline

        try:
            known = load_baseline(baseline)
        except ForensicsError as exc:
            raise fail(str(exc))
    read_errors: list = []
    opts = Rendering(errors=read_errors, redact=redact, color=use_color(output) and
                     format is ScanFormat.text, verbose=verbose, statistics=statistics)
    if format in (ScanFormat.markdown, ScanFormat.html):
        results = _case_studies(paths, input_format, keep, cfg, read_errors, known, verbose,
                                output, format.value, redact)
        outcome = outcome_of(results)
    else:
        outcome = _print_as_scanned(paths, input_format, keep, cfg, known, baseline, output,
                                    format, opts)
    outcome.tell()
    raise typer.Exit(outcome.exit_code(read_errors, strict=strict, fail_on=fail_on,
                                       exit_zero=exit_zero))


def _print_as_scanned(paths, input_format, keep, cfg, known, baseline, output, format,
                      opts) -> Outcome:
    """Each session scanned, printed and let go before the next is read: a line format
    prints its findings then, a document format spools them (``forensics.output``)."""
    from forensics.output import printer_for

    printer = printer_for(format, opts)
    outcome = Outcome()
    with output_stream(output) as out:
        for result in scan_stream(paths, input_format, keep, cfg, opts.errors):
            if known is not None:
                result, hidden = _without_known(result, known)
                opts.hidden += hidden
            report_read_issues([result], opts.verbose)
            outcome.add(result)
            out.write(printer.add(result))
            del result
        if known is not None:
            opts.baseline = {"file": str(baseline), "hidden": opts.hidden}
        for text in printer.end():
            out.write(text)
    return outcome


def _case_studies(paths, input_format, keep, cfg, read_errors, known, verbose, output, fmt,
                  redact) -> list:
    """``--format markdown|html``: every session's case studies in one document, which tells
    each session's turns, so the results are kept whole until it is written."""
    results: list = []
    for result in scan_stream(paths, input_format, keep, cfg, read_errors):
        if known is not None:
            result, _ = _without_known(result, known)
        results.append(result)
    report_read_issues(results, verbose)
    text = render_report(results, fmt, redact)
    with output_stream(output) as out:
        out.write(text)
    return results


def _without_known(result, known):
    from forensics.baseline import only_new

    (kept,), hidden = only_new([result], known)
    return kept, hidden


@contextmanager
def output_stream(output: Path | None) -> Iterator[TextIO]:
    """Where a command's output goes as it is made: standard output, or ``output``, written
    under a temporary name beside it and renamed into place once complete, so a run that fails
    or is interrupted leaves neither half a document nor a clobbered earlier one. A device or
    pipe (``/dev/stdout``, a FIFO) is written to directly: it cannot be replaced."""
    if output is None:
        yield sys.stdout
        return
    direct = output.exists() and not output.is_file()
    target = output if direct else output.with_name(f".{output.name}.{os.getpid()}.part")
    try:
        with open(target, "w", encoding="utf-8") as out:
            yield out
        if not direct:
            os.replace(target, output)
    except OSError as exc:
        raise fail(f"{output}: {exc.strerror or exc}")
    finally:
        if not direct:
            target.unlink(missing_ok=True)


@app.command("baseline")
def baseline_command(
    paths: Paths = None,
    output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE",
                      help="Where to write the baseline.")] = Path("forensics-baseline.json"),
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
    since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
) -> None:
    """Record today's findings so that `scan --baseline FILE` shows only new ones."""
    from forensics.baseline import write_baseline

    cfg = build_config(config, select, ignore)
    keep = build_filter(since, until, project, agent)
    results, _ = read_and_scan(paths, input_format, keep, cfg, release=True)
    try:
        n = write_baseline(results, output)
    except OSError as exc:
        raise fail(f"{output}: {exc.strerror or exc}")
    typer.echo(f"recorded {n} finding{'s' * (n != 1)} of {len(results)} "
               f"session{'s' * (len(results) != 1)} in {output}")


@app.command("report")
def report_command(
    paths: Paths = None,
    output: Annotated[Path, typer.Option("--output", "-o", metavar="DIR",
                                         help="Folder to write the reports to.")] = ...,
    redact: Redact = True,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    input_format: InputFormat = None,
    since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
    exit_zero: Annotated[bool, typer.Option(
        "--exit-zero", help="Exit 0 even when incidents are found.")] = False,
    strict: Strict = False,
    fail_on: FailOnOption = FailOn.low,
) -> None:
    """Write a case study per incident (Markdown and HTML), one folder per session."""
    cfg = build_config(config, select, ignore)
    keep = build_filter(since, until, project, agent)
    read_errors: list = []
    outcome = Outcome()  # what the summary needs of each session, once it is written

    def scanned():
        for result in scan_stream(paths, input_format, keep, cfg, read_errors):
            outcome.add(result)
            yield result

    try:
        written = write_report_files(scanned(), output, redact)
    except OSError as exc:
        raise fail(f"{exc.filename or output}: {exc.strerror or exc}")
    incidents, sessions = outcome.incidents, outcome.sessions
    folders = sorted({p.parent for p in written if p.name == "index.html"})
    for folder in folders:
        n = sum(1 for p in written if p.parent == folder and p.suffix == ".md"
                and p.name != "index.md")
        typer.echo(f"{folder}/index.html  ({n} incident report{'s' * (n != 1)})")
    typer.echo(f"wrote {len(written)} files to {output} "
               f"({incidents} incident{'s' * (incidents != 1)} in {sessions} "
               f"session{'s' * (sessions != 1)})")
    outcome.tell()
    raise typer.Exit(outcome.exit_code(read_errors, strict=strict, fail_on=fail_on,
                                       exit_zero=exit_zero))


@app.command()
def hook(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="claude-code (hook input on "
                                         "standard input), codex (notify JSON) or opencode.")],
    payload: Annotated[Optional[str], typer.Argument(
        metavar="PAYLOAD", help="codex: the JSON notify appends; opencode: the session id.",
        show_default=False)] = None,
    state: Annotated[Optional[Path], typer.Option(
        "--state", metavar="FILE", help="Where the findings already printed are remembered "
        "(default: $XDG_STATE_HOME/forensics/hook-seen.json).")] = None,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    redact: Annotated[bool, typer.Option(
        "--redact/--no-redact", help="Hide secrets in quoted transcript text.")] = True,
) -> None:
    """Print the new findings of the session that just ended (for agent hooks).

    Exits 0 whatever it finds (a hook must not stop the agent), 1 when it cannot tell which
    session it was or cannot read it; never 2, which Claude Code reads as "block".
    """
    from forensics.engine import scan_sessions
    from forensics.hooks import default_state_file, target, unseen
    from forensics.inputs import read_inputs
    from forensics.output import Rendering, render

    try:
        where = target(agent, payload, sys.stdin.read() if agent == "claude-code" else None)
        cfg = build_config(config, select, ignore)
    except ForensicsError as exc:
        warn(str(exc))
        raise typer.Exit(1)
    except typer.Exit:
        raise typer.Exit(1)
    errors: list = []
    sessions = [s for s in read_inputs(where.paths, errors=errors)
                if where.agent == "claude-code" or where.session_id in (s.id, s.parent_id)]
    if not sessions:
        for err in errors:
            warn(str(err))
        warn(f"{agent} session {where.session_id or ''}: nothing readable in "
             f"{', '.join(where.paths)}")
        raise typer.Exit(1)
    results = unseen(scan_sessions(sessions, cfg), state or default_state_file())
    if any(r.incidents for r in results):
        sys.stdout.write(render("text", results, Rendering(redact=redact)))
    raise typer.Exit(EXIT_CLEAN)


@app.command("rules")
def rules_command(
    name: Annotated[Optional[str], typer.Argument(
        metavar="RULE", help="Show one rule's documentation (code or slug).", show_default=False)
    ] = None,
) -> None:
    """List the rules, or print one rule's documentation."""
    from forensics.rules import registry, resolve

    try:
        specs = resolve([name]) if name else list(registry().values())
    except ForensicsError as exc:
        raise fail(str(exc))
    if not name:
        for s in specs:
            typer.echo(f"{s.code}  {s.slug:<20} {s.kind:<8} {s.severity:<7} {s.status:<8} "
                       f"{s.title}")
        return
    for s in specs:
        typer.echo(f"{s.code} {s.slug}: {s.title}\n")
        if s.is_harness:
            typer.echo("Kind: harness event (not the assistant's mistake; counted, low "
                       "severity)\n")
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
    paths: Paths = None,
    output: Annotated[str, typer.Option("--output", "-o", metavar="DIR|URL", help="Folder "
                                        "or fsspec URL (s3://bucket/prefix) to write the "
                                        "tables and index page to; reruns skip unchanged "
                                        "sources.")] = ...,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", "-j", min=1, metavar="N", help="Worker processes (default: one per core).")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Rescan every source, changed or not.")
                    ] = False,
    select: Select = None,
    ignore: Ignore = None,
    config: ConfigPath = None,
    progress: Annotated[bool, typer.Option(
        "--progress/--no-progress", help="Progress line on stderr (when it is a terminal).")
    ] = True,
    exit_zero: Annotated[bool, typer.Option(
        "--exit-zero", help="Exit 0 even when incidents are found.")] = False,
    since: Since = None, until: Until = None, project: Project = None, agent: Agent = None,
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
    import tempfile
    from contextlib import nullcontext

    from forensics.archive import DEFAULT_LIMITS, Limits
    from forensics.batch import BatchLost, run_batch
    from forensics.inputs import STDIN, expand

    cfg = build_config(config, select, ignore)
    try:
        limits = Limits.parse(archive_limits) if archive_limits else DEFAULT_LIMITS
    except ValueError as exc:
        raise fail(str(exc))
    keep = build_filter(since, until, project, agent)
    names = [expand(n) for n in resolve_paths(paths)]
    with tempfile.TemporaryDirectory(prefix="forensics-stdin-") as tmp:
        if STDIN in names:  # workers read files: standard input becomes one
            piped = Path(tmp) / "stdin.jsonl"
            piped.write_bytes(sys.stdin.buffer.read())
            names = [str(piped) if n == STDIN else n for n in names]
        try:
            if cluster is None:
                engine = nullcontext(None)
            else:
                from forensics.cluster import dask_executor

                engine = dask_executor(cluster)
            with engine as executor:
                summary = run_batch(names, output, workers=workers, full=full, config=cfg,
                                    progress=progress, keep=keep if keep.active else None,
                                    redact=redact, limits=limits, executor=executor,
                                    partitioned=partitioned)
        except BatchLost as exc:
            typer.echo(redactor(redact)(str(exc.summary)))
            raise fail(str(exc))
        except ForensicsError as exc:
            raise fail(str(exc))
        except OSError as exc:
            raise fail(f"{exc.filename or output}: {exc.strerror or exc}")
    typer.echo(redactor(redact)(str(summary)))
    if summary.sessions == 0:
        warn("no agent sessions could be read")
    raise typer.Exit(exit_code(summary.findings, problems=len(summary.errors) + summary.read_issues,
                               read_any=summary.sessions > 0, strict=strict, fail_on=fail_on,
                               exit_zero=exit_zero))


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
    sessions, _ = load_sessions([str(path)], input_format)
    rules = cfg.rules()
    results = []
    for s in sessions:
        with reading(s.source):
            results.append(scan_session(s, cfg, rules))
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


def _commands_needed(first: list[str]) -> list:
    """Typer builds the parameters of every command at each start (most of its work before
    the command runs); ``forensics scan …`` needs scan's alone. The app's own help, version and
    completion (no command named first) see every command."""
    commands = app.registered_commands
    named = [c for c in commands if first and (c.name or c.callback.__name__) == first[0]]
    return named or commands


def main() -> None:
    import atexit

    # Registered first, so it runs last: the interpreter's collections at exit would otherwise
    # walk every object the run made (about 50 ms of CPU after a small scan, 15% of it) only to
    # free memory the process is about to give back. Every atexit handler still runs and the
    # standard streams are still flushed; only cyclic garbage left at exit goes uncollected.
    atexit.register(gc.freeze)
    # Pydantic looks for plugins in every installed package's metadata when it builds the first
    # model. A plugin observes an application's own validation (tracing, logging); this
    # process's models are forensics' internals, so the command does without, unless the user
    # chose which plugins to skip. Only the command's process (and the batch workers it starts)
    # sees this: the library in a notebook loads the user's plugins as before.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # Start-up (typer, pydantic, the model, the rules) only builds what lives to the end, yet
    # the collector walked it again and again: rare until the command calls started(). Rare,
    # not off, so a command that never calls it still frees its cycles.
    global _thresholds_before_start
    _thresholds_before_start = gc.get_threshold()
    gc.set_threshold(START_UP_COLLECTIONS_EVERY, *_thresholds_before_start[1:])
    every_command = app.registered_commands
    app.registered_commands = _commands_needed(sys.argv[1:2])
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
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1]
        source = getattr(exc, "forensics_source", None)
        on = f" while reading {source}" if source else ""
        typer.echo(f"forensics: internal error {type(exc).__name__} at "
                   f"{Path(where.filename).name}:{where.lineno}{on}; please report it "
                   "(FORENSICS_DEBUG=1 shows the traceback)", err=True)
        sys.exit(EXIT_ERROR)
    finally:
        app.registered_commands = every_command


if __name__ == "__main__":
    main()
