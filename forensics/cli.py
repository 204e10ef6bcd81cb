"""The ``forensics`` command: a thin typed shell over the library.

This is the only module that turns errors into exit codes:

* 0: read everything, found nothing
* 1: found incidents
* 2: an error (nothing could be read, a bad option, a bad config)
"""

from __future__ import annotations

import sys
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


def load_sessions(path: Path, input_format: str | None):
    """Sessions of PATH; per-file errors in a folder are printed and skipped."""
    from forensics.ingest import iter_sessions

    errors: list = []
    try:
        sessions = list(iter_sessions(path, format=input_format, errors=errors))
    except ForensicsError as exc:
        raise fail(str(exc))
    for err in errors:
        typer.echo(f"forensics: {err}", err=True)
    if not sessions:
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


if __name__ == "__main__":
    main()
