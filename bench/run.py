"""Measure forensics against the cost of merely reading its input, in one run on the same files.

    python bench/run.py --quick   # ~1 minute: 1,000-turn sessions, 60- and 180-session archives
    python bench/run.py           # ~7 minutes: 10,000-turn sessions, 1,000-session, 1.1 GB archives
    python bench/run.py --json out.json  # also write every number
    python bench/run.py --linear         # one session per format at 10k and 100k turns
    python bench/run.py --linear 10000,100000,1000000 --format codex   # 1M records, one format

Data is generated (seeded) under ``bench/data/`` on first use and reused while the parameters
match. Every stage runs in a fresh process (``bench/stages.py``; batch through the CLI) so
peak RSS belongs to that stage alone; each prints wall time, MB/s, turns/s, peak RSS and its
ratio to the floor (reading the bytes and ``orjson.loads`` of every record). The scan's incidents
are checked against the planted ones (found / exact anchor / unexpected extras per rule).
Stages whose module is not there yet are listed as skipped, never fatal.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from generate import FORMATS, generate  # noqa: E402

PLANS = {
    # name: (sessions per format, turns per session (median in archives), target MB, role)
    "quick": {
        "long-1k": (1, 1_000, 0, "long"),
        "archive-60": (20, 150, 0, "archive"),
        "archive-180": (60, 150, 0, "archive"),
    },
    "full": {
        "long-10k": (1, 10_000, 0, "long"),
        "archive-1k": (334, 150, 0, "archive"),
        "archive-1g": (334, 150, 1100, "archive"),
    },
}
LINEAR_TURNS = (10_000, 100_000)
"""Session lengths of ``--linear``: one session per format at each. ``--linear
10000,100000,1000000 --format claude-code`` measures 1M records one format at a time: a
3.3–3.7 GB JSONL session scans in 3.5–5 CPU minutes and 5–7 GB of memory; a 1M-turn opencode
export is one 2.6 GB JSON document, past the 2 GiB orjson parses at all (its stages fail with
that message): 750000 is the longest opencode session under the limit."""
SEED = 20261130
BATCH_REPEAT = 2
"""Batch runs are the noisiest (two cores shared with whatever else runs): best of this many."""
TIMEOUT = 600.0
"""Seconds a stage may take before it is killed and reported as such (``--timeout``)."""


# --- data --------------------------------------------------------------------------------------

def dataset(root: Path, name: str, sessions: int, turns: int, target_mb: float,
            formats: tuple[str, ...] = FORMATS) -> dict:
    """The manifest of a generated dataset, generating it when missing or stale."""
    out = root / name
    params = {"sessions": sessions, "turns": turns, "target_mb": target_mb, "seed": SEED,
              "generator": hashlib.blake2b((BENCH / "generate.py").read_bytes()).hexdigest()}
    if formats != FORMATS:  # the all-format key stays what it was, so caches stay valid
        params["formats"] = list(formats)
    stamp = out / "params.json"
    if stamp.is_file() and orjson.loads(stamp.read_bytes()) == params:
        return orjson.loads((out / "planted.json").read_bytes())
    if out.exists():
        shutil.rmtree(out)
    t = time.perf_counter()
    print(f"generating {name} ...", file=sys.stderr, flush=True)
    m = generate(list(formats), sessions, turns, out, SEED, target_mb,
                 log=lambda s: print(s, file=sys.stderr, flush=True))
    print(f"  {m['sessions']} sessions, {m['bytes'] / 1e6:.0f} MB in "
          f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
    stamp.write_bytes(orjson.dumps(params))
    return m


# --- measurement -------------------------------------------------------------------------------

def run_limited(cmd: list[str], timeout: float) -> subprocess.CompletedProcess | None:
    """Run ``cmd`` in its own process group; kill the whole group (workers too) on timeout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_stage(stage: str, files: list[str], tmp: Path, incidents: Path | None = None) -> dict:
    listing = tmp / f"files-{os.getpid()}-{time.monotonic_ns()}.txt"
    listing.write_text("\n".join(files))
    cmd = [sys.executable, str(BENCH / "stages.py"), stage, str(listing)]
    if incidents:
        cmd.append(str(incidents))
    proc = run_limited(cmd, TIMEOUT)
    listing.unlink(missing_ok=True)
    if proc is None:
        return {"error": f"did not finish in {TIMEOUT:.0f} s (killed)", "timeout": True}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {last}"}
    return orjson.loads(proc.stdout.strip().splitlines()[-1])


