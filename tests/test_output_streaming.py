"""``scan`` prints as it goes: each session's result is printed (or spooled) and let go before
the next source is read, the documents it writes are byte for byte what one ``orjson.dumps``
would give, and an output file is whole or absent."""

from __future__ import annotations

import gc
import os
import stat
import weakref
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics import cli
from forensics.cli import app
from forensics.config import Config
from forensics.engine import scan_session
from forensics.ingest import iter_sessions
from forensics.output import Format, Rendering, render, spool
from forensics.output.spool import Spool, Streamed, write_json

INGEST = FIXTURES / "ingest"
SESSIONS = sorted(p for p in INGEST.iterdir()
                  if p.suffix in (".json", ".jsonl") and ".golden" not in p.name)
LINE_AND_DOCUMENT_FORMATS = ["text", "json", "jsonl", "sarif", "github"]

scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=8) | \
    st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                           max_leaves=25)


@st.composite
def streamed_lists(draw, value):
    """``value`` with some of its lists made ``Streamed`` (from a generator, as a spool gives
    them)."""
    if isinstance(value, list):
        items = [draw(streamed_lists(v)) for v in value]
        return Streamed(iter(items)) if draw(st.booleans()) else items
    if isinstance(value, dict):
        return {k: draw(streamed_lists(v)) for k, v in value.items()}
    return value


@st.composite
def with_streamed_lists(draw):
    value = draw(json_values)
    return value, draw(streamed_lists(value))


@settings(max_examples=300, deadline=None)
@given(with_streamed_lists())
def test_write_json_writes_what_orjson_dumps_writes(pair) -> None:
    plain, streamed = pair
    assert "".join(write_json(streamed)) == orjson.dumps(plain,
                                                         option=orjson.OPT_INDENT_2).decode()


def test_a_spool_past_its_memory_reads_back_the_same_documents(monkeypatch) -> None:
    monkeypatch.setattr(spool, "IN_MEMORY_BYTES", 64)
    docs = [{"n": n, "text": "line\nbreak ✓ " * n} for n in range(50)]
    kept = Spool()
    for doc in docs:
        kept.add(doc)
    assert kept._file._rolled  # on disk now, not in memory
    assert list(kept) == docs
    assert list(kept) == docs  # read again from the start (SARIF reads its spools once each)
    kept.close()


def _results():
    cfg = Config()
    return [scan_session(s, cfg) for f in SESSIONS for s in iter_sessions(f)]


@pytest.mark.parametrize("fmt, flag", [
    *((fmt, None) for fmt in LINE_AND_DOCUMENT_FORMATS),
    ("text", "-v"), ("github", "-v"), ("text", "--statistics"), ("json", "--statistics")])
def test_scan_prints_each_result_before_it_reads_the_next(fmt, flag, monkeypatch,
                                                         young_heap) -> None:
    """While scanning, no earlier result is alive when the next one comes; and what is printed
    is what ``render`` gives for all the results at once."""
    stream = cli.scan_stream
    alive: list[weakref.ref] = []
    held: list[int] = []

    def watched(*args, **kwargs):
        for result in stream(*args, **kwargs):
            gc.collect()
            held.append(sum(ref() is not None for ref in alive))
            alive.append(weakref.ref(result))
            yield result
            del result

    monkeypatch.setattr(cli, "scan_stream", watched)
    args = ["scan", *map(str, SESSIONS), "--format", fmt, *([flag] if flag else [])]
    printed = CliRunner().invoke(app, args)
    assert printed.exit_code == 1, printed.output
    assert len(held) >= len(SESSIONS) and set(held) == {0}, held
    opts = Rendering(verbose=flag == "-v", statistics=flag == "--statistics")
    assert printed.stdout == render(Format(fmt), _results(), opts)


def test_an_output_file_is_written_whole_or_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "findings.json"
    out.write_text("the previous run's findings\n", encoding="utf-8")
    failed = CliRunner().invoke(app, ["scan", str(tmp_path / "missing.jsonl"), "-f", "json",
                                      "-o", str(out)])
    assert failed.exit_code == 2
    assert out.read_text(encoding="utf-8") == "the previous run's findings\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["findings.json"]  # no part left

    done = CliRunner().invoke(app, ["scan", str(SESSIONS[0]), "-f", "json", "-o", str(out)])
    assert done.exit_code in (0, 1)
    assert orjson.loads(out.read_bytes())["schema_version"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["findings.json"]


def test_an_output_that_is_a_device_is_written_to_not_replaced() -> None:
    before = os.stat(os.devnull)
    done = CliRunner().invoke(app, ["scan", str(SESSIONS[0]), "-o", os.devnull])
    assert done.exit_code in (0, 1)
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert os.stat(os.devnull).st_ino == before.st_ino


def test_an_output_folder_that_does_not_exist_is_an_error_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "findings.json"
    failed = CliRunner().invoke(app, ["scan", str(SESSIONS[0]), "-o", str(out)])
    assert failed.exit_code == 2
    assert f"forensics: {out}: No such file or directory" in failed.stderr
