"""Write docs/accuracy.md: `forensics eval` on the development labels of ../shared/corpus.

    python bench/accuracy.py            # regenerate, then review `git diff docs/accuracy.md`

The page states the commit it was measured at; tests/test_accuracy_doc.py checks that the
committed tables equal what eval computes now (everything but the commit line).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LABELS = REPO.parent / "shared" / "corpus" / "labels"
DOC = REPO / "docs" / "accuracy.md"
COMMIT_PREFIX = "Measured at commit "


def tables(labels: Path = LABELS) -> str:
    """The measured part of the page: both tables, the misses and false alarms by rule."""
    from forensics import evaluation

    files = evaluation.load_labels([labels])
    parts = []
    for include_low, title in ((False, "Low-confidence incidents optional (the default)"),
                               (True, "Low-confidence incidents counted (`--include-low`)")):
        ev = evaluation.evaluate(files, include_low=include_low)
        parts.append(f"### {title}\n\n{evaluation.render_markdown_table(ev)}")
        if not include_low:
            lines = [f"* {m.rule}: missed `{m.anchor}` in `{m.case}`" for m in ev.misses]
            lines += [f"* {f.rule}: false alarm `{f.anchor}` in `{f.case}`"
                      + (" (a labelled trap)" if f.trap else "") for f in ev.false_alarms]
            if lines:
                parts.append("What the default table counts against the rules (run the "
                             "command for the labeller's notes and the findings' messages):\n\n"
                             + "\n".join(lines) + "\n")
    return "\n".join(parts)


def commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "forensics", "rules"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (" with uncommitted changes to forensics/ or rules/" if dirty else "")


HEAD = """# Accuracy on the development labels

`forensics eval` matches the findings of the current rules against hand labels of the 40 real
sessions in `../shared/corpus` (`../shared/corpus/labels/`, four core rules). Regenerate with
`python bench/accuracy.py` and review the diff; the same figures come from

```sh
forensics eval ../shared/corpus/labels            # add --include-low, --format json
```

**Read these figures with care.** The labels were visible while the rules were written and
tuned, so they flatter the rules: they are a development set that shows misses, not an
independent measure. The figures that decide come from labelled sessions the project never sees.
Incidents marked low-confidence by the labeller are optional by default (matching one counts
neither way, missing one is no miss). FP/10 is false alarms per 10 labelled sessions.

## Measure on your own sessions

Start a label file from a session's findings, review it, then measure any rule or config change:

```sh
forensics label session.jsonl -o mylabels/case-1/labels.json   # findings as candidates
forensics eval mylabels/ --min-f1 0.8 --max-fp-per-10 1        # exit 1 when a gate fails
```

A `labels.json` (the format of `../shared/corpus/labels/README.md`):

```json
{"case": "case-1", "input": "../../session.jsonl", "format": "claude-code",
 "rules": ["empty-response", "duplicate-launch", "ignored-tool-error", "user-resend"],
 "incidents": [{"rule": "ignored-tool-error", "anchors": ["<uuid of tool_use>", "<uuid of result>"],
                "severity": "high", "confidence": "high", "note": "what happened"}],
 "traps": [{"rule": "ignored-tool-error", "anchors": ["<uuid>"], "note": "why it is not one"}]}
```

* `input` is relative to the label file's folder; `rules` names what the labeller looked for: a
  rule not named is not measured by that file, and a rule no file names shows as "not measured".
* A finding matches an incident of its rule when its anchor is any of the incident's `anchors`;
  each finding matches at most one incident and each incident one finding. An unmatched finding
  is a false alarm (the trap it fell into is named). `"confidence": "low"` incidents are optional
  unless `--include-low`.
* Review `forensics label`'s candidates: keep a real incident (drop the `UNREVIEWED` note, add
  the other anchors of the same call or message), move a wrong one to `traps`, add what the rules
  missed. `--min-f1` and `--max-fp-per-10` apply to each measured rule and to all rules together.

## The development set

"""


def page(labels: Path = LABELS) -> str:
    return HEAD + f"{COMMIT_PREFIX}{commit()}.\n\n" + tables(labels)


if __name__ == "__main__":
    if not LABELS.is_dir():
        sys.exit(f"{LABELS}: not found (../shared must be beside the repo)")
    DOC.write_text(page(), encoding="utf-8")
    print(f"wrote {DOC}")
