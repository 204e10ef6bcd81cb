"""How the batch gathers rows into its tables: each row becomes columns once, checkpoints write
what a run without them writes, and rows a rerun carries over come back as they were."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from forensics import frame as frame_module
from forensics.batch import OUTPUT_FILES, TABLE_FILES, collect, run_batch
from test_baseline import appended_exchange
from test_batch import build_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return build_folder(tmp_path_factory.mktemp("batch-tables"))


def _files(out: Path, names=OUTPUT_FILES) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in names}


def test_checkpoints_write_what_a_run_without_them_writes(folder: Path, tmp_path: Path) -> None:
    plain, checkpointed = tmp_path / "plain", tmp_path / "checkpointed"
    run_batch([folder], plain, workers=1, progress=False)
    run_batch([folder], checkpointed, workers=1, progress=False, checkpoint_every=1)
    assert _files(checkpointed) == _files(plain)
    assert pl.read_parquet(plain / "incidents.parquet").height > 0


def test_a_checkpoint_turns_only_the_new_rows_into_columns(folder: Path, tmp_path: Path,
                                                           monkeypatch) -> None:
    """Every checkpoint rewrites the tables, but no row is converted from a dict twice: with a
    checkpoint after each source, the rows converted are the rows written (not a sum over all
    checkpoints of every row so far)."""
    converted = []
    real = frame_module.frame

    def counting(rows, columns):
        converted.append(len(rows))
        return real(rows, columns)

    monkeypatch.setattr(frame_module, "frame", counting)
    summary = run_batch([folder], tmp_path / "out", workers=1, progress=False,
                        checkpoint_every=1)
    written = sum(pl.read_ndjson(tmp_path / "out" / name).height if name != "errors.ndjson"
                  else len((tmp_path / "out" / name).read_bytes().splitlines())
                  for name in TABLE_FILES if name.endswith(".ndjson"))
    assert summary.sources > 3
    assert sum(converted) == written


def test_rows_a_checkpoint_took_leave_the_outcomes(folder: Path) -> None:
    seen = []

    def checkpoint(so_far) -> None:
        so_far.frames()
        seen.append([(len(o.sessions), len(o.incidents), len(o.errors))
                     for o in so_far.outcomes])

    got = collect([folder], workers=1, checkpoint=checkpoint, checkpoint_every=2)
    assert seen and all(counts == (0, 0, 0) for seen_now in seen for counts in seen_now)
    tables = got.frames()
    assert tables["sessions"].height == sum(o.session_count for o in got.outcomes) > 0
    assert tables["sessions"]["origin"].to_list() == sorted(tables["sessions"]["origin"])


def test_a_rerun_after_a_change_writes_the_tables_of_a_clean_run(folder: Path,
                                                                 tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(folder, src)
    out = tmp_path / "out"
    run_batch([src], out, workers=1, progress=False)
    changed = next(p for p in sorted(src.rglob("*.jsonl")) if "claude" in p.name)
    appended_exchange(changed)
    again = run_batch([src], out, workers=1, progress=False, checkpoint_every=1)
    assert again.skipped > 0 and again.scanned == 1
    clean = tmp_path / "clean"
    run_batch([src], clean, workers=1, progress=False)
    assert _files(out, TABLE_FILES) == _files(clean, TABLE_FILES)


def test_a_rerun_of_unchanged_sources_renders_the_index_a_full_write_renders(
        folder: Path, tmp_path: Path) -> None:
    """The quick path (tables left alone, the index from the figures kept beside them) and the
    full write give the same pages, and the quick path leaves the tables' bytes as they were."""
    from forensics.index import VIEW_FILE

    quick, full = tmp_path / "quick", tmp_path / "full"
    run_batch([folder], quick, workers=1, progress=False)
    shutil.copytree(quick, full)
    tables = _files(quick, TABLE_FILES)
    (full / VIEW_FILE).unlink()  # no kept figures: the rerun writes every table again
    run_batch([folder], quick, workers=1, progress=False)
    run_batch([folder], full, workers=1, progress=False)
    assert _files(quick, TABLE_FILES) == tables
    pages = ("index.md", "index.html")
    assert _files(quick, pages) == _files(full, pages)
    assert "unchanged sources kept" in (quick / "index.md").read_text(encoding="utf-8")


def _view_values():
    import datetime as dt
    from zoneinfo import ZoneInfo

    when = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1),
                        timezones=st.sampled_from([None, ZoneInfo("UTC"),
                                                   ZoneInfo("Europe/Berlin")]))
    scalars = (st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
               | st.floats(allow_nan=False, allow_infinity=False) | when | st.dates())
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


def _types(value):
    if isinstance(value, list):
        return [_types(v) for v in value]
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    return (type(value), getattr(value, "tzinfo", None))


@given(_view_values())
@example({"$date": 1, "$dict": [], "zone": None})
def test_kept_index_figures_come_back_as_they_were(value) -> None:
    """The index's figures kept for a rerun (``.index-view.json``) come back equal and of the
    same types: dates, zoned and naive times, dicts whose keys look like the tags."""
    import orjson

    from forensics.index import _tagged, _untagged

    back = _untagged(orjson.loads(orjson.dumps(_tagged(value))))
    assert back == value and _types(back) == _types(value)
