"""The batch on a Dask cluster: a LocalCluster of 2 worker processes over loopback gives the
local batch's bytes, reruns incrementally, survives a dying worker, stops cleanly when its
scheduler goes away; fsspec URL inputs; the partitioned tables."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import cloudpickle
import orjson
import polars as pl
import pytest
from distributed.diagnostics.plugin import WorkerPlugin
from test_batch import build_inputs
from typer.testing import CliRunner

from forensics.batch import BatchLost, run_batch
from forensics.cli import app
from forensics.cluster import ClusterSpec, ClusterUnavailable, dask_executor
from forensics.destination import OutputUnavailable

# Worker plugins defined here travel by value: the workers cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("cluster-inputs"))


@contextlib.contextmanager
def on_the_workers(cluster, plugin):
    """``plugin`` set up on every worker of ``cluster`` while the block runs."""
    cluster.client.register_plugin(plugin)
    try:
        yield
    finally:
        cluster.client.unregister_worker_plugin(plugin.name)


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes on 127.0.0.1, shut down when the module's tests are done."""
    with dask_executor("local:2") as executor:
        assert executor.workers == 2
        for address in executor.client.scheduler_info()["workers"]:
            assert address.startswith("tcp://127.0.0.1:")
        yield executor


@pytest.fixture(scope="module")
def local_batch(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    summary = run_batch(list(inputs.values()), out, workers=1, progress=False)
    return summary, out


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def _unstamped(state: bytes) -> dict:
    """The state file without its change stamps (they may differ between runs)."""
    state = orjson.loads(state)
    for entry in state["sources"].values():
        entry.pop("stamp", None)
    return state


def _same_outputs(a: Path, b: Path) -> None:
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    assert _unstamped(fa.pop("state.json")) == _unstamped(fb.pop("state.json"))
    differ = [name for name in fa if fa[name] != fb[name]]
    assert differ == []


def test_cluster_batch_is_byte_identical_to_the_local_batch(inputs, cluster, local_batch,
                                                            tmp_path):
    local, local_out = local_batch
    summary = run_batch(list(inputs.values()), tmp_path / "cluster", executor=cluster,
                        progress=False)
    assert (summary.sources, summary.sessions, summary.incidents, summary.errors) == \
        (local.sources, local.sessions, local.incidents, local.errors)
    assert summary.workers == 2
    written = _files(tmp_path / "cluster")
    assert {"incidents.parquet", "sessions.parquet", "errors.ndjson", "index.html",
            "index.md", "state.json"} <= set(written)
    assert sum(name.startswith("cases/") for name in written) >= local.incidents
    _same_outputs(local_out, tmp_path / "cluster")
    # And a local pool of two processes, whose completion order differs again.
    run_batch(list(inputs.values()), tmp_path / "pool", workers=2, progress=False)
    _same_outputs(local_out, tmp_path / "pool")


def test_cluster_batch_to_a_url_is_byte_identical_and_reruns_skip(inputs, cluster,
                                                                   local_batch, tmp_path):
    """OUT as a URL: the workers upload the case studies, this process the tables, index and
    state; a rerun against the URL skips every unchanged source."""
    local, local_out = local_batch
    out = tmp_path / "out"
    summary = run_batch(list(inputs.values()), f"file://{out}", executor=cluster,
                        progress=False)
    assert summary.out == f"file://{out}"
    _same_outputs(local_out, out)
    again = run_batch(list(inputs.values()), f"file://{out}", executor=cluster, progress=False)
    assert again.scanned == 0 and again.skipped == local.sources - len(local.errors) - \
        local.ignored
    with pytest.raises(OutputUnavailable, match="lives in one process"):
        run_batch([inputs["zip"]], "memory://forensics-tests/cluster", executor=cluster,
                  progress=False)


def test_options_reach_the_workers(inputs, cluster, local_batch, tmp_path):
    """No redaction and archive limits act on the cluster as locally: a compressed tar, listed
    by its worker there, stops at the same member with the same problem."""
    from forensics.archive import Limits

    paths = [inputs["folder"], inputs["tar.gz"]]
    options = {"redact": False, "limits": Limits(members=5)}
    local = run_batch(paths, tmp_path / "local", workers=1, progress=False, **options)
    remote = run_batch(paths, tmp_path / "cluster", executor=cluster, progress=False, **options)
    limited = [why for where, why in local.errors if where == str(inputs["tar.gz"])]
    assert limited == ["more than 5 members; the rest not read (raise with --archive-limits "
                       "members=N)"]
    assert remote.errors == local.errors
    _same_outputs(tmp_path / "local", tmp_path / "cluster")
    redacted = [name for name, data in _files(local_batch[1]).items() if b"[REDACTED:" in data]
    assert redacted  # the fixtures hold secrets, which a default batch hides...
    assert not [name for name, data in _files(tmp_path / "cluster").items()
                if b"[REDACTED:" in data]  # ...and the workers were told not to


def test_the_parent_lists_compressed_tars_whole(inputs, cluster):
    """On a cluster the main process never decompresses an archive: a .tar.gz or .tar.zst is
    one unit that a worker lists and reads; zip and tar members are named by name or offset."""
    problems: list = []
    units = list(cluster.list_units([inputs["tar.gz"], inputs["tar.zst"], inputs["zip"],
                                     inputs["tar"]], problems, exclude=[]))
    assert [u.kind for u in units[:2]] == ["archive", "archive"]
    assert [u.path for u in units[:2]] == [str(inputs["tar.gz"]), str(inputs["tar.zst"])]
    blobs = [u.blob for u in units[2:] if u.blob] + [b for u in units for _r, b in u.files]
    assert blobs and {b.where for b in blobs} == {"zip", "tar"}
    assert all(b.data is None for b in blobs)
    assert problems == []


class CountingClient:
    """A client that notes, at every task it submits, how many of the tasks it submitted
    before are still in flight: not yet released by the executor, which releases each future
    as it takes its result. (The client's own ``futures`` forgets a released future only on
    its event loop, which lags under load: 19 held against a window of 12 was seen.)"""

    def __init__(self, client) -> None:
        self.client = client
        self.held: list[int] = []
        self._submitted: list = []

    def submit(self, *args, **kwargs):
        self.held.append(sum(not f._cleared for f in self._submitted))  # set by release()
        future = self.client.submit(*args, **kwargs)
        self._submitted.append(future)
        return future

    def __getattr__(self, name):
        return getattr(self.client, name)


def test_tasks_in_flight_stay_within_the_window(inputs, cluster, tmp_path, monkeypatch):
    from forensics.cluster import CHUNKS_PER_WORKER

    counting = CountingClient(cluster.client)
    monkeypatch.setattr(cluster, "client", counting)
    summary = run_batch([inputs["folder"]], tmp_path / "out", executor=cluster, progress=False)
    window = cluster.workers * CHUNKS_PER_WORKER
    assert len(counting.held) > window  # more tasks than the window: the bound mattered
    assert max(counting.held) == window - 1  # fewer than the window before each submit
    local = run_batch([inputs["folder"]], tmp_path / "local", workers=1, progress=False)
    assert (summary.sources, summary.sessions) == (local.sources, local.sessions)


def test_rerun_on_the_cluster_skips_unchanged_sources(inputs, cluster, local_batch, tmp_path):
    local, _out = local_batch
    out = tmp_path / "out"
    first = run_batch(list(inputs.values()), out, executor=cluster, progress=False)
    tables = {name: _table(out / name) for name in ("incidents.parquet", "sessions.parquet")}
    again = run_batch(list(inputs.values()), out, executor=cluster, progress=False)
    readable = first.sources - len(first.errors) - first.ignored
    assert again.scanned == 0 and again.skipped == readable
    # Compressed-tar members have no stamp: their workers read them and skip them by hash.
    assert again.sessions == local.sessions and again.incidents == local.incidents
    for name, table in tables.items():
        assert _table(out / name).equals(table), name


def _table(path: Path) -> pl.DataFrame:
    """A table with its times to the millisecond: rows carried over from the last run drift by
    a microsecond today (the hardening issue fixes that), whatever runs the batch."""
    df = pl.read_parquet(path)
    return df.with_columns(pl.col(pl.Datetime).dt.round("1ms"))


class DeadlyUnit(WorkerPlugin):
    """Every worker, replacements included, dies (as if killed) when it reads a unit whose
    label ends with ``suffix``."""

    name = "deadly-unit"

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def setup(self, worker) -> None:
        import forensics.batch as batch

        real = batch._process
        suffix = self.suffix

        def deadly(unit, known):
            if unit.label.endswith(suffix):
                os._exit(9)
            return real(unit, known)

        deadly.real = real
        batch._process = deadly

    def teardown(self, worker) -> None:
        import forensics.batch as batch

        batch._process = getattr(batch._process, "real", batch._process)


def test_a_dying_worker_is_replaced_and_costs_only_its_own_source(inputs, cluster, tmp_path):
    healthy = run_batch([inputs["folder"]], tmp_path / "ok", workers=1, progress=False)
    with on_the_workers(cluster, DeadlyUnit("codex_basic.jsonl")):
        summary = run_batch([inputs["folder"]], tmp_path / "out", executor=cluster,
                            progress=False)
    died = [(where, why) for where, why in summary.errors if "worker" in why]
    assert len(died) == 1 and died[0][0].endswith("codex_basic.jsonl")
    assert died[0][1] == "the worker reading it died (killed or out of memory)"
    assert summary.sessions == healthy.sessions - 1
    assert summary.sources == healthy.sources
    cluster.client.wait_for_workers(2, timeout=60)  # the nannies replaced the dead workers


class SetUpOtherwise(WorkerPlugin):
    """Every worker reports another forensics version, or fails to set up for a batch."""

    name = "set-up-otherwise"

    def __init__(self, what: str) -> None:
        self.what = what

    def setup(self, worker) -> None:
        import forensics
        import forensics.batch as batch

        self.saved = (forensics.__version__, batch._init_worker)
        if self.what == "version":
            forensics.__version__ = "0.0.1"
        else:
            def broken(*args, **kwargs):
                raise RuntimeError("no rules here")

            batch._init_worker = broken

    def teardown(self, worker) -> None:
        import forensics
        import forensics.batch as batch

        forensics.__version__, batch._init_worker = self.saved


def test_workers_of_another_version_are_refused_before_any_task(inputs, cluster, tmp_path):
    with on_the_workers(cluster, SetUpOtherwise("version")), \
            pytest.raises(ClusterUnavailable) as error:
        run_batch([inputs["zip"]], tmp_path / "out", executor=cluster, progress=False)
    assert str(error.value).startswith("the Dask worker at tcp://127.0.0.1:")
    assert str(error.value).endswith(" runs forensics 0.0.1, this machine forensics 0.1.0")
    assert not (tmp_path / "out" / "state.json").exists()


def test_a_task_that_fails_on_its_worker_ends_the_batch_with_one_message(inputs, cluster,
                                                                        tmp_path):
    with on_the_workers(cluster, SetUpOtherwise("setup")), pytest.raises(BatchLost) as lost:
        run_batch([inputs["zip"]], tmp_path / "out", executor=cluster, progress=False)
    assert str(lost.value).startswith(
        "a Dask worker could not run forensics' task (RuntimeError: no rules here); every "
        "worker needs forensics 0.1.0 (pip install 'forensics[dask]') and the batch's files "
        "at the same paths; ")
    assert (tmp_path / "out" / "state.json").is_file()  # a rerun continues from there


def test_a_worker_without_the_case_studies_filesystem_says_so(tmp_path):
    from forensics.cluster import check_worker

    assert check_worker("nosuchscheme://bucket/out/cases").startswith(
        "cannot write case studies to nosuchscheme://bucket/out/cases: cannot open its "
        "filesystem: ")
    assert check_worker(str(tmp_path / "cases")) == "forensics 0.1.0"
    assert check_worker("/no/such/shared/out/cases") == (
        "cannot see OUT at /no/such/shared/out: mount it at the same path on every worker, or "
        "give OUT as a URL")


def test_each_batch_starts_its_workers_afresh(cluster, tmp_path):
    """A long-lived cluster reruns a batch into the same OUT after its archive was rewritten
    (other members, in another order): the workers read the new archive, not through the zip
    directory they kept open from the last batch."""
    from test_batch import FIXTURES

    files = [*sorted((FIXTURES / "seeds").glob("seed_*.json")),
             FIXTURES / "resends_after_provider_errors.jsonl"]
    archive = tmp_path / "logs.zip"
    for n in range(2):
        members = [(f"{n}-{k}-{p.name}", p) for k in range(2) for p in files]
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, p in members[::1 - 2 * n]:
                zf.write(p, name)
        remote = run_batch([archive], tmp_path / "cluster", executor=cluster, progress=False)
        local = run_batch([archive], tmp_path / f"local{n}", workers=1, progress=False)
        assert remote.errors == [] and remote.sessions == local.sessions == len(members)
        assert remote.scanned == len(members)
        for name in ("incidents.parquet", "sessions.parquet"):
            assert _table(tmp_path / "cluster" / name).equals(
                _table(tmp_path / f"local{n}" / name)), name


def _start_scheduler(tmp_path: Path) -> tuple[subprocess.Popen, subprocess.Popen, str]:
    """A scheduler and one worker in their own processes, on loopback."""
    info = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                  "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(info)], **quiet)
    deadline = time.monotonic() + 60
    while not (info.is_file() and info.read_text().strip()):
        assert time.monotonic() < deadline and scheduler.poll() is None, "no scheduler"
        time.sleep(0.05)
    address = json.loads(info.read_text())["address"]
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                               "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                               "--host", "127.0.0.1"], **quiet)
    return scheduler, worker, address


def _slow_down(dask_worker=None) -> None:
    """On the worker: each unit takes a fifth of a second longer."""
    import forensics.batch as batch

    real = batch._process

    def slow(unit, known):
        time.sleep(0.2)
        return real(unit, known)

    batch._process = slow


def test_a_scheduler_that_goes_away_ends_the_batch_and_a_rerun_continues(inputs, tmp_path,
                                                                         local_batch,
                                                                         cluster):
    scheduler, worker, address = _start_scheduler(tmp_path)
    out = tmp_path / "out"
    try:
        with dask_executor(address) as remote:
            remote.client.run(_slow_down)

            def kill_after_first_case() -> None:
                while not any((out / "cases").glob("*")) and scheduler.poll() is None:
                    time.sleep(0.02)
                scheduler.kill()

            killer = threading.Thread(target=kill_after_first_case)
            killer.start()
            with pytest.raises(BatchLost) as lost:
                run_batch([inputs["folder"]], out, executor=remote, progress=False)
            killer.join()
    finally:
        scheduler.kill()
        worker.kill()
        scheduler.wait()
        worker.wait()
    message = str(lost.value)
    # the reason is "connection lost" when Dask cancels the futures, else the first line of the
    # error the gather raised (a kill during a gather): which one is the kill's timing
    assert re.fullmatch(rf"lost the Dask scheduler at {re.escape(address)} \([^\n]+?\); .*"
                        rf"written to {re.escape(str(out))}: run the same command again to "
                        r"continue", message, re.S), message
    done = lost.value.summary
    healthy = run_batch([inputs["folder"]], tmp_path / "whole", workers=1, progress=False)
    assert 0 < done.sources < healthy.sources
    state = orjson.loads((out / "state.json").read_bytes())
    assert 0 < len(state["sources"]) <= done.sources

    rerun = run_batch([inputs["folder"]], out, executor=cluster, progress=False)
    assert rerun.skipped == sum(not s["ignored"] for s in state["sources"].values())
    assert rerun.scanned == healthy.scanned - rerun.skipped
    for name in ("incidents", "sessions"):
        assert _table(out / f"{name}.parquet").equals(
            _table(tmp_path / "whole" / f"{name}.parquet")), name


def test_cluster_spec():
    assert ClusterSpec.parse("tcp://127.0.0.1:8786") == ClusterSpec(address="tcp://127.0.0.1:8786")
    assert ClusterSpec.parse("local:3") == ClusterSpec(workers=3)
    with pytest.raises(ClusterUnavailable, match="local\\[:N\\]"):
        ClusterSpec.parse("somehost:8786")


def test_an_unreachable_scheduler_says_so(tmp_path):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ClusterUnavailable) as error:
        with dask_executor(f"tcp://127.0.0.1:{port}", timeout="1s"):
            pass
    assert str(error.value).startswith(f"cannot reach the Dask scheduler at "
                                       f"tcp://127.0.0.1:{port}: ")


