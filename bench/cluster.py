"""How the batch scales on Dask: 1 and 2 LocalCluster workers against the in-process batch, the
CPU each side spends, and the scheduler's cost per task (docs/scaling.md).

    python bench/cluster.py                 # 60 sessions per format, 150-turn median
    python bench/cluster.py --sessions 20   # quicker
    python bench/cluster.py --repeat 3      # 1 and 2 workers alternately, three times each

Wall time on a shared machine says little alone, so every run also reports CPU seconds: the
parent's (listing, scheduling, writing tables) and the workers' (reading and scanning), asked
from each worker process. The scheduler's overhead is timed with empty tasks submitted through
the same bounded window the batch uses.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from generate import generate  # noqa: E402

from forensics.batch import run_batch  # noqa: E402
from forensics.cluster import CHUNKS_PER_WORKER, dask_executor  # noqa: E402

FORMATS = ["opencode-export", "claude-code", "codex"]
IDLE_S = 5.0


def _worker_cpu() -> float:
    return time.process_time()


def cluster_run(data: Path, workers: int, out: Path) -> dict:
    with dask_executor(f"local:{workers}") as ex:
        ex.client.run(_warm)
        before = ex.client.run(_worker_cpu)
        load = os.getloadavg()[0]
        parent = time.process_time()
        t = time.perf_counter()
        summary = run_batch([data], out, executor=ex, progress=False)
        wall = time.perf_counter() - t
        parent = time.process_time() - parent
        after = ex.client.run(_worker_cpu)
        overhead = task_overhead(ex)
        idle = time.process_time()
        time.sleep(IDLE_S)  # what the scheduler and client cost this process with no task
        idle = (time.process_time() - idle) / IDLE_S
    return {"workers": workers, "load": load, "wall_s": wall, "parent_cpu_s": parent,
            "worker_cpu_s": sum(after[w] - before[w] for w in after),
            # The busiest worker's CPU: the wall time the run would take on free cores.
            "worker_cpu_max_s": max(after[w] - before[w] for w in after),
            "idle_parent_cpu_per_s": idle, "sessions": summary.sessions,
            "incidents": summary.incidents, **overhead}


def _warm() -> None:
    """Import what a task imports, so the first timed task does not pay for it."""
    import forensics.engine  # noqa: F401
    import forensics.report  # noqa: F401


def _noop(x):
    return x


def task_overhead(ex, tasks: int = 2000) -> dict:
    """Seconds per empty task, round trip through the scheduler, with the batch's window."""
    from distributed import as_completed

    window = ex.workers * CHUNKS_PER_WORKER
    parent = time.process_time()
    t = time.perf_counter()
    done = as_completed()
    submitted = 0
    for _ in range(min(window, tasks)):
        done.add(ex.client.submit(_noop, submitted, pure=False))
        submitted += 1
    for fut in done:
        fut.result()
        fut.release()
        if submitted < tasks:
            done.add(ex.client.submit(_noop, submitted, pure=False))
            submitted += 1
    wall = time.perf_counter() - t
    return {"task_s": wall / tasks, "task_parent_cpu_s": (time.process_time() - parent) / tasks}


def local_run(data: Path, out: Path) -> dict:
    load = os.getloadavg()[0]
    parent = time.process_time()
    t = time.perf_counter()
    summary = run_batch([data], out, workers=1, progress=False)
    return {"workers": "in-process", "load": load, "wall_s": time.perf_counter() - t,
            "parent_cpu_s": time.process_time() - parent, "sessions": summary.sessions,
            "incidents": summary.incidents}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=60, help="sessions per format")
    ap.add_argument("--turns", type=int, default=150, help="median turns per session")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of 1 and 2 workers, alternately (the load changes meanwhile)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="forensics-cluster-bench-"))
    try:
        data = root / "data"
        manifest = generate(FORMATS, args.sessions, args.turns, data, 7)
        units = manifest["sessions"]
        print(f"{units} sessions, {manifest['bytes'] / 1e6:.0f} MB, "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
        runs = [local_run(data, root / "local")]
        _print(runs[-1], units)
        for n in range(args.repeat):
            for workers in (1, 2):
                runs.append(cluster_run(data, workers, root / f"cluster-{workers}-{n}"))
                _print(runs[-1], units)
        print("--", flush=True)
        for r in runs:
            _print(r, units)
        if args.json:
            args.json.write_bytes(orjson.dumps({"units": units, "bytes": manifest["bytes"],
                                                "runs": runs}, option=orjson.OPT_INDENT_2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _print(r: dict, units: int) -> None:
    """One run: wall, CPU on each side, and the cores it got (CPU / wall)."""
    cpu = r["parent_cpu_s"] + r.get("worker_cpu_s", 0.0)
    per_unit = r.get("worker_cpu_s", 0.0) / units * 1e3
    extra = (f", workers {r['worker_cpu_s']:.1f} s CPU ({per_unit:.0f} ms/unit, busiest "
             f"{r['worker_cpu_max_s']:.1f} s); "
             f"empty task {r['task_s'] * 1e3:.2f} ms wall, "
             f"{r['task_parent_cpu_s'] * 1e3:.2f} ms parent CPU; idle parent "
             f"{r['idle_parent_cpu_per_s'] * 1e3:.0f} ms CPU/s"
             if "worker_cpu_s" in r else "")
    print(f"{r['workers']!s:>10}: load {r['load']:.1f}, {r['wall_s']:.1f} s wall, "
          f"{cpu:.1f} s CPU = {cpu / r['wall_s']:.2f} cores "
          f"(parent {r['parent_cpu_s']:.1f} s{extra})", flush=True)


if __name__ == "__main__":
    main()
