"""docs/accuracy.md states what `forensics eval` computes now on the development labels.

A detection change that moves a figure fails here until the page is regenerated on purpose
(`python bench/accuracy.py`) and the diff reviewed, like the golden files. No accuracy
threshold is asserted: the page reports, it does not gate.
"""

from __future__ import annotations

import sys

from conftest import CORPUS, REPO, needs_shared

sys.path.insert(0, str(REPO / "bench"))
import accuracy  # noqa: E402


def _measured(text: str) -> str:
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith(accuracy.COMMIT_PREFIX))


@needs_shared
def test_committed_accuracy_page_matches_eval_now():
    committed = (REPO / "docs" / "accuracy.md").read_text(encoding="utf-8")
    now = accuracy.page(CORPUS / "labels")
    assert _measured(committed) == _measured(now), (
        "docs/accuracy.md is stale: run `python bench/accuracy.py` and review the diff")
    assert accuracy.COMMIT_PREFIX in committed
