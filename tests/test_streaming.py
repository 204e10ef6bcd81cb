"""Scans stream: a result let go after its session is scanned keeps what the line and document
formats print, and nothing else, so memory follows the largest source, not the whole input."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from conftest import FIXTURES
from forensics import cli, inputs
from forensics.config import Config
from forensics.engine import KeptTurns, scan_session
from forensics.ingest import iter_sessions
from forensics.output import Format, Rendering, render

INGEST = FIXTURES / "ingest"
SESSIONS = sorted(p for p in INGEST.iterdir()
                  if p.suffix in (".json", ".jsonl") and ".golden" not in p.name)


def _results():
    cfg = Config()
    return [scan_session(s, cfg) for f in SESSIONS for s in iter_sessions(f)]


def test_a_released_result_keeps_the_count_and_the_turns_incidents_name() -> None:
    results = _results()
    flagged = [r for r in results if r.incidents]
    assert flagged, "the fixtures hold incidents"
    for r in flagged:
        slim = r.released()
        assert isinstance(slim.session.turns, KeptTurns)
        assert len(slim.session.turns) == len(r.session.turns)
        assert slim.incidents is r.incidents and slim.crashes is r.crashes
        assert (slim.session.id, slim.session.source, slim.session.issues, slim.session.notes) \
            == (r.session.id, r.session.source, r.session.issues, r.session.notes)
        for i in r.incidents:
            assert slim.session.turns[i.turn - 1] is r.session.turns[i.turn - 1]
        kept = {o for i in r.incidents for o in (i.turn, *i.evidence_turns)}
        dropped = next((o for o in range(1, len(r.session.turns) + 1) if o not in kept), None)
        if dropped is not None:
            with pytest.raises(LookupError, match=f"turn {dropped} was released"):
                slim.session.turns[dropped - 1]
        with pytest.raises(IndexError):
            slim.session.turns[len(r.session.turns)]
        with pytest.raises(TypeError):
            list(slim.session.turns)
        assert slim.released() is slim


@pytest.mark.parametrize("fmt", [Format.text, Format.json, Format.jsonl, Format.sarif,
                                 Format.github])
@pytest.mark.parametrize("verbose", [False, True])
def test_released_results_print_the_same(fmt: Format, verbose: bool) -> None:
    results = _results()
    opts = Rendering(verbose=verbose)
    assert render(fmt, [r.released() for r in results], opts) == render(fmt, results, opts)


def test_scan_lets_every_session_go_once_it_is_scanned(monkeypatch, young_heap) -> None:
    seen: list[weakref.ref] = []
    read = inputs.read_inputs

    def watched(*args, **kwargs):
        for s in read(*args, **kwargs):
            seen.append(weakref.ref(s))
            yield s

    monkeypatch.setattr(inputs, "read_inputs", watched)
    results, errors = cli.read_and_scan([str(p) for p in SESSIONS], None, None, Config(),
                                        progress=False, release=True)
    gc.collect()
    assert not errors and len(results) == len(seen) >= len(SESSIONS)
    assert [ref() for ref in seen] == [None] * len(seen)
    assert all(isinstance(r.session.turns, KeptTurns) for r in results)
    kept, errors = cli.read_and_scan([str(p) for p in SESSIONS[:1]], None, None, Config(),
                                     progress=False)
    assert isinstance(kept[0].session.turns, list)  # case studies tell every turn


def cli_in_fresh_process(args: list[str]) -> tuple[int, str, set[str]]:
    """Run ``forensics ARGS`` in a new interpreter (nothing imported yet): its exit code, its
    output and the modules it loaded."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\nfrom typer.testing import CliRunner\nfrom forensics.cli import app\n"
            f"result = CliRunner().invoke(app, {args!r})\n"
            "print(json.dumps([result.exit_code, result.output, sorted(sys.modules)]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    exit_code, output, modules = json.loads(proc.stdout.splitlines()[-1])
    return exit_code, output, set(modules)


def test_help_loads_no_model_engine_or_table_library() -> None:
    """``forensics --help`` starts in a small multiple of a bare interpreter: the typed model
    (pydantic), the engine, polars and jinja2 load only in the commands that use them."""
    exit_code, _, loaded = cli_in_fresh_process(["--help"])
    assert exit_code == 0
    assert loaded & {"pydantic", "polars", "jinja2", "forensics.model", "forensics.engine"} == set()