def best_of(n: int, fn) -> dict:
    runs = [fn()]
    while len(runs) < n and "wall_s" in runs[0]:
        runs.append(fn())
    ok = [r for r in runs if "wall_s" in r]
    return min(ok, key=lambda r: r["wall_s"]) if ok else runs[0]


def forensics_exe() -> list[str]:
    exe = Path(sys.executable).parent / "forensics"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "forensics.cli"]


def batch_available() -> str | None:
    """None when ``forensics batch`` exists, else why not."""
    proc = subprocess.run([*forensics_exe(), "batch", "--help"], capture_output=True, text=True)
    return None if proc.returncode == 0 else "forensics batch not available yet"


_TIMED_CHILD = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_s": wall, "rc": p.returncode, "stderr": p.stderr[-400:],
                  "cpu_s": r.ru_utime + r.ru_stime, "peak_rss_mb": r.ru_maxrss / 1024}))
"""


def timed_command(cmd: list[str]) -> dict:
    """Wall time and the peak RSS of the largest process in the command's tree."""
    proc = run_limited([sys.executable, "-c", _TIMED_CHILD, *cmd], TIMEOUT)
    if proc is None:
        return {"rc": -1, "stderr": f"did not finish in {TIMEOUT:.0f} s (killed)"}
    return orjson.loads(proc.stdout.strip().splitlines()[-1])


