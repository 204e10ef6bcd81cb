"""Does reading a huge Claude Code transcript cost memory per turn kept, or per byte read?

Builds a large JSONL (default ~1 GB, in /tmp, never in the repo) by repeating the lines of
``tests/fixtures/ingest/claude_basic.jsonl`` with fresh uuids, message ids and tool ids, each
tool result padded to ``--output-kb`` of build-log noise (long outputs are what make real
transcripts big). Then, each in a fresh process, it loads

* ``big``: that file, and
* ``small``: the same number of repetitions without the padding (same turns, few bytes),

and prints file size, turns, peak RSS (``VmHWM``) and wall time. If the readers stream and clip
outputs to head + tail (``forensics.ingest._text.clip``), both peaks are close and far below the
big file's size: memory follows the turns kept, not the file.

    python bench/claude_memory.py                 # ~1 GB, 256 KB per tool output
    python bench/claude_memory.py --size-mb 200   # quicker
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "ingest" / "claude_basic.jsonl"
ID_PATTERN = re.compile(rb"0a1b2c3d-0000-4000-8000-\d{12}|msg_01[A-Za-z0-9]+|toolu_01[A-Za-z0-9]+")

CHILD = r"""
import sys, time
from forensics.ingest import load

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
before = hwm()
t0 = time.perf_counter()
sessions = load(sys.argv[1])
took = time.perf_counter() - t0
turns = sum(len(s.turns) for s in sessions)
longest = max((len(getattr(t, "output", "")) for s in sessions for t in s.turns), default=0)
print(f"{before:.1f} {hwm():.1f} {took:.2f} {turns} {longest}")
"""


def templates(output_kb: int) -> list[bytes]:
    """Fixture lines, with every tool result's output padded to ``output_kb`` KB."""
    filler_line = "   [build] compiling module src/components/checkout/CartSummary.tsx ... ok\n"
    filler = filler_line * (output_kb * 1024 // len(filler_line) + 1)
    out = []
    for raw in FIXTURE.read_bytes().splitlines():
        rec = orjson.loads(raw)
        content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
        if output_kb and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                    block["content"] = block["content"] + "\n" + filler[: output_kb * 1024]
                    if isinstance(rec.get("toolUseResult"), dict):
                        rec["toolUseResult"]["stdout"] = block["content"]
        out.append(orjson.dumps(rec))
    return out


def build(path: Path, reps: int, output_kb: int) -> int:
    lines = templates(output_kb)
    with open(path, "wb") as fh:
        for rep in range(reps):
            suffix = b"-%d" % rep

            def fresh(match: re.Match, suffix: bytes = suffix) -> bytes:
                return match.group(0) + suffix

            for line in lines:
                fh.write(ID_PATTERN.sub(fresh, line))
                fh.write(b"\n")
    return path.stat().st_size


def measure(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                          text=True, env=env, check=True)
    before, peak, took, turns, longest = done.stdout.split()
    return {"rss_before_mb": float(before), "peak_rss_mb": float(peak), "load_s": float(took),
            "turns": int(turns), "longest_output": int(longest)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--output-kb", type=int, default=256)
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="forensics-bench-", dir="/tmp"))
    per_rep = sum(len(line) + 1 for line in templates(args.output_kb))
    reps = max(1, args.size_mb * 1024 * 1024 // per_rep)
    big, small = workdir / "claude-big.jsonl", workdir / "claude-small.jsonl"
    t0 = time.perf_counter()
    big_bytes = build(big, reps, args.output_kb)
    small_bytes = build(small, reps, 0)
    print(f"generated {reps} repetitions in {time.perf_counter() - t0:.1f}s under {workdir}")
    try:
        for label, path, size in (("big", big, big_bytes), ("small", small, small_bytes)):
            m = measure(path)
            grown = m["peak_rss_mb"] - m["rss_before_mb"]
            print(f"{label:5}  file {size / 2**20:8.1f} MB  turns {m['turns']:8d}  "
                  f"peak RSS {m['peak_rss_mb']:7.1f} MB (+{grown:.1f} MB over imports)  "
                  f"RSS/file {m['peak_rss_mb'] / (size / 2**20):.3f}  "
                  f"{grown * 1024 / max(m['turns'], 1):.2f} KB/turn  "
                  f"longest output kept {m['longest_output']} chars  load {m['load_s']:.1f}s")
    finally:
        if not args.keep:
            for p in (big, small):
                p.unlink(missing_ok=True)
            workdir.rmdir()


if __name__ == "__main__":
    main()
