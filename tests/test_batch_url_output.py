"""A batch whose OUT is an fsspec URL (``memory://``, ``file://``; ``s3://`` is the same code):
the same bytes as a local OUT, reruns against the URL skip unchanged sources, a checkpoint
leaves the URL resumable, and a URL that cannot be written is one clear message."""

from __future__ import annotations

import fsspec
import orjson
import polars as pl
import pytest
from test_batch import build_inputs
from test_cluster import _table, _unstamped
from typer.testing import CliRunner

import forensics.batch as batch
from forensics.batch import run_batch
from forensics.cli import app
from forensics.destination import OutputUnavailable


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("url-out-inputs"))


@pytest.fixture(scope="module")
def local_batch(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    return run_batch(list(inputs.values()), out, workers=1, progress=False), out


def url_files(url: str) -> dict[str, bytes]:
    """Every file under ``url``, by path relative to it."""
    fs, root = fsspec.core.url_to_fs(url)
    root = root.rstrip("/")
    return {path[len(root) + 1:]: fs.cat_file(path) for path in sorted(fs.find(root))}


def local_files(out) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def same_outputs(local: dict[str, bytes], remote: dict[str, bytes]) -> None:
    """Every table, index and case-study file byte for byte; the state but its stamps."""
    assert sorted(remote) == sorted(local)
    assert _unstamped(remote.pop("state.json")) == _unstamped(local.pop("state.json"))
    assert [name for name in local if local[name] != remote[name]] == []


def test_memory_url_gets_the_bytes_of_a_local_folder_and_reruns_skip(inputs, local_batch,
                                                                     tmp_path):
    local, local_out = local_batch
    url = f"memory://forensics-tests/{tmp_path.name}/out"
    summary = run_batch(list(inputs.values()), url, workers=1, progress=False)
    assert summary.out == url
    assert (summary.sources, summary.sessions, summary.incidents, summary.errors) == \
        (local.sources, local.sessions, local.incidents, local.errors)
    written = url_files(url)
    assert sum(name.startswith("cases/") for name in written) >= local.incidents > 0
    same_outputs(local_files(local_out), written)  # no probe, no staging, no .tmp left

    again = run_batch(list(inputs.values()), url, workers=1, progress=False)
    readable = summary.sources - len(summary.errors) - summary.ignored
    assert again.scanned == 0 and again.skipped == readable
    assert (again.sessions, again.incidents) == (local.sessions, local.incidents)
    fs, _root = fsspec.core.url_to_fs(url)
    for name in ("incidents.parquet", "sessions.parquet"):
        with fs.open(f"{url}/{name}", "rb") as fh:
            assert _table(fh).equals(_table(local_out / name)), name


def test_file_url_with_a_pool_of_two_and_partitioned_tables(inputs, local_batch, tmp_path):
    _local, local_out = local_batch
    out = tmp_path / "out"
    run_batch(list(inputs.values()), f"file://{out}", workers=2, progress=False,
              partitioned=True)
    files = local_files(out)
    datasets = {name: files.pop(name) for name in list(files)
                if name.startswith(("incidents/", "sessions/"))}
    assert any(name.startswith("incidents/agent=") for name in datasets)
    same_outputs(local_files(local_out), files)
    lazy = pl.scan_parquet(out / "incidents", hive_partitioning=True).collect()
    assert lazy.height == pl.read_parquet(local_out / "incidents.parquet").height


def test_an_output_url_inside_an_input_url_is_not_scanned(inputs, tmp_path):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(inputs["folder"], root)
    first = run_batch([f"file://{root}"], f"file://{root}/triage", workers=1, progress=False)
    again = run_batch([f"file://{root}"], f"file://{root}/triage", workers=1, progress=False)
    assert (root / "triage" / "index.html").is_file()
    assert again.sources == first.sources and again.scanned == 0


def test_an_interrupted_batch_leaves_the_url_resumable(inputs, local_batch, tmp_path,
                                                       monkeypatch):
    """Checkpoints upload the tables and then the state: a batch stopped after them leaves
    a URL whose rerun skips what was done and ends with the whole batch's rows."""
    _local, local_out = local_batch
    url = f"memory://forensics-tests/{tmp_path.name}/out"
    real, calls = batch._process, []

    def stop_at_the_seventh(unit, known):
        calls.append(unit.label)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real(unit, known)

    monkeypatch.setattr(batch, "_process", stop_at_the_seventh)
    with pytest.raises(KeyboardInterrupt):
        run_batch(list(inputs.values()), url, workers=1, progress=False, checkpoint_every=3)
    monkeypatch.setattr(batch, "_process", real)
    state = orjson.loads(url_files(url)["state.json"])
    assert 0 < len(state["sources"]) <= 6
    rerun = run_batch(list(inputs.values()), url, workers=1, progress=False)
    assert rerun.skipped == sum(not s["ignored"] for s in state["sources"].values())
    fs, _root = fsspec.core.url_to_fs(url)
    for name in ("incidents.parquet", "sessions.parquet"):
        with fs.open(f"{url}/{name}", "rb") as fh:
            assert _table(fh).equals(_table(local_out / name)), name


def test_memory_url_refuses_workers_in_other_processes(inputs, tmp_path):
    with pytest.raises(OutputUnavailable) as error:
        run_batch([inputs["zip"]], "memory://forensics-tests/pool", workers=2, progress=False)
    assert str(error.value).startswith("memory://forensics-tests/pool: this filesystem lives "
                                       "in one process")


def _batch_cli(inputs, out: str):
    return CliRunner().invoke(app, ["batch", str(inputs["zip"]), "-o", out, "--no-progress"])


def test_a_url_whose_filesystem_is_not_installed_says_what_to_install(inputs, monkeypatch):
    from fsspec.registry import known_implementations

    monkeypatch.setitem(known_implementations, "nofs", {
        "class": "forensics_no_such_package.NoFileSystem",
        "err": "Install forensics-no-such-package to access nofs://"})
    result = _batch_cli(inputs, "nofs://bucket/triage")
    assert result.exit_code == 2
    assert result.output == ("forensics: nofs://bucket/triage: Install "
                             "forensics-no-such-package to access nofs://\n")


def test_an_unknown_scheme_is_one_line(inputs):
    result = _batch_cli(inputs, "nosuchscheme://bucket/triage")
    assert result.exit_code == 2
    assert result.output.startswith("forensics: nosuchscheme://bucket/triage: cannot open its "
                                    "filesystem: ")
    assert result.output.count("\n") == 1


def test_a_url_that_cannot_be_written_is_one_line(inputs, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    result = _batch_cli(inputs, f"file://{tmp_path}/a-file/triage")
    assert result.exit_code == 2
    assert result.output.startswith(f"forensics: file://{tmp_path}/a-file/triage: not "
                                    "writable: ")
    assert result.output.count("\n") == 1
    result = _batch_cli(inputs, f"file://{tmp_path}/a-file")
    assert (result.exit_code, result.output) == (
        2, f"forensics: file://{tmp_path}/a-file: is a file, not a folder\n")
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_without_fsspec_a_url_says_what_to_install(inputs, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec fails
    result = _batch_cli(inputs, "s3://bucket/triage")
    assert (result.exit_code, result.output) == (
        2, "forensics: s3://bucket/triage: writing to a URL needs fsspec: "
           "pip install 'forensics[dask]'\n")
