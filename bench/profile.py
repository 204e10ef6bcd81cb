"""Profile one benchmark stage with pyinstrument and print where the time goes.

    pip install pyinstrument        # a profiling tool, not a dependency of forensics
    python bench/profile.py scan bench/data/long-10k/codex
    python bench/profile.py ingest bench/data/archive-1k --min-share 0.05

Runs the same stage functions as ``bench/stages.py`` (imports and the rule registry loaded
first, as there) on every session file under the given paths, then prints the call tree cut at
``--min-share`` of the total, so the hot paths are what remains.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stages  # noqa: E402


def session_files(paths: list[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p.is_dir():
            out.extend(str(f) for f in sorted(p.rglob("*"))
                       if f.suffix in (".json", ".jsonl") and f.name not in (
                           "planted.json", "params.json"))
        else:
            out.append(str(p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=("floor", "ingest", "scan", "rules"))
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--min-share", type=float, default=0.02,
                    help="hide frames below this share of the total time")
    args = ap.parse_args()
    try:
        from pyinstrument import Profiler
    except ImportError:
        raise SystemExit("pyinstrument is not installed: pip install pyinstrument")
    files = session_files(args.paths)
    import forensics.engine  # noqa: F401
    from forensics.config import Config

    Config().rules()
    run = {"floor": stages.floor, "ingest": stages.ingest, "scan": stages.scan,
           "rules": stages.per_rule}[args.stage]
    profiler = Profiler(interval=0.0005)
    profiler.start()
    run(files)
    session = profiler.stop()
    total = session.duration or 1e-9
    print(f"{args.stage} on {len(files)} files: {total:.2f} s")
    print(profiler.output_text(unicode=True, color=False, show_all=False,
                               processor_options={"filter_threshold": args.min_share}))


if __name__ == "__main__":
    main()
