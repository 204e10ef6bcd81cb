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
    assert "session_id" in texts[3]
    assert "<table" in texts[4] and "incidents" in texts[4]  # ScanReport._repr_html_
    assert "case study: FX" in texts[-1]


def test_notebook_is_saved_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert os.fspath(NOTEBOOK).endswith(".ipynb")