def run_batch(path: Path, workers: int, tmp: Path) -> dict:
    out = tmp / f"batch-{workers}"
    shutil.rmtree(out, ignore_errors=True)
    r = timed_command([*forensics_exe(), "batch", str(path), "-o", str(out),
                       "--workers", str(workers), "--full"])
    shutil.rmtree(out, ignore_errors=True)
    if r["rc"] not in (0, 1):
        last = (r["stderr"].strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {r['rc']}: {last}"}
    return r


def run_scan_cli(path: Path, tmp: Path) -> dict:
    """``forensics scan DIR --format json`` through the CLI: its peak memory must follow the
    largest session (the same in both archive sizes), not the archive."""
    out = tmp / "scan.json"
    r = timed_command([*forensics_exe(), "scan", str(path), "--format", "json", "-o", str(out)])
    out.unlink(missing_ok=True)
    if r["rc"] not in (0, 1):
        last = (r["stderr"].strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {r['rc']}: {last}"}
    return r


def run_batch_rerun(path: Path, tmp: Path) -> dict:
    """A second ``batch -w1`` into the same folder with the sources unchanged: what it costs
    to find there is nothing new."""
    out = tmp / "batch-rerun"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [*forensics_exe(), "batch", str(path), "-o", str(out), "--workers", "1"]
    first = timed_command(cmd)
    if first["rc"] not in (0, 1):
        return {"error": f"exit {first['rc']}: first run"}
    again = timed_command(cmd)
    shutil.rmtree(out, ignore_errors=True)
    if again["rc"] not in (0, 1):
        last = (again["stderr"].strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {again['rc']}: {last}"}
    return again


def prepare() -> None:
    """Before any stage: the package as a user's second run finds it.

    Its bytecode compiled, as an installed package has it (pip compiles it at install, Python
    at the first import): where ``PYTHONDONTWRITEBYTECODE`` is set and the checkout has no
    ``__pycache__``, every stage's process would compile the modules it imports from source
    (about 50 ms of a small scan, 15-20 ms of importing one reader), which is Python's
    compiler, not forensics. And the rule files' knowledge cache filled
    (``forensics.knowledge_cache``) by one scan of the packaged sample, as a user's first run
    fills it."""
    import compileall
    import importlib.util

    package = importlib.util.find_spec("forensics").submodule_search_locations[0]
    compileall.compile_dir(package, quiet=2)
    sample = subprocess.run([*forensics_exe(), "sample"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    subprocess.run([*forensics_exe(), "scan", sample], capture_output=True, cwd=REPO)


def startup(small: str) -> dict:
    """Best wall time of 5 runs of ``--help``, a small scan and ``python -c pass`` (after
    ``prepare``)."""

    def best(cmd):
        walls = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
            walls.append(time.perf_counter() - t)
        return min(walls)

    exe = forensics_exe()
    return {"help_s": best([*exe, "--help"]), "scan_small_s": best([*exe, "scan", small]),
            "python_s": best([sys.executable, "-c", "pass"])}


# --- correctness: planted incidents against what the scan found -------------------------------

def check_planted(manifest: dict, incidents: list[dict], rules: list[str]) -> dict:
    """Per rule: planted, found (anchor inside the planted exchange), exact anchor, extras."""
    by_session: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for i in incidents:
        by_session[(i["session_id"], i["rule"])].append(i)
    used: set[int] = set()
    table: dict[str, dict] = {r: {"planted": 0, "found": 0, "exact": 0, "extra": 0,
                                  "missed": []} for r in rules}
    for p in manifest["planted"]:
        row = table.get(p["rule"])
        if row is None:
            continue
        row["planted"] += 1
        cands = by_session.get((p["session_id"], p["rule"]), [])
        block = set(p["block"])
        hit = next((i for i in cands if i["anchor"] == p["anchor"]), None)
        if hit is not None:
            row["exact"] += 1
        else:
            hit = next((i for i in cands if i["anchor"] in block and id(i) not in used), None)
        if hit is None:
            if len(row["missed"]) < 5:
                row["missed"].append(f"{p['file']} {p['anchor']}")
            continue
        row["found"] += 1
        used.add(id(hit))
    extras: dict[str, list[str]] = defaultdict(list)
    for i in incidents:
        if id(i) not in used and i["rule"] in table:
            table[i["rule"]]["extra"] += 1
            extras[i["rule"]].append(f"{Path(i['source']).name} {i['anchor']}")
    for rule, items in extras.items():
        table[rule]["extra_examples"] = items[:5]
    return table


def available_rules() -> list[str]:
    code = "from forensics.config import Config; print(' '.join(r.slug for r in Config().rules()))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    return proc.stdout.split() if proc.returncode == 0 else []


# --- the run -----------------------------------------------------------------------------------

def machine() -> dict:
    cpu = ""
    try:
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines()
                    if ln.startswith("Model name")), "")
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip()
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(), "orjson": orjson.__version__,
            "platform": platform.platform(), "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def row(dataset: str, stage: str, r: dict, nbytes: int, turns: int, floor_s: float | None):
    if "skipped" in r or "error" in r:
        return {"dataset": dataset, "stage": stage, "note": r.get("skipped") or r["error"]}
    wall = r["wall_s"]
    out = {"dataset": dataset, "stage": stage, "wall_s": wall, "cpu_s": r.get("cpu_s"),
           "mb_s": nbytes / 1e6 / wall,
           "turns_s": turns / wall, "peak_rss_mb": r.get("peak_rss_mb"),
           "x_floor": wall / floor_s if floor_s else None, "raw": r}
    if "render_s" in r:
        out["note"] = f"rendering alone {r['render_s']:.2f} s ({r.get('renderer', '')})"
    return out


def measure(plan: dict, root: Path, repeat: int, workers: int,
            formats: tuple[str, ...] = FORMATS) -> dict:
    linear = all(role == "linear" for *_x, role in plan.values())
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    rows: list[dict] = []
    checks: dict[str, dict] = {}
    rules = available_rules()
    no_batch = batch_available()
    data: dict[str, dict] = {}
    per_rule: dict[str, dict[str, float]] = {}
    sizes: dict[str, dict] = {}
    try:
        for name, (sessions, turns, target_mb, role) in plan.items():
            data[name] = m = dataset(root, name, sessions, turns, target_mb,
                                     formats if role == "linear" else FORMATS)
            base = root / name
            quick_long = role == "linear"  # floor, ingest and scan only, once
            if quick_long:
                role = "long"
            groups = ([(f"{name}/{fmt}", [f for f in m["files"] if f["format"] == fmt])
                       for fmt in FORMATS if any(f["format"] == fmt for f in m["files"])]
                      if role == "long" else [(name, m["files"])])
            all_incidents: list[dict] = []
            scanned = True
            for label, files in groups:
                paths = [str(base / f["file"]) for f in files]
                nbytes = sum(f["bytes"] for f in files)
                nturns = sum(f["turns"] for f in files)
                sizes[label] = {"bytes": nbytes, "files": len(files)}
                reps = repeat if role == "long" and not quick_long else 1
                print(f"measuring {label} ({len(files)} files, {nbytes / 1e6:.0f} MB)",
                      file=sys.stderr, flush=True)
                # The floor is every ratio's denominator and cheap: always the best of three.
                floor = best_of(3 if not quick_long else 1,
                                lambda: run_stage("floor", paths, tmp))
                floor_s = floor.get("wall_s")
                ingest = best_of(reps, lambda: run_stage("ingest", paths, tmp))
                # turns/s counts the turns the readers produce, the same number for every stage
                nturns = ingest.get("turns") or nturns
                rows.append(row(label, "floor", floor, nbytes, nturns, floor_s))
                rows.append(row(label, "ingest", ingest, nbytes, nturns, floor_s))
                inc = tmp / "incidents.json"
                scan = best_of(reps, lambda: run_stage("scan", paths, tmp, inc))
                rows.append(row(label, "scan", scan, nbytes, nturns, floor_s))
                scanned = scanned and "wall_s" in scan
                if inc.exists():
                    with open(inc, "rb") as fh:
                        all_incidents.extend(orjson.loads(line) for line in fh)
                    inc.unlink()
                if role == "long" and not quick_long:
                    rows.append(row(label, "report", best_of(reps, lambda: run_stage(
                        "report", paths, tmp)), nbytes, nturns, floor_s))
                    split = run_stage("rules", paths, tmp)
                    if "rules_s" in split:
                        per_rule[label] = split["rules_s"]
                elif role == "archive":
                    rows.append(row(label, "scan CLI", run_scan_cli(base, tmp), nbytes, nturns,
                                    floor_s))
                    rows.append(row(label, "read_incidents", run_stage("notebook", paths, tmp),
                                    nbytes, nturns, floor_s))
                    for w in (1, workers):
                        r = {"skipped": no_batch} if no_batch else best_of(
                            BATCH_REPEAT, lambda: run_batch(base, w, tmp))
                        rows.append(row(label, f"batch -w{w}", r, nbytes, nturns, floor_s))
                    if not no_batch:
                        rows.append(row(label, "batch rerun -w1", run_batch_rerun(base, tmp),
                                        nbytes, nturns, floor_s))
            if rules and scanned:
                checks[name] = check_planted(m, all_incidents, rules)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"machine": machine(), "rows": rows, "planted": checks, "rules": rules,
            "per_rule_s": per_rule, "files": sizes,
            "startup": startup_small(root) if not linear else {}, "datasets": {
                k: {"sessions": v["sessions"], "bytes": v["bytes"], "turns": v["turns"],
                    "largest_bytes": max(f["bytes"] for f in v["files"])}
                for k, v in data.items()}}


def startup_small(root: Path) -> dict:
    m = dataset(root, "small", 1, 60, 0)
    f = next(x for x in m["files"] if x["format"] == "claude-code")
    return startup(str(root / "small" / f["file"])) | {"small_file_bytes": f["bytes"]}


# --- the targets ------------------------------------------------------------------------

def _verdict(value: float | None, limit: float) -> str:
    if value is None:
        return "n/a"
    return "PASS" if value <= limit else f"MISS by {value / limit:.2f}x"


def targets(result: dict) -> list[dict]:
    """Every target of the issue with what was measured, its ratio, the limit and the verdict.

    Ratios are taken in CPU seconds, which other jobs on a shared machine do not inflate; the
    wall-time ratio is shown beside them."""
    rows = {(r["dataset"], r["stage"]): r for r in result["rows"] if "wall_s" in r}
    out: list[dict] = []

    def add(target: str, measured: str, ratio: float | None, limit: float,
            wall: float | None = None) -> None:
        out.append({"target": target, "measured": measured, "ratio": ratio, "limit": limit,
                    "wall_ratio": wall, "verdict": _verdict(ratio, limit)})

    def cpu(r: dict) -> float:
        return r.get("cpu_s") or r["wall_s"]

    groups = sorted({d for d, st in rows if st == "floor"})
    for g in groups:
        floor, ingest, scan = (rows.get((g, st)) for st in ("floor", "ingest", "scan"))
        if not floor:
            continue
        f_cpu, f_wall = cpu(floor), floor["wall_s"]
        if ingest:
            add(f"{g}: ingest <= 2x floor", f"{cpu(ingest):.2f} / {f_cpu:.2f} CPU s",
                cpu(ingest) / f_cpu, 2.0, ingest["wall_s"] / f_wall)
        if ingest and scan:
            add(f"{g}: all rules <= 1x floor", f"{cpu(scan) - cpu(ingest):.2f} CPU s of rules",
                (cpu(scan) - cpu(ingest)) / f_cpu, 1.0,
                (scan["wall_s"] - ingest["wall_s"]) / f_wall)
        if scan:
            add(f"{g}: full scan <= 3x floor", f"{cpu(scan):.2f} / {f_cpu:.2f} CPU s",
                cpu(scan) / f_cpu, 3.0, scan["wall_s"] / f_wall)
    # linear cost: the same format at several session lengths
    lengths: dict[str, list[tuple[int, dict, dict]]] = defaultdict(list)
    files = result.get("files", {})
    for g in groups:
        if "/" not in g or (g, "scan") not in rows:
            continue
        name, fmt = g.split("/", 1)
        turns = rows[(g, "scan")]["raw"].get("turns") or 0
        lengths[fmt].append((turns, rows[(g, "scan")], files.get(g, {})))
    for fmt, runs in lengths.items():
        runs.sort(key=lambda t: t[0])
        if len(runs) < 2 or not runs[0][0]:
            continue
        n0, r0, _ = runs[0]
        per0 = cpu(r0) / n0 * 1e6
        for n1, r1, f1 in runs[1:]:  # every longer session against the shortest
            per1 = cpu(r1) / n1 * 1e6
            add(f"{fmt}: scan cost linear in session length ({n1:,} turns)",
                f"{per0:.0f} µs/turn at {n0:,} turns, {per1:.0f} at {n1:,}", per1 / per0, 1.25,
                (r1["wall_s"] / n1) / (r0["wall_s"] / n0))
            if f1.get("bytes"):
                mb = f1["bytes"] / 1e6
                add(f"{fmt}: peak memory a small fraction of the file ({n1:,} turns)",
                    f"{r1['peak_rss_mb']:.0f} MB for {mb:.0f} MB", r1["peak_rss_mb"] / mb, 0.5)
    archives = [d for d in result["datasets"] if (d, "scan CLI") in rows]
    if len(archives) >= 2:
        small, large = sorted(archives, key=lambda d: result["datasets"][d]["bytes"])[:2]
        for st in ("scan CLI", "read_incidents", "scan"):
            a, b = rows.get((small, st)), rows.get((large, st))
            if a and b and a.get("peak_rss_mb") and b.get("peak_rss_mb"):
                add(f"{st}: peak memory bounded by the largest session ({small} -> {large})",
                    f"{a['peak_rss_mb']:.0f} -> {b['peak_rss_mb']:.0f} MB",
                    b["peak_rss_mb"] / a["peak_rss_mb"], 1.15)
    for d in archives:
        b1 = rows.get((d, "batch -w1"))
        bn = next((r for (dd, st), r in rows.items() if dd == d and st.startswith("batch -w")
                   and st not in ("batch -w1",)), None)
        sc = rows.get((d, "scan CLI"))
        again = rows.get((d, "batch rerun -w1"))
        if b1 and bn:
            add(f"{d}: {bn['stage']} <= 0.6x batch -w1 (wall)",
                f"{bn['wall_s']:.1f} / {b1['wall_s']:.1f} s", bn["wall_s"] / b1["wall_s"], 0.6)
        if b1 and sc:
            add(f"{d}: batch -w1 <= 1.3x scan", f"{cpu(b1):.1f} / {cpu(sc):.1f} CPU s",
                cpu(b1) / cpu(sc), 1.3, b1["wall_s"] / sc["wall_s"])
        if b1 and again:
            add(f"{d}: rerun over unchanged sources < 5% of a full run",
                f"{cpu(again):.2f} / {cpu(b1):.1f} CPU s", cpu(again) / cpu(b1), 0.05,
                again["wall_s"] / b1["wall_s"])
    s = result.get("startup") or {}
    if s.get("python_s"):
        add("forensics --help <= 8x python -c pass", f"{s['help_s']:.3f} / {s['python_s']:.3f} s",
            s["help_s"] / s["python_s"], 8.0)
        add("scan of a small session <= 12x python -c pass",
            f"{s['scan_small_s']:.3f} / {s['python_s']:.3f} s", s["scan_small_s"] / s["python_s"],
            12.0)
    for name, check in result.get("planted", {}).items():
        planted = sum(c["planted"] for c in check.values())
        exact = sum(c["exact"] for c in check.values())
        found = sum(c["found"] for c in check.values())
        extra = sum(c["extra"] for c in check.values())
        rules = [r for r, c in check.items() if c["planted"]]
        ok = found == planted and exact == planted and extra == 0
        short = "; ".join(
            f"{r} {c['exact']}/{c['planted']} exact" + (f", {c['extra']} extra" if c["extra"]
                                                         else "")
            for r, c in check.items()
            if c["exact"] != c["planted"] or c["extra"])
        out.append({"target": f"{name}: planted incidents found, exact anchors, no extras",
                    "measured": f"{found}/{planted} found, {exact} exact, {extra} extra "
                                f"({len(rules)} rules planted)" + (f": {short}" if short else ""),
                    "ratio": None, "limit": None, "wall_ratio": None,
                    "verdict": "PASS" if ok else "MISS"})
    return out


def targets_table(items: list[dict]) -> str:
    lines = ["| target | measured | ratio (CPU) | wall ratio | limit | verdict |",
             "|---|---|---:|---:|---:|---|"]
    for t in items:
        ratio = f"{t['ratio']:.2f}" if t["ratio"] is not None else "–"
        wall = f"{t['wall_ratio']:.2f}" if t.get("wall_ratio") is not None else "–"
        limit = f"{t['limit']:g}" if t["limit"] is not None else "–"
        lines.append(f"| {t['target']} | {t['measured']} | {ratio} | {wall} | {limit} | "
                     f"{t['verdict']} |")
    return "\n".join(lines)


# --- output ------------------------------------------------------------------------------------

def table(result: dict) -> str:
    lines = ["| dataset | stage | wall s | CPU s | MB/s | turns/s | peak RSS MB | × floor |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        if "wall_s" not in r:
            lines.append(f"| {r['dataset']} | {r['stage']} | {' | '.join('–' * 5)} | "
                         f"{r['note']} |")
            continue
        ratio = f"{r['x_floor']:.2f}" if r["x_floor"] else "–"
        rss = f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] else "–"
        cpu = f"{r['cpu_s']:.2f}" if r.get("cpu_s") is not None else "–"
        lines.append(f"| {r['dataset']} | {r['stage']} | {r['wall_s']:.2f} | {cpu} | "
                     f"{r['mb_s']:.0f} | "
                     f"{r['turns_s']:,.0f} | {rss} | {ratio} |")
    return "\n".join(lines)


def linear_table(result: dict) -> str:
    """One row per format and session length (the docs' table): wall, CPU, peak memory, CPU
    per turn and its ratio to the shortest session of the same format."""
    rows = {(r["dataset"], r["stage"]): r for r in result["rows"] if "wall_s" in r}
    files = result.get("files", {})
    runs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for (g, st), r in rows.items():
        if st == "scan" and "/" in g and r["raw"].get("turns"):
            runs[g.split("/", 1)[1]].append((r["raw"]["turns"], g))
    lines = ["| format | turns | records | file MB | floor CPU s | ingest CPU s | ingest peak MB | "
             "scan wall s | scan CPU s | scan peak MB | scan µs/turn (CPU) | × shortest |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for fmt in FORMATS:
        base = None
        for turns, g in sorted(runs.get(fmt, [])):
            scan, floor, ingest = rows[(g, "scan")], rows.get((g, "floor")), rows.get((g, "ingest"))
            per = (scan.get("cpu_s") or scan["wall_s"]) / turns * 1e6
            base = base or per
            mb = files.get(g, {}).get("bytes", 0) / 1e6

            def num(r, key, fmt_=".2f"):
                return format(r[key], fmt_) if r and r.get(key) is not None else "–"

            records = (floor or {}).get("raw", {}).get("records")
            lines.append(f"| {fmt} | {turns:,} | {f'{records:,}' if records else '–'} | "
                         f"{mb:,.0f} | {num(floor, 'cpu_s')} | "
                         f"{num(ingest, 'cpu_s')} | {num(ingest, 'peak_rss_mb', ',.0f')} | "
                         f"{scan['wall_s']:.2f} | {num(scan, 'cpu_s')} | "
                         f"{num(scan, 'peak_rss_mb', ',.0f')} | {per:.0f} | {per / base:.2f} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def summary(result: dict) -> str:
    out = [table(result), ""]
    if result.get("plan") == "linear" and linear_table(result):
        out += ["one session per length:", linear_table(result), ""]
    ds = result["datasets"]
    out.append("datasets: " + "; ".join(
        f"{k}: {v['sessions']} sessions, {v['turns']:,} turns generated, "
        f"{v['bytes'] / 1e6:,.0f} MB "
        f"(largest file {v['largest_bytes'] / 1e6:.1f} MB)" for k, v in ds.items()))
    for label, spent in result.get("per_rule_s", {}).items():
        out.append(f"rules on {label}: " + ", ".join(
            f"{k} {v * 1000:.0f} ms" for k, v in spent.items()))
    s = result["startup"]
    mc = result["machine"]
    out.append(f"machine: {mc['cpu']}, {mc['cores']} cores, Python {mc['python']}, orjson "
               f"{mc['orjson']}, commit {mc['commit']}, load average "
               f"{mc.get('load_avg_1m_before', '?')} before / {mc['load_avg_1m']} after")
    if s:
        out.append(f"startup (best of 5, wall, bytecode compiled): forensics --help {s['help_s']:.3f} s; forensics scan "
                   f"<{s['small_file_bytes'] // 1000} KB session> {s['scan_small_s']:.3f} s; "
                   f"bare python {s['python_s']:.3f} s")
    rows = {(r["dataset"], r["stage"]): r for r in result["rows"] if "wall_s" in r}
    for name in ds:
        b1, bn = rows.get((name, "batch -w1")), None
        for (d, st), r in rows.items():
            if d == name and st.startswith("batch -w") and st != "batch -w1":
                bn = r
        if b1 and bn:
            out.append(f"batch speed-up on {name}: {b1['wall_s'] / bn['wall_s']:.2f}x "
                       f"({bn['stage'].split()[-1]}), peak RSS {b1['peak_rss_mb']:.0f} / "
                       f"{bn['peak_rss_mb']:.0f} MB per process")
    out.append("")
    out.append("targets (issue 17):")
    out.append(targets_table(result.get("targets") or targets(result)))
    out.append("")
    if not result["rules"]:
        out.append("planted-incident check: rules not available yet")
    for name in ds:
        if name not in result["planted"] and result["rules"] and name != "small":
            out.append(f"planted check {name}: not run (the scan stage did not finish)")
    for name, check in result["planted"].items():
        parts = []
        for rule, c in check.items():
            parts.append(f"{rule} {c['found']}/{c['planted']} found ({c['exact']} exact anchor), "
                         f"{c['extra']} extra")
        out.append(f"planted check {name}: " + "; ".join(parts))
        for rule, c in check.items():
            for miss in c["missed"]:
                out.append(f"    missed {rule}: {miss}")
            for ex in c.get("extra_examples", [])[:3]:
                out.append(f"    extra {rule}: {ex}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small data, about a minute")
    ap.add_argument("--data", type=Path, default=BENCH / "data", help="where generated data goes")
    ap.add_argument("--repeat", type=int, default=3,
                    help="best of N for the long-session stages (archives run once)")
    ap.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 2))
    ap.add_argument("--json", type=Path, help="also write every number to this file")
    ap.add_argument("--linear", nargs="?", const=",".join(map(str, LINEAR_TURNS)),
                    metavar="TURNS,...", help="instead: one session per format at each length "
                    f"(default {','.join(map(str, LINEAR_TURNS))}), floor, ingest and scan: "
                    "is the cost linear in session length")
    ap.add_argument("--format", choices=FORMATS, action="append", dest="formats",
                    help="with --linear: only this format (repeatable; default all three), "
                    "e.g. to measure 1M-record sessions one format at a time")
    ap.add_argument("--timeout", type=float, help="seconds before a stage is killed "
                    "(default 120 with --quick, else 600)")
    args = ap.parse_args(argv)
    global TIMEOUT
    TIMEOUT = args.timeout or (120.0 if args.quick else 600.0)
    plan = PLANS["quick" if args.quick else "full"]
    if args.linear:
        plan = {f"long-{n // 1000}k": (1, n, 0, "linear")
                for n in (int(x) for x in args.linear.split(","))}
        TIMEOUT = args.timeout or 3600.0
    prepare()
    load_before = os.getloadavg()[0]
    start = machine()
    formats = tuple(f for f in FORMATS if f in (args.formats or FORMATS))
    result = measure(plan, args.data, args.repeat, args.workers, formats)
    result["machine"]["load_avg_1m_before"] = round(load_before, 2)
    result["machine"]["date"] = start["date"]
    if start["commit"] != result["machine"]["commit"]:
        # Stages import the working tree as it is when they start: say when it moved.
        end = result["machine"]["commit"]
        result["machine"]["commit"] = f"{start['commit']} (at the end: {end})"

    result["plan"] = "linear" if args.linear else "quick" if args.quick else "full"
    result["targets"] = targets(result)
    print(summary(result))
    if args.json:
        args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
