"""One benchmark stage, run in a fresh process so stages never share memory or warm caches.

``bench/run.py`` starts ``python bench/stages.py STAGE FILELIST`` once per measurement and
reads one JSON object from stdout: wall seconds of the work (imports excluded; startup is
measured on its own), bytes and records or turns seen, and peak RSS (``VmHWM``) before and after
the work. Stages build on each other, so each one's cost includes the ones before it:

* ``floor``: read every byte and ``orjson.loads`` every record (a JSONL line, or the whole
  document for a JSON export). Nothing else: the cost of reading the input at all.
* ``ingest``: ``forensics.ingest.iter_sessions`` on each file, to typed turns.
* ``scan``: ingest plus every rule (``forensics.engine.scan_session``); also writes the
  incidents, so the run can check them against the planted ones.
* ``report``: scan plus rendering each result as Markdown (``forensics.report``);
  ``render_s`` is the rendering alone.
* ``rules``: CPU seconds per rule on the ingested sessions, to see where a scan's time goes.
* ``notebook``: ``forensics.read_incidents`` on the files (the notebook's incident table, one
  process): its peak memory must follow the largest session, not the input.

A stage whose module does not exist yet prints ``{"skipped": "<why>"}``.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import orjson


def peak_rss_mb() -> float:
    """Peak resident set of this process so far (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """User plus system CPU seconds of this process."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def floor(files: list[str]) -> dict:
    nbytes = records = 0
    loads = orjson.loads
    for f in files:
        with open(f, "rb") as fh:
            if f.endswith(".jsonl"):
                for line in fh:
                    nbytes += len(line)
                    if line.strip():
                        loads(line)
                        records += 1
            else:
                data = fh.read()
                nbytes += len(data)
                loads(data)
                records += 1
                del data
    return {"bytes": nbytes, "records": records}


def ingest(files: list[str]) -> dict:
    from forensics.ingest import iter_sessions

    sessions = turns = 0
    for f in files:
        for s in iter_sessions(f):
            sessions += 1
            turns += len(s.turns)
    return {"sessions": sessions, "turns": turns}


def scan(files: list[str], incidents_out: str | None = None, render=None) -> dict:
    from forensics.engine import scan_session
    from forensics.ingest import iter_sessions

    sessions = turns = crashes = incidents = 0
    render_s = 0.0
    rendered = 0
    # Incidents stream to a file (one JSON line each): holding them would add memory that
    # grows with the archive and is not the scanner's.
    sink = open(incidents_out, "wb") if incidents_out else None
    for f in files:
        for s in iter_sessions(f):
            sessions += 1
            turns += len(s.turns)
            result = scan_session(s)
            crashes += len(result.crashes)
            incidents += len(result.incidents)
            if sink:
                sink.write(b"".join(orjson.dumps(
                    {"session_id": i.session_id, "rule": i.rule, "code": i.code,
                     "anchor": i.anchor, "source": i.source}) + b"\n"
                    for i in result.incidents))
            if render is not None:
                t = time.perf_counter()
                rendered += len(render(result))
                render_s += time.perf_counter() - t
            # As ``forensics scan`` does: a session and its result go before the next is read
            # (kept, the peak would be two sessions, the harness's, not the scanner's).
            del s, result
    if sink:
        sink.close()
    out = {"sessions": sessions, "turns": turns, "incidents": incidents, "crashes": crashes}
    if render is not None:
        out |= {"render_s": render_s, "rendered_chars": rendered}
    return out


def per_rule(files: list[str]) -> dict:
    """Seconds each rule spends on the sessions (ingest excluded): where a scan's time goes."""
    from forensics.config import Config
    from forensics.ingest import iter_sessions

    config = Config()
    spent: dict[str, float] = {}
    turns = 0
    for f in files:
        for s in iter_sessions(f):
            turns += len(s.turns)
            for spec in config.rules():
                t = time.process_time()  # CPU: other jobs on a shared machine do not count
                for _ in spec.run(s, config.params_for(spec)):
                    pass
                key = f"{spec.code} {spec.slug}"
                spent[key] = spent.get(key, 0.0) + time.process_time() - t
    return {"turns": turns, "rules_s": spent}


def notebook(files: list[str]) -> dict:
    from forensics import read_incidents

    return {"incidents": read_incidents(files).height}


def renderer():
    """The report renderer, whichever shape it has today; None when there is none yet."""
    try:
        import forensics.report as report
    except ImportError:
        return None, "forensics.report does not exist yet"
    fn = getattr(report, "render_session", None)
    if callable(fn):
        return (lambda result: fn(result, fmt="markdown")), "forensics.report.render_session"
    fn = getattr(report, "render_markdown", None)
    if callable(fn):
        return fn, "forensics.report.render_markdown"
    return None, "no Markdown renderer in forensics.report yet"


def main() -> None:
    stage, filelist = sys.argv[1], sys.argv[2]
    incidents_out = sys.argv[3] if len(sys.argv) > 3 else None
    files = [f for f in Path(filelist).read_text().splitlines() if f]
    render = None
    try:
        if stage in ("ingest", "scan", "report"):
            import forensics.ingest  # noqa: F401
        if stage == "notebook":
            import forensics.batch  # noqa: F401
            import polars  # noqa: F401
        if stage in ("scan", "report", "rules"):
            import forensics.engine  # noqa: F401
            from forensics.config import Config

            Config().rules()  # rule registry: a one-time cost, measured with the startup
        if stage == "report":
            render, how = renderer()
            if render is None:
                print(orjson.dumps({"skipped": how}).decode())
                return
    except ImportError as exc:
        print(orjson.dumps({"skipped": f"not available yet: {exc}"}).decode())
        return
    rss_before = peak_rss_mb()
    gc.collect()
    cpu = cpu_s()
    t = time.perf_counter()
    if stage == "floor":
        out = floor(files)
    elif stage == "ingest":
        out = ingest(files)
    elif stage == "scan":
        out = scan(files, incidents_out)
    elif stage == "report":
        out = scan(files, None, render) | {"renderer": how}
    elif stage == "rules":
        out = per_rule(files)
    elif stage == "notebook":
        out = notebook(files)
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    out["wall_s"] = time.perf_counter() - t
    out["cpu_s"] = cpu_s() - cpu
    out["rss_before_mb"] = rss_before
    out["peak_rss_mb"] = peak_rss_mb()
    print(orjson.dumps(out).decode())


if __name__ == "__main__":
    main()
