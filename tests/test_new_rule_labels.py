"""The new rules against their hand labels on the shared corpus (tests/fixtures/labels/).

Scoring as in the corpus labels' README: a finding of a labelled rule must match an incident
(same rule, one of its anchors), or it is a false positive; every high-confidence incident must
be found; a low-confidence one counts neither way. Skips without ../shared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, needs_shared
from forensics.ingest import load
from forensics.rules import registry

LABELS = sorted((FIXTURES / "labels").glob("*/labels.json"))
BY_SLUG = {s.slug: s for s in registry().values()}


def test_every_corpus_session_is_labelled() -> None:
    assert len(LABELS) >= 43
    for path in LABELS:
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert doc["input"].startswith("../../../../../shared/corpus/"), path.parent.name
        assert set(doc["rules"]) <= set(BY_SLUG)


@needs_shared
@pytest.mark.parametrize("path", LABELS, ids=lambda p: p.parent.name[:60])
def test_findings_match_the_labels(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for session in load(path.parent / doc["input"]):
        for slug in doc["rules"]:
            found.extend((slug, f.anchor) for f in BY_SLUG[slug].run(session))
    incidents = doc["incidents"]
    unmatched = [f for f in found
                 if not any(i["rule"] == f[0] and f[1] in i["anchors"] for i in incidents)]
    assert unmatched == [], f"false positives against {path.parent.name}"
    missed = [i for i in incidents if i.get("confidence", "high") == "high"
              and not any(f[0] == i["rule"] and f[1] in i["anchors"] for f in found)]
    assert missed == [], f"missed labelled incidents in {path.parent.name}"
    traps = [t for t in doc["traps"] if any(f[0] == t["rule"] and f[1] in t["anchors"]
                                            for f in found)]
    assert traps == [], f"a trap is flagged in {path.parent.name}"
