"""Batch faults: a killed batch leaves a state its rerun continues from, SIGTERM ends the
workers, and rows carried over by a rerun are exactly those of a clean run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import polars as pl
import pytest

from conftest import FIXTURES, REPO
from forensics.batch import run_batch

INGEST = FIXTURES / "ingest"
SOURCES = ["codex_basic.jsonl", "claude_basic.jsonl", "opencode_export_v1.json",
           "opencode_run.jsonl", "codex_exec.jsonl"]
TABLES = ("incidents.parquet", "sessions.parquet")


def _corpus(folder: Path, copies: int) -> Path:
    folder.mkdir()
    for i in range(copies):
        for name in SOURCES:
            stem, dot, ext = name.partition(".")
            shutil.copy(INGEST / name, folder / f"{stem}-{i:03d}.{ext}")
    return folder


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(out / name) for name in TABLES}


def _same(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    for name in TABLES:
        assert a[name].schema == b[name].schema
        assert a[name].equals(b[name]), name


def test_carried_over_rows_equal_a_clean_run_after_many_reruns(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "src", 1)
    clean = tmp_path / "clean"
    run_batch([src], clean, workers=1, progress=False)
    out = tmp_path / "inc"
    run_batch([src], out, workers=1, progress=False)
    for _ in range(3):  # each rerun used to shift started/ended by a microsecond
        summary = run_batch([src], out, workers=1, progress=False)
        assert summary.skipped == len(SOURCES)
    got = _tables(out)
    assert got["sessions.parquet"]["started"].null_count() < got["sessions.parquet"].height
    _same(got, _tables(clean))


def test_state_key_changes_with_version_rules_and_redaction(tmp_path: Path,
                                                           monkeypatch) -> None:
    import forensics
    from forensics.batch import _config_key
    from forensics.config import Config

    key = _config_key(Config())
    assert _config_key(Config(), redact=False) != key
    monkeypatch.setattr(forensics, "__version__", "99.0")
    assert _config_key(Config()) != key
    monkeypatch.undo()
    assert _config_key(Config(select=["FX001"])) != key
    assert _config_key(Config()) == key


def _children(pid: int) -> set[int]:
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.add(int(entry.name))
    return kids


def _gone(pids: set[int], wait: float = 30.0) -> bool:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        alive = {p for p in pids if Path(f"/proc/{p}").exists()
                 and "Z" not in (Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1][:3])}
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _start_batch(src: Path, out: Path, every: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FORENSICS_CHECKPOINT_EVERY": str(every)}
    return subprocess.Popen([sys.executable, "-m", "forensics.cli", "batch", str(src), "-o",
                             str(out), "-j", "2", "--no-progress"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_checkpoint(proc: subprocess.Popen, out: Path) -> set[int]:
    """Children of the batch once its first checkpoint is on disk."""
    workers: set[int] = set()
    while not (out / "state.json").exists():
        if proc.poll() is not None:
            pytest.fail(f"batch ended before its first checkpoint: {proc.stderr.read()!r}")
        workers |= _children(proc.pid)
        time.sleep(0.005)
    return workers | _children(proc.pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_then_rerun_continues_and_matches_a_clean_run(tmp_path: Path) -> None:
    copies = 40
    src = _corpus(tmp_path / "src", copies)
    total = copies * len(SOURCES)
    out = tmp_path / "out"
    proc = _start_batch(src, out, every=5)
    workers = _wait_for_checkpoint(proc, out)
    proc.kill()
    proc.wait()
    assert workers and _gone(workers), "workers kept running after the batch was killed"
    state = orjson.loads((out / "state.json").read_bytes())
    done = len(state["sources"])
    assert 5 <= done < total, done
    checkpointed = pl.read_parquet(out / "sessions.parquet")
    # The state is written after the tables: it names only sources whose rows are on disk
    # (a kill between the two leaves newer rows, which the rerun rescans and replaces).
    assert set(state["sources"]) <= set(checkpointed["origin"])

    summary = run_batch([src], out, workers=1, progress=False)
    assert summary.skipped == done and summary.scanned == total - done
    clean = tmp_path / "clean"
    run_batch([src], clean, workers=1, progress=False)
    _same(_tables(out), _tables(clean))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_ends_the_workers_and_leaves_a_checkpoint(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "src", 40)
    out = tmp_path / "out"
    proc = _start_batch(src, out, every=5)
    workers = _wait_for_checkpoint(proc, out)
    proc.send_signal(signal.SIGTERM)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (130, 0), stderr  # 0 only if it had just finished
    assert _gone(workers)
    assert "Traceback" not in stderr.decode()
    assert orjson.loads((out / "state.json").read_bytes())["sources"]


def test_case_studies_are_capped_and_tables_hold_every_incident(tmp_path: Path) -> None:
    src = _corpus(tmp_path / "src", 3)
    out = tmp_path / "out"
    summary = run_batch([src], out, workers=1, progress=False, max_case_sessions=2)
    incidents = pl.read_parquet(out / "incidents.parquet")
    assert incidents.height == summary.incidents > 0
    with_case = incidents.filter(pl.col("case").is_not_null())
    assert with_case["origin"].n_unique() == 2
    assert len([d for d in (out / "cases").iterdir() if d.is_dir()]) == 2


@pytest.mark.parametrize("signum, error", [(signal.SIGTERM, KeyboardInterrupt),
                                           (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_during_a_checkpoint_interrupts_after_it(signum, error) -> None:
    """A signal that arrives while a checkpoint writes the tables interrupts the batch once the
    tables are written, not inside them: raised inside polars' conversion of Python values it
    made polars panic (exit 1, a Rust backtrace, no checkpoint). Outside a checkpoint it
    interrupts at once, as before."""
    # Python's own Ctrl-C handler, as in a terminal (a detached run, CI's, starts ignoring it)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _signal_in_and_out_of_a_checkpoint(signum, error)
    finally:
        signal.signal(signal.SIGINT, before)


def _signal_in_and_out_of_a_checkpoint(signum, error) -> None:
    import os

    from forensics.batch import _Interrupted, _signals_interrupt

    written = []
    with pytest.raises(error) as raised:
        with _signals_interrupt() as interrupts:
            with interrupts.held():
                os.kill(os.getpid(), signum)
                written.append("tables")  # the rest of the checkpoint still runs
    assert written == ["tables"]
    assert isinstance(raised.value, _Interrupted) == (signum == signal.SIGTERM)
    with pytest.raises(error):
        with _signals_interrupt():
            os.kill(os.getpid(), signum)
            written.append("never")
    assert written == ["tables"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back as it was


def test_a_batch_signalled_inside_its_checkpoint_stops_once_the_checkpoint_is_written(
        tmp_path: Path) -> None:
    from forensics.batch import collect

    src = _corpus(tmp_path / "src", 4)
    checkpoints = []

    def checkpoint(so_far) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        checkpoints.append(len(so_far.outcomes))  # still runs: the signal waits for its end

    with pytest.raises(KeyboardInterrupt):
        collect([src], workers=1, progress=False, checkpoint=checkpoint, checkpoint_every=1)
    assert checkpoints == [1]  # then the batch stopped: no second unit, no second checkpoint


def test_an_ignored_ctrl_c_stays_ignored_during_a_batch() -> None:
    """A batch started with SIGINT ignored (``nohup``, a background job) is not made to stop
    on it."""
    from forensics.batch import _signals_interrupt

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _signals_interrupt():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, before)


def _half_a_result(flag: str) -> None:
    """In a pool worker: write the start of a result message and stop there, as a worker
    killed in the middle of sending its result leaves the pipe."""
    frame = sys._getframe()
    while frame is not None and "result_queue" not in frame.f_locals:
        frame = frame.f_back
    writer = frame.f_locals["result_queue"]._writer
    os.write(writer.fileno(), (100).to_bytes(4, "big") + b"x" * 10)  # 10 of 100 bytes
    Path(flag).touch()
    time.sleep(120)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_a_worker_killed_mid_result_leaves_no_pool_waiting(tmp_path: Path) -> None:
    """The pool's thread reads a result that will never be whole: killing the workers must
    end that read, or the pool's shutdown and the interpreter's exit wait forever (a SIGTERM
    hung ``batch -j 2`` so about once in 30)."""
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    from forensics.batch import _kill_workers

    flag = tmp_path / "written"
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    pool.submit(_half_a_result, str(flag))
    deadline = time.monotonic() + 30
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flag.exists()
    time.sleep(0.2)  # the pool's thread is in the read of the half message
    _kill_workers(pool)
    shutdown = threading.Thread(target=pool.shutdown, daemon=True,
                                kwargs={"wait": True, "cancel_futures": True})
    shutdown.start()
    shutdown.join(20)
    stuck = shutdown.is_alive()
    if stuck:  # release the pool's thread: a failure here must not hang the whole test run
        pool._result_queue._writer.close()
        shutdown.join(20)
    assert not stuck


def _die_mid_result() -> None:
    """In a pool worker: die as the kernel's out-of-memory killer leaves a worker sending its
    result, with the result pipe's write lock taken and half a message written."""
    frame = sys._getframe()
    while frame is not None and "result_queue" not in frame.f_locals:
        frame = frame.f_back
    queue = frame.f_locals["result_queue"]
    queue._wlock.acquire()
    os.write(queue._writer.fileno(), (100).to_bytes(4, "big") + b"x" * 10)  # 10 of 100 bytes
    os._exit(9)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_a_worker_that_dies_mid_result_costs_only_its_own_source(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """Nothing tells the pool that a worker died in the middle of sending its result: the
    pool's thread waits for the rest of the message, the other workers for the pipe's lock.
    The batch must notice the dead worker, retry what was in flight and report the one
    source as failed, as for a worker that dies at any other moment."""
    import multiprocessing
    import threading

    import forensics.batch as batch

    src = _corpus(tmp_path / "src", 1)
    healthy = run_batch([src], tmp_path / "ok", workers=1, progress=False)
    real = batch._process

    def deadly(unit, known):
        if unit.label.endswith("codex_basic-000.jsonl"):
            _die_mid_result()
        return real(unit, known)

    pools = []
    watch_init = batch._DeadWorkerWatch.__init__

    def watched(self, pool, *args, **kwargs):
        pools.append(pool)
        watch_init(self, pool, *args, **kwargs)

    # Forked workers inherit the patched function (spawned ones would re-import the module).
    monkeypatch.setattr(batch, "_pool_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(batch, "_process", deadly)
    monkeypatch.setattr(batch, "DEAD_WORKER_GRACE", 0.5)
    monkeypatch.setattr(batch._DeadWorkerWatch, "__init__", watched)
    result: dict = {}
    run = threading.Thread(target=lambda: result.update(summary=run_batch(
        [src], tmp_path / "out", workers=2, progress=False)), daemon=True)
    run.start()
    run.join(30)
    stuck = run.is_alive()
    for _ in range(20):  # release the pools: a failure here must not hang the whole test run
        if not run.is_alive():
            break
        for pool in pools:  # the retry's pool too, once the first one broke
            batch._kill_workers(pool)
            writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
            if writer is not None:
                writer.close()
        run.join(3)
    assert not stuck
    summary = result["summary"]
    died = [(where, why) for where, why in summary.errors if "worker" in why]
    assert len(died) == 1 and died[0][0].endswith("codex_basic-000.jsonl")
    assert summary.sessions == healthy.sessions - 1