def test_without_the_dask_extra_the_option_says_what_to_install(inputs, tmp_path,
                                                                monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    result = CliRunner().invoke(app, ["batch", str(inputs["zip"]), "-o", str(tmp_path / "o"),
                                      "--cluster", "local:2", "--no-progress"])
    assert result.exit_code == 2
    assert result.output == ("forensics: --cluster needs the dask extra: "
                             "pip install 'forensics[dask]'\n")
    assert not (tmp_path / "o").exists()


def _without_scheme(df: pl.DataFrame) -> pl.DataFrame:
    """Rows as if read from paths: no ``file://`` in origins, sources and read issues."""
    df = df.with_columns(pl.col("origin", "source").str.strip_prefix("file://"))
    if "issues" in df.columns:
        df = df.with_columns(pl.col("issues").list.eval(
            pl.element().str.replace_all("file://", "", literal=True)))
    return df.drop("case", strict=False)


def test_file_urls_are_read_in_place_like_paths(inputs, local_batch, tmp_path):
    """fsspec URLs of a folder and of every archive kind give the rows of the same paths
    (only ``file://`` in front of origins and sources)."""
    _local, local_out = local_batch
    urls = [f"file://{p}" for p in inputs.values()]
    summary = run_batch(urls, tmp_path / "out", workers=1, progress=False)
    assert summary.errors == [(f"file://{p}", r) for p, r in _local.errors]
    for name in ("incidents", "sessions"):
        got = _without_scheme(pl.read_parquet(tmp_path / "out" / f"{name}.parquet"))
        want = pl.read_parquet(local_out / f"{name}.parquet").drop("case", strict=False)
        assert got.equals(want), name
    state = orjson.loads((tmp_path / "out" / "state.json").read_bytes())
    assert all(label.startswith("file://") for label in state["sources"])
    again = run_batch(urls, tmp_path / "out", workers=1, progress=False)
    assert again.scanned == 0 and again.skipped == _local.skipped + summary.scanned


def test_cli_on_a_local_cluster_over_urls_with_partitioned_tables(inputs, local_batch,
                                                                  tmp_path):
    _local, local_out = local_batch
    urls = [f"file://{p}" for p in inputs.values()]
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["batch", *urls, "-o", str(out), "--cluster", "local:2",
                                      "--partitioned", "--no-progress"])
    assert result.exit_code == 1, result.output  # incidents found
    incidents = pl.read_parquet(out / "incidents.parquet")
    assert _without_scheme(incidents).equals(
        pl.read_parquet(local_out / "incidents.parquet").drop("case"))

    lazy = pl.scan_parquet(out / "incidents", hive_partitioning=True)
    assert set(lazy.collect_schema()) == set(incidents.columns) | {"month"}
    month = pl.col("started").dt.strftime("%Y-%m")
    whole = lazy.collect().drop("month").select(incidents.columns)
    assert _row_set(whole) == _row_set(incidents)
    agent, first_month = incidents.filter(pl.col("started").is_not_null()).select(
        "agent", month.alias("m")).row(0)
    picked = lazy.filter((pl.col("agent") == agent) & (pl.col("month") == first_month)).collect()
    expected = incidents.filter((pl.col("agent") == agent) & (month == first_month))
    assert picked.height == expected.height > 0
    sessions = pl.scan_parquet(out / "sessions", hive_partitioning=True).collect()
    assert sessions.height == pl.read_parquet(out / "sessions.parquet").height


