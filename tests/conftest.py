"""Shared test helpers: where the fixtures and the (optional) shared corpus live."""

from __future__ import annotations

import gc
import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED = Path(os.environ.get("FORENSICS_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpus"
FORMAT_EXAMPLES = SHARED / "docs" / "format-examples"

# The compiled-pattern cache (forensics.knowledge_cache) of the test run, and of every
# CLI the tests start, is a temporary folder, never the user's ~/.cache.
os.environ.setdefault("FORENSICS_CACHE_DIR", tempfile.mkdtemp(prefix="forensics-test-cache-"))

needs_shared = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared (corpus and format examples) is not beside the repo"
)


@pytest.fixture
def young_heap():
    """Tests that call ``gc.collect()`` to see what a run still holds: the objects made before
    the test are frozen out of the collector, so each collection walks what the test made, not
    the whole suite's heap (tens of seconds per test late in a full run)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def corpus_files() -> list[Path]:
    """Every real session in the shared corpus (opencode, claude, codex), sorted."""
    if not CORPUS.is_dir():
        return []
    out: list[Path] = []
    for sub in ("opencode", "claude", "codex"):
        d = CORPUS / sub
        if d.is_dir():
            out.extend(sorted(p for p in d.iterdir() if p.is_file()))
    return out
