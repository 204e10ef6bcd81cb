"""Every rule case, written as a real transcript, gives the same findings after the reader.

``tests/case_formats.py`` writes each case as a Claude Code JSONL, a Codex rollout and an
opencode export; the format's own reader reads it back and the case's rule runs on what it read.
The flagged case turns and their severities must be those of the in-memory case (whose marks
``test_rule_cases.py`` checks against docs/rules.md): a rule that works only on hand-built sessions,
or a reader that loses what a rule needs, fails here. Cases a format cannot express are skipped
with the reason.
"""

from __future__ import annotations

import tomllib

import pytest

from case_formats import FORMATS, render
from forensics.ingest import read_bytes
from forensics.model import ToolResultTurn
from forensics.rules import registry
from rulecases import CASES_DIR, build_case


def _raw_cases():
    out = []
    for path in sorted(CASES_DIR.glob("FX*.toml")):
        code = path.name.split("-", 1)[0]
        for raw in tomllib.loads(path.read_text(encoding="utf-8")).get("case", []):
            for fmt in FORMATS:
                out.append(pytest.param(code, raw, fmt, str(path),
                                        id=f"{code}-{raw['name']}-{fmt}"))
    return out


def _flagged_in_memory(code: str, raw: dict, source: str, fmt: str) -> set[tuple[int, str]]:
    case = build_case(code, raw, source=source)
    out = set()
    for f in registry()[code].run(case.session):
        turn = case.session.turn(f.turn)
        if fmt == "opencode-export" and isinstance(turn, ToolResultTurn):
            # opencode keeps a call and its result in one message: the result is the call's
            owner = case.session.call_for(turn)
            turn = owner[0] if owner else turn
        out.add((turn.ordinal, f.severity))
    return out


@pytest.mark.parametrize("code,raw,fmt,source", _raw_cases())
def test_case_in_real_format(code: str, raw: dict, fmt: str, source: str) -> None:
    rendered, why = render(raw, fmt)
    if rendered is None:
        pytest.skip(why)
    sessions = read_bytes(rendered.text.encode(), source=f"{raw['name']}.{fmt}", format=fmt)
    assert len(sessions) == 1
    session = sessions[0]
    assert not session.issues, [str(i) for i in session.issues]
    got = set()
    for f in registry()[code].run(session):
        assert f.anchor in rendered.anchors, f"{f.anchor} is no record of the file"
        got.add((rendered.anchors[f.anchor], f.severity))
    want = _flagged_in_memory(code, raw, source, fmt)
    assert got == want, f"{fmt}: flagged {sorted(got)}, in memory {sorted(want)}"