def _row_set(df: pl.DataFrame) -> list[bytes]:
    return sorted(orjson.dumps(row, default=str) for row in df.to_dicts())


def test_duckdb_reads_the_partitioned_tables(local_batch, tmp_path):
    import duckdb

    from forensics.dataset import write_partitioned

    _local, local_out = local_batch
    tables = {name: pl.read_parquet(local_out / f"{name}.parquet")
              for name in ("incidents", "sessions")}
    shutil.copytree(local_out, tmp_path / "out")
    write_partitioned(tables, tmp_path / "out")
    glob = (tmp_path / "out" / "incidents" / "**" / "*.parquet").as_posix()
    con = duckdb.connect()
    rows = con.execute(f"select agent, month, count(*) from read_parquet('{glob}', "
                       "hive_partitioning = true) group by all order by all").fetchall()
    expected = (tables["incidents"]
                .group_by("agent", month=pl.col("started").dt.strftime("%Y-%m"))
                .len().sort("agent", "month", nulls_last=True).rows())
    assert sorted(rows, key=str) == sorted(expected, key=str)
    assert sum(n for _a, _m, n in rows) == tables["incidents"].height


def test_workers_that_join_after_the_start_get_work(inputs, cluster, tmp_path, monkeypatch):
    """The executor was made with 2 workers; a third joins (an autoscaled cluster, a queued
    SLURM job starting): the window of tasks in flight grows to match, so it is not idle."""
    from forensics.cluster import CHUNKS_PER_WORKER

    local_cluster = cluster.client.cluster
    local_cluster.scale(3)
    try:
        cluster.client.wait_for_workers(3, timeout=60)
        counting = CountingClient(cluster.client)
        monkeypatch.setattr(cluster, "client", counting)
        summary = run_batch([inputs["folder"]], tmp_path / "out", executor=cluster,
                            progress=False)
        assert cluster.workers == 3
        assert 2 * CHUNKS_PER_WORKER < max(counting.held) < 3 * CHUNKS_PER_WORKER
        local = run_batch([inputs["folder"]], tmp_path / "local", workers=1, progress=False)
        assert (summary.sources, summary.sessions) == (local.sources, local.sessions)
    finally:
        monkeypatch.undo()
        local_cluster.scale(2)
        deadline = time.monotonic() + 60
        while len(cluster.client.scheduler_info()["workers"]) != 2:
            assert time.monotonic() < deadline, "the third worker did not leave"
            time.sleep(0.1)
        cluster.workers = 2
