"""The example notebook runs top to bottom in a real Jupyter kernel and shows real results."""

from __future__ import annotations

import os

import pytest
from conftest import REPO

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = REPO / "docs" / "triage.ipynb"


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
            out.append(o["data"].get("text/html", ""))
            out.append(o["data"].get("text/markdown", ""))
    return "".join(out)


def test_triage_notebook_executes(monkeypatch):
    monkeypatch.delenv("FORENSICS_TRIAGE", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO / "docs")}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    texts = [_text(c) for c in code]
    assert "sessions.zip" in texts[0]
    assert " incidents in " in texts[1]
    assert "FX001" in texts[2] and "empty-response" in texts[2]
    assert "interrupted-turn" in texts[3] and "week" in texts[3]  # harness_counts
    assert "session_id" in texts[4]
    assert "<table" in texts[5] and "incidents" in texts[5]  # ScanReport._repr_html_
    assert "case study: FX" in texts[-1]


def test_notebook_is_saved_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert os.fspath(NOTEBOOK).endswith(".ipynb")


# -- the API the notebook uses ---------------------------------------------------------------------

import polars as pl  # noqa: E402
from conftest import FIXTURES  # noqa: E402

import forensics  # noqa: E402
import forensics.notebook  # noqa: E402,F401  (registers the Session HTML view)
from forensics.frame import INCIDENT_COLUMNS, SESSION_COLUMNS, TURN_COLUMNS, schema  # noqa: E402
from forensics.model import AssistantTurn, Session, UserTurn  # noqa: E402

INGEST = FIXTURES / "ingest"


def _zip_of(folder, dest):
    import zipfile

    with zipfile.ZipFile(dest, "w") as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(folder).as_posix())
    return dest


def test_scan_gives_frames_with_the_documented_schema():
    report = forensics.scan(INGEST)
    assert report.incidents.schema == pl.Schema(schema(INCIDENT_COLUMNS))
    assert report.sessions.schema == pl.Schema(schema(SESSION_COLUMNS))
    assert report.turns.schema == pl.Schema(schema(TURN_COLUMNS))
    assert report.sessions.height == len(report.results)
    assert report.turns.height == sum(len(r.session.turns) for r in report.results)
    assert report.incidents.height == sum(len(r.incidents) for r in report.results) > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_read_incidents_is_the_scans_incident_table_in_its_order(workers):
    """``read_incidents`` holds each unit's rows as tuples as soon as the unit is done: the
    frame is still every incident the scan finds, sorted by origin, session, turn and code."""
    got = forensics.read_incidents(INGEST, workers=workers)
    scanned = forensics.scan(INGEST).incidents
    assert got.height == scanned.height > 5
    assert got.schema == pl.Schema(schema(INCIDENT_COLUMNS))
    assert got.equals(scanned.sort(["origin", "session_id", "turn", "code"],
                                   maintain_order=True))


def test_archive_and_folder_agree(tmp_path):
    archive = _zip_of(INGEST, tmp_path / "ingest.zip")
    from_folder = forensics.read_incidents(INGEST)
    from_archive = forensics.read_incidents([archive], workers=2)
    strip = [pl.col(c).str.replace(r"^.*?(ingest/|ingest\.zip!)", "") for c in ("source", "origin")]
    assert from_archive.with_columns(strip).equals(from_folder.with_columns(strip))
    assert len(forensics.load(archive)) == len(forensics.scan(INGEST).results)
    turns = forensics.read_turns(archive)
    assert turns.schema == pl.Schema(schema(TURN_COLUMNS))
    assert turns.height == forensics.scan(INGEST).turns.height


def test_scan_opens_an_archive_member_by_its_origin(tmp_path):
    archive = _zip_of(INGEST, tmp_path / "ingest.zip")
    incidents = forensics.read_incidents(archive)
    origin = incidents["origin"][0]
    assert "!" in origin
    one = forensics.scan(origin)
    assert {r.session.id for r in one.results} >= {incidents["session_id"][0]}
    missing = forensics.scan(f"{archive}!nope.jsonl")
    assert missing.results == [] and missing.errors[0]["reason"].startswith("no session source")


def test_options_are_keyword_only_and_select_narrows():
    with pytest.raises(TypeError):
        forensics.scan(INGEST, None)  # type: ignore[misc]
    only = forensics.scan(INGEST, select="FX001")
    assert set(only.incidents["code"]) == {"FX001"}
    assert "FX001" not in set(forensics.scan(INGEST, ignore=["FX001"]).incidents["code"])


def test_html_previews_are_compact_and_escaped():
    s = Session(id="s<1>", agent="codex", format="codex", source="x.jsonl", turns=[
        UserTurn(ordinal=1, anchor="L1", text="<script>alert(1)</script>"),
        AssistantTurn(ordinal=2, anchor="L2", text=""),
    ])
    html = s._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "s&lt;1&gt;" in html and html.count("<tr>") >= 3
    report = forensics.scan(INGEST)
    page = report._repr_html_()
    assert "<table" in page and f"<b>{len(report.results)}</b> sessions" in page
    assert page.count('class="fx-') >= min(20, report.incidents.height)