def test_a_small_scan_loads_one_reader_and_no_table_batch_or_report_code() -> None:
    """``forensics scan FILE`` of one small session starts in a small multiple of a bare
    interpreter: polars, jinja2, the batch machinery, the case-study renderers, the other
    formats' readers, the archive code (tar) and typer's pydantic validators of option
    values load only in the commands and for the inputs that need them."""
    from forensics.resources import sample_session

    exit_code, output, loaded = cli_in_fresh_process(["scan", str(sample_session())])
    assert exit_code == 1 and "FX002 duplicate-launch" in output
    assert loaded & {"polars", "jinja2", "forensics.batch", "forensics.report", "forensics.frame",
                     "forensics.ingest.claude_code", "forensics.ingest.codex",
                     "concurrent.futures.process", "forensics.archive", "tarfile",
                     "typer._adapters"} == set()
    assert "forensics.ingest.opencode_export" in loaded


def test_reports_are_written_as_the_results_come(tmp_path: Path, young_heap) -> None:
    """``write_reports`` over a stream holds one source's sessions at a time: by the time the
    next result is asked for, the sessions of earlier sources are gone; the top index still
    lists them all."""
    from forensics import report

    cfg = Config()
    alive: list[weakref.ref] = []
    held_from_other_sources: list[int] = []

    def stream():
        for f in SESSIONS:
            for s in iter_sessions(f):
                gc.collect()
                held = [ref() for ref in alive]
                held_from_other_sources.append(sum(
                    1 for o in held if o is not None and o.source != s.source))
                del held
                alive.append(weakref.ref(s))
                yield scan_session(s, cfg)
                del s

    written = report.write_reports(stream(), tmp_path)
    assert len(alive) > len(SESSIONS) and (tmp_path / "index.md").is_file()
    # the first two are read ahead (one page, or a top index to link to), then one at a time
    assert held_from_other_sources[:2] == [0, 1]
    assert set(held_from_other_sources[2:]) == {0}, held_from_other_sources
    index = (tmp_path / "index.md").read_text(encoding="utf-8")
    assert index.count("/index.md)") == len(alive)
    assert all(p.is_file() for p in written)


def test_turns_after_and_before_read_like_the_slices_they_replace() -> None:
    session = next(iter_sessions(INGEST / "claude_basic.jsonl"))
    turns = session.turns
    assert len(turns) > 3
    for ordinal in range(1, len(turns) + 3):
        assert list(session.turns_after(ordinal)) == turns[ordinal:]
        assert list(session.turns_before(ordinal)) == list(reversed(turns[: ordinal - 1]))


def test_reading_and_scanning_collect_less_often_and_restore_the_collector(monkeypatch) -> None:
    """Readers and rules raise the young-generation threshold while they run (the session's
    objects all live as long as it does) and put the caller's thresholds back after."""
    from forensics.ingest._source import FEWER_COLLECTIONS_EVERY

    real = gc.set_threshold
    calls: list[tuple[int, ...]] = []

    def recording(*thresholds: int) -> None:
        calls.append(thresholds)
        real(*thresholds)

    before = gc.get_threshold()
    real(321, 9, 8)
    monkeypatch.setattr(gc, "set_threshold", recording)
    try:
        session = next(iter_sessions(INGEST / "claude_basic.jsonl"))
        assert calls == [(FEWER_COLLECTIONS_EVERY, 9, 8), (321, 9, 8)]
        scan_session(session)
        assert calls[2:] == [(FEWER_COLLECTIONS_EVERY, 9, 8), (321, 9, 8)]
        assert gc.get_threshold() == (321, 9, 8)
    finally:
        real(*before)


def test_a_rerun_over_unchanged_sources_loads_no_pool_tables_rules_or_case_study_code(
        tmp_path: Path) -> None:
    """A batch rerun that finds every source unchanged costs start-up and the index: the
    process pool's modules, polars, the rules' code with the analysis it reads (the config key
    and the exit code need only the rule files) and the case-study package
    (``forensics.report``; the index's charts are ``forensics.charts``) load only when a
    source is read again."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(FIXTURES / "seeds" / "seed_000_duplicate_launch.json", src)
    out = tmp_path / "out"
    args = ["batch", str(src), "-o", str(out), "-j", "1"]
    scanning = {"polars", "forensics.rules.fx002_duplicate_launch", "forensics.analysis.session",
                "forensics.analysis.ledger"}
    exit_code, _, loaded = cli_in_fresh_process(args)
    assert exit_code == 1 and scanning <= loaded  # the first run scans and writes the tables
    exit_code, output, loaded = cli_in_fresh_process(args)
    assert exit_code == 1  # a rule's finding, known to be one from its rule file's kind
    assert "skipped 1 unchanged sources" in output
    assert loaded & ({"multiprocessing", "concurrent.futures", "forensics.report"} | scanning) \
        == set()
    assert not any(m.startswith("forensics.rules.fx") for m in loaded)
    assert "FX002" in (out / "index.md").read_text(encoding="utf-8")
