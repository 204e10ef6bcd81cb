"""The HTML pages measured in a real headless Chromium at 1280 px and 400 px: no label box
clipped by its figure, no two axis labels or marks overlapping, no table wider than the
viewport, no console error. Screenshots go to ``FORENSICS_SCREENSHOT_DIR`` (or the test's
temporary folder) for a person to look at.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from browser import find_chromium, inspect
from conftest import FIXTURES
from forensics import report
from forensics.engine import ScanResult, scan_sessions
from forensics.findings import Incident
from forensics.ingest import load
from forensics.model import AssistantTurn, Session, UserTurn
from forensics.charts import bar_chart, column_chart

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")

WIDTHS = (1280, 400)

GEOMETRY = r"""
(() => {
  const vw = document.documentElement.clientWidth;
  const problems = [];
  const box = e => e.getBoundingClientRect();
  const meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
                          a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const name = e => (e.getAttribute('class') || e.tagName) + ' "' +
                    (e.lastChild ? e.lastChild.textContent : '') + '"';
  let svgs = 0, labels = 0, marks = 0;
  for (const svg of document.querySelectorAll('svg')) {
    const frame = box(svg);
    if (frame.width === 0) continue;
    svgs++;
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim());
    for (const t of texts) {
      const b = box(t);
      labels++;
      if (b.left < frame.left - 1 || b.right > frame.right + 1 ||
          b.top < frame.top - 1 || b.bottom > frame.bottom + 1)
        problems.push('label clipped by its figure: ' + name(t));
    }
    const axis = texts.filter(t => t.matches('.axis, .order-label, .label, .row-label'));
    for (let i = 0; i < axis.length; i++)
      for (let j = i + 1; j < axis.length; j++)
        if (meets(box(axis[i]), box(axis[j])))
          problems.push('labels overlap: ' + name(axis[i]) + ' / ' + name(axis[j]));
    const dots = [...svg.querySelectorAll('circle.incident-mark, circle.order-mark')];
    marks += dots.length;
    for (let i = 0; i < dots.length; i++)
      for (let j = i + 1; j < dots.length; j++)
        if (meets(box(dots[i]), box(dots[j])))
          problems.push('marks overlap: ' + dots[i].textContent + ' / ' + dots[j].textContent);
  }
  const tables = document.querySelectorAll('table');
  for (const t of tables) {
    const b = box(t);
    if (b.right > vw + 1) problems.push('table wider than the viewport: ' +
                                        Math.round(b.right) + ' > ' + vw);
  }
  return {problems, svgs, labels, marks, tables: tables.length, width: vw};
})()
"""


def _shots() -> Path | None:
    folder = os.environ.get("FORENSICS_SCREENSHOT_DIR")
    return Path(folder) if folder else None


def _check(page: Path, tmp_path: Path, name: str) -> list[dict]:
    found = []
    for width in WIDTHS:
        seen = inspect(page, width=width, script=GEOMETRY, screenshot=True)
        folder = _shots() or tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / f"{name}-{width}.png"
        shot.write_bytes(seen.screenshot or b"")
        assert seen.screenshot and seen.screenshot[:8] == b"\x89PNG\r\n\x1a\n"
        assert seen.errors == [], (name, width, seen.errors)
        value = seen.value
        assert value["width"] <= width
        assert value["problems"] == [], (name, width, value["problems"][:8])
        found.append(value)
    return found


@pytest.fixture(scope="module")
def seed_pages(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seed")
    report.write_reports(scan_sessions(load(FIXTURES / "seeds" / "seed_000_duplicate_launch.json")),
                         out)
    return next(out.iterdir())


def test_session_page_geometry(seed_pages: Path, tmp_path: Path) -> None:
    (at_1280, _at_400) = _check(seed_pages / "index.html", tmp_path, "seed000-session")
    assert at_1280["marks"] >= 3 + 3  # the timeline's incidents and the order strips' marks
    assert at_1280["svgs"] >= 4 and at_1280["tables"] >= 4


def test_case_page_geometry(seed_pages: Path, tmp_path: Path) -> None:
    page = next(seed_pages.glob("FX002-*.html"))
    html = page.read_text(encoding="utf-8")
    assert 'href="index.html"' in html  # back to the session page
    assert 'title="msg_ccd055476001EThMd3R3q7S5oV"' in html  # full anchor on hover
    assert "**" not in html
    (at_1280, _) = _check(page, tmp_path, "seed000-FX002")
    assert at_1280["marks"] >= 8  # the order of events around the relaunch


def _crowded() -> ScanResult:
    """Eight incidents within a few seconds of a two-day session: marks that would sit on the
    same pixels of a time-proportional axis."""
    turns = []
    for i in range(1, 2001):
        t = 1_700_000_000 + (i * 90 if i < 1990 else 1990 * 90 + i)
        turns.append(UserTurn(ordinal=i, anchor=f"u{i}", text="hi", time=t) if i % 2 else
                     AssistantTurn(ordinal=i, anchor=f"a{i}", text="" if i > 1990 else "ok",
                                   time=t))
    session = Session(id="crowded", agent="opencode", format="case", source="crowded.json",
                      turns=turns)
    incidents = [Incident(rule="empty-response", code="FX001", title="Assistant replied with nothing",
                          severity="high", severity_reason="test", session_id="crowded",
                          source="crowded.json", agent="opencode", turn=o, anchor=f"a{o}",
                          evidence=[], evidence_turns=[], message="An empty reply.",
                          fingerprint=f"{o:016d}") for o in range(1992, 2001, 2)]
    incidents.append(replace(incidents[0], code="FX101", rule="interrupted-turn",
                             fingerprint="f" * 16))
    return ScanResult(session=session, incidents=incidents)


def test_crowded_timeline_marks_do_not_overlap(tmp_path: Path) -> None:
    page = tmp_path / "crowded.html"
    page.write_text(report.render_session(_crowded(), fmt="html"), encoding="utf-8")
    (at_1280, _) = _check(page, tmp_path, "crowded-session")
    assert at_1280["marks"] >= 6


def test_batch_charts_geometry(tmp_path: Path) -> None:
    """Long project labels, CJK labels, forty weeks and rows with zero incidents."""
    projects = [("/home/someone/projects/a-rather-long-client-name/services/backend-api", 12),
                ("C:\\Users\\22967\\Documents\\游戏开发\\轻量策略游戏引擎选择", 7),
                ("WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW", 3), ("quiet-project", 0)]
    weeks = [(f"2026-W{n:02d}", n % 5) for n in range(1, 41)]
    rules = bar_chart(projects, title="Incidents per project")
    assert "quiet-project" not in rules  # zero rows are not drawn
    page = tmp_path / "charts.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><meta name='viewport' "
                    "content='width=device-width, initial-scale=1'><style>svg{max-width:100%;"
                    "height:auto;display:block}</style></head><body>" + rules +
                    column_chart(weeks, title="Incidents per week") +
                    column_chart(weeks[:12], title="Twelve weeks") + "</body></html>",
                    encoding="utf-8")
    (at_1280, _) = _check(page, tmp_path, "charts")
    assert at_1280["labels"] >= 3 + 5


def test_batch_index_geometry(tmp_path: Path) -> None:
    from forensics.batch import run_batch

    out = tmp_path / "batch"
    run_batch([FIXTURES / "seeds", FIXTURES / "ingest"], out, workers=1, progress=False)
    _check(out / "index.html", tmp_path, "batch-index")
    case = next((out / "cases").rglob("FX002-*.html"))
    html = case.read_text(encoding="utf-8")
    assert 'href="../../../index.html"' in html  # back to the batch index
    _check(case, tmp_path, "batch-case")
