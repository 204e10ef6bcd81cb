"""The story parts of case studies: readings, explanations, translations, lessons, cost, and the
repetition measure that keeps them from reading like a form (issue 15)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import CORPUS, needs_shared
from forensics import report
from forensics.engine import scan_sessions
from forensics.ingest import load
from forensics.report import repetition
from forensics.report.narrative import figures_in
from forensics.report.readings import gloss

REPO = Path(__file__).resolve().parents[1]
SEED_000 = REPO / "tests" / "fixtures" / "seeds" / "seed_000_duplicate_launch.json"
SEED_001 = REPO / "tests" / "fixtures" / "seeds" / "seed_001_empty_resend.json"


def _studies(path: Path):
    out = []
    for result in scan_sessions(load(path)):
        out += [(result, cs) for cs in report.case_studies(result)]
    return out


def _text(sentences) -> str:
    return " ".join("".join(p.text for p in s) for s in sentences)


def test_shape_masks_quotes_numbers_ids_paths_urls() -> None:
    line = ('At **turn 40** the assistant ran `npm run dev` in /home/u/app/web, saw “Killed” '
            'at https://x.io/a?b=1 for msg_ccd055476001EThMd3R3q7S5oV after 2.5 seconds.')
    assert repetition.shape(line) == ("At turn ⟨n⟩ the assistant ran ⟨q⟩ in ⟨path⟩ , saw ⟨q⟩ "
                                      "at ⟨url⟩ for ⟨id⟩ after ⟨n⟩ seconds.")
    assert repetition.words(repetition.shape(line)) == 11


def test_prose_lines_skip_code_tables_headings_quotes() -> None:
    doc = "# Title\n\nA line.\n\n| a | b |\n|---|---|\n\n```sh\nnot prose\n```\n> quoted\n* item one\n---\n"
    assert repetition.prose_lines(doc) == ["A line.", "item one"]


def test_repetition_counts_shapes_in_three_documents() -> None:
    same = "The reply at turn {} failed."
    docs = [f"{same.format(i)}\n\nUnique words number {w}." for i, w in
            enumerate(["one", "two", "three"])]
    r = repetition.measure(docs)
    # "The reply at turn ⟨n⟩ failed." (5 words) recurs in 3; the others are unique (4 words).
    assert (r.recurring_words, r.prose_words) == (15, 27)
    assert repetition.measure(docs[:2]).recurring_words == 0


def test_fixture_case_studies_stay_under_40_percent(tmp_path: Path) -> None:
    """The report cases and seeds of this repository, written by ``forensics report``."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_report import RESULTS

    report.write_reports(list(RESULTS.values()), tmp_path / "cases")
    for seed in (SEED_000, SEED_001):
        report.write_reports(scan_sessions(load(seed)), tmp_path / seed.stem)
    r = repetition.measure_folder(tmp_path)
    assert r.documents >= 15
    assert r.share < 0.40, r.top[:5]


@needs_shared
def test_corpus_case_studies_stay_under_40_percent(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app

    res = CliRunner().invoke(app, ["report", str(CORPUS), "-o", str(tmp_path)])
    assert res.exit_code in (0, 1), res.output
    r = repetition.measure_folder(tmp_path)
    assert r.documents >= 10
    assert r.share < 0.40, r.top[:5]


def test_seed_000_reads_the_evidence() -> None:
    studies = {cs.incident.code: cs for _, cs in _studies(SEED_000)}
    dup = studies["FX002"]
    assert {"port_held", "user_status_before", "no_check_between", "checked_after"} <= \
        set(dup.signals)
    shows = _text(dup.shows)
    assert "Port 30000 was held by the launch at turn 36" in shows
    assert "came back “HTTP 200”" not in shows and "came back HTTP 200" in shows
    assert _text(dup.lesson).startswith("Check the health endpoint on port 30000 before "
                                        "launching again")
    assert "turn 44" in _text(dup.lesson)
    why = _text(dup.explanations)
    assert "A misread user message: Ready. at turn 39" in why
    assert dup.cost.start.ordinal == 40 and dup.cost.end.ordinal == 48 and dup.cost.end_is_recovery
    assert dup.cost.minutes is not None and dup.cost.minutes < 2
    empty = studies["FX001"]
    assert "failed_call_before" in empty.signals
    assert "No next step after a failure" in _text(empty.explanations)
    assert "71.6 tok/s" in _text(empty.stakes)


def test_seed_001_explains_with_its_signals() -> None:
    studies = {cs.incident.code: cs for _, cs in _studies(SEED_001)}
    empty = studies["FX001"]
    assert "reasoning_only" in empty.signals and "long_request" in empty.signals
    why = _text(empty.explanations)
    assert why.startswith("Mid-think") and "Reasoning collapse under complexity" in why
    assert "Waiting on a result" not in why  # no timed-out call: that explanation has no signal
    assert "14.8 Ktok/s" in _text(empty.stakes)
    resend = studies["FX004"]
    assert "empty_between" in resend.signals and "provider_error_between" not in resend.signals


def test_explanations_need_their_signal() -> None:
    from forensics.report.narrative import explanations

    assert explanations("FX001", {}) == []
    assert explanations("FX999", {}) == []  # a rule with no knowledge file: none


def test_translation_of_known_words() -> None:
    assert gloss("重试").means == "retry" and gloss("重试").lang == "Chinese"
    assert gloss("继续。").means == "continue"
    assert gloss("不对，端口是 8080").kind == "correction"
    assert gloss("retry") is None  # English is not translated
    assert gloss("我希望制作一个类似 captialism Lab 的轻量策略游戏") is None


def test_figures_need_a_unit() -> None:
    assert figures_in("correct output at ~71.6 tok/s.") == ["correct output at ~71.6 tok/s."]
    assert figures_in("See line 42 of main.py and step 3.") == []
    assert figures_in("ETA dropped from 22.9 days to 8.8 days.") == [
        "ETA dropped from 22.9 days to 8.8 days."]


def test_unknown_rule_falls_back(tmp_path: Path) -> None:
    """A rule this report does not know (FX005+, harness events FX101+) still renders: its
    finding's message, the chain, the cost; no explanations it has no knowledge for."""
    from forensics.engine import ScanResult
    from forensics.findings import Incident

    result = scan_sessions(load(SEED_000))[0]
    turn = result.session.turns[41]
    odd = Incident(rule="made-up-rule", code="FX999", title="Something a newer rule saw",
                   severity="low", severity_reason="a newer rule", session_id=result.session.id,
                   source=result.session.source, agent="opencode", turn=turn.ordinal,
                   anchor=turn.anchor, evidence=[], evidence_turns=[],
                   message="The turn was interrupted.", fingerprint="0" * 16)
    other = ScanResult(session=result.session, incidents=[odd])
    cs = report.case_study(other, odd)
    assert cs.explanations == [] and cs.timeline and cs.cost is not None
    md = report.render_incident(other, odd)
    assert "The turn was interrupted." in md and "## Why it may have happened" not in md
    written = report.write_reports([other], tmp_path)
    assert any(p.name.startswith("FX999-") for p in written)


def test_harness_events_are_listed_not_told(tmp_path: Path) -> None:
    """An abort, a provider error or a compaction is a row on the session page, never a case
    study of its own: they are counted, not the assistant's mistakes."""
    from forensics.engine import ScanResult
    from forensics.findings import Incident

    result = scan_sessions(load(SEED_000))[0]
    turn = result.session.turns[41]
    event = Incident(rule="interrupted-turn", code="FX101", title="The user interrupted a turn",
                     severity="low", severity_reason="a harness event",
                     session_id=result.session.id, source=result.session.source,
                     agent="opencode", turn=turn.ordinal, anchor=turn.anchor, evidence=[],
                     evidence_turns=[], message="The user stopped the turn.",
                     fingerprint="1" * 16)
    both = ScanResult(session=result.session, incidents=result.incidents + [event])
    assert [cs.incident.code for cs in report.case_studies(both)] == \
        [i.code for i in result.incidents]
    written = report.write_reports([both], tmp_path)
    assert not any(p.name.startswith("FX101-") for p in written)
    page = next(p for p in written if p.name == "index.md").read_text("utf-8")
    assert "## Harness events" in page and "The user stopped the turn." in page
    html = next(p for p in written if p.name == "index.html").read_text("utf-8")
    assert "Harness events" in html and "The user stopped the turn." in html


def test_example_fixtures_are_reproducible() -> None:
    """tests/fixtures/examples/ is exactly what make_examples.py writes (fixed seeds, clocks)."""
    import importlib.util

    here = REPO / "tests" / "fixtures" / "examples"
    spec = importlib.util.spec_from_file_location("make_examples", here / "make_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import json

    doc = json.loads((here / "example_commit_timeout.json").read_text(encoding="utf-8"))
    assert doc == mod.build_commit_timeout()
    assert (here / "example_dev_server.jsonl").read_text(encoding="utf-8") == \
        mod.build_dev_server()


def test_corpus_like_examples_read_the_evidence() -> None:
    here = REPO / "tests" / "fixtures" / "examples"
    commit = {cs.incident.code: cs for _, cs in _studies(here / "example_commit_timeout.json")}
    ignored = commit["FX003"]
    assert "completed_before_timeout" in ignored.signals
    assert "4d4458a" in _text(ignored.shows) and "4d4458a" in _text(ignored.lesson)
    assert "(Chinese for “retry”)" in _text(ignored.reaction)
    assert commit["FX004"].flagged_gloss == "Chinese for “retry”"
    assert "completed_before_timeout" in commit["FX004"].signals  # between the two messages
    assert ignored.cost.minutes is not None and ignored.cost.minutes > 60  # the user came back
    dev = {cs.incident.code: cs for _, cs in _studies(here / "example_dev_server.jsonl")}
    resend = dev["FX004"]
    assert {"provider_error_between", "server_killed_with_call"} <= set(resend.signals)
    shows = _text(resend.shows)
    assert "most likely died with the call" in shows and "The app is now running" in shows
    assert "Fix the provider side before re-sending" in _text(resend.lesson)
    assert [s.ordinal for s in resend.timeline][-1] == 8  # stops at the claim, not the complaint


def test_knowledge_sentences_fill_from_their_signals() -> None:
    """Every knowledge sentence about a signal found in the fixtures names only values that
    signal carries (a sentence that cannot fill is dropped, which would hide it silently)."""
    from forensics.report import knowledge, readings
    from forensics.report.narrative import scene_of

    sys.path.insert(0, str(Path(__file__).parent))
    from test_report import RESULTS

    results = list(RESULTS.values())
    for path in (SEED_000, SEED_001, REPO / "tests/fixtures/examples/example_commit_timeout.json",
                 REPO / "tests/fixtures/examples/example_dev_server.jsonl"):
        results += scan_sessions(load(path))
    checked = set()
    for result in results:
        for inc in result.incidents:
            found = readings.signals(result.session, inc, scene_of(result.session, inc))
            k = knowledge.for_rule(inc.code)
            templates = [(n, t) for n, t in k.shows.items()] + \
                [(e.signal, e.because) for e in k.explanations] + \
                [(lesson.signal, lesson.text) for lesson in k.lessons] + \
                [(n, t) for n, t in k.again.items()]
            for name, template in templates:
                if name in found:
                    # ``{first}`` (the earlier incident) comes from the retelling, not the signal
                    values = {**found[name].values, "first": ["turn 1"]}
                    assert knowledge.fill(template, values) is not None, \
                        (inc.code, name, template)
                    checked.add((inc.code, name))
    assert len(checked) >= 20
    for code in ("FX001", "FX002", "FX003", "FX004"):
        k = knowledge.for_rule(code)
        assert k.again, code
        for name, template in k.again.items():
            # an ``again`` sentence names the earlier incident and only values its signal's
            # other sentences use, so it fills wherever they do
            known = {p for t in [k.shows.get(name, ""),
                                 *(e.because for e in k.explanations if e.signal == name)]
                     for p in knowledge.placeholders(t)}
            assert "first" in knowledge.placeholders(template), (code, name)
            assert set(knowledge.placeholders(template)) - {"first"} <= known, (code, name)


def test_transcript_markdown_renders_safely_in_html() -> None:
    from forensics.report.render import md_to_html_block, md_to_html_inline, short_id

    assert md_to_html_inline("**bold** `a<b>` <script>x</script> *it*") == (
        "<strong>bold</strong> <code>a&lt;b&gt;</code> &lt;script&gt;x&lt;/script&gt; "
        "<em>it</em>")
    assert md_to_html_block("# Done\n\n```sh\nrm -rf <dir>\n```\n**ok**") == (
        "<p>Done</p><pre><code>rm -rf &lt;dir&gt;</code></pre><p><strong>ok</strong></p>")
    assert short_id("L34") == "L34"
    long = short_id("msg_ccd055476001EThMd3R3q7S5oV")
    assert long.startswith("msg_ccd05") and long.endswith("S5oV") and len(long) < 16
    result = scan_sessions(load(SEED_001))[0]
    html = report.render_session(result, fmt="html")
    assert "**" not in html.split("<pre>")[0]  # emphasis became tags, never raw asterisks
    assert "<strong>yes, both</strong>" in html


RESENDS = REPO / "tests" / "fixtures" / "resends_after_provider_errors.jsonl"


def test_same_cause_incidents_do_not_repeat_a_paragraph(tmp_path: Path) -> None:
    """Three re-sends after provider errors in one session: the first case study reads and
    explains the cause; the later ones point to it in one sentence and keep what differs."""
    [result] = scan_sessions(load(RESENDS))
    first, second, third = report.case_studies(result)
    assert [cs.incident.turn for cs in (first, second, third)] == [4, 7, 12]
    assert {cs.cause for cs in (first, second, third)} == {"provider_error_between"}
    assert first.same_as is None
    assert second.same_as is first.incident and third.same_as is first.incident
    assert "A provider failure, not a reasoning one" in _text(first.explanations)
    assert _text(first.lesson).startswith("Fix the provider side before re-sending")
    for later, error, at in ((second, "overloaded_error", "turn 6"),
                             (third, "API Error: Request timed out.", "turn 11")):
        pointer = _text(later.shows[:1])
        assert pointer.startswith("Same cause as the re-send at turn 4 "
                                  "(5d1e7b2c-0000-4000-8000-000000000003), explained there")
        assert error in pointer and pointer.endswith(f"at {at}.")
        assert later.explanations == [] and later.lesson == []
    # the opening request is quoted by the first case study only
    assert "turn 1" in _text(first.stakes) and "turn 1" not in _text(second.stakes)
    assert "now write the database migration" in _text(third.stakes)
    # what differs is still told: the minutes lost and what happened next
    assert (second.cost.end.ordinal, third.cost.end.ordinal) == (8, 13)
    assert "The migration adds the column" in _text(third.recovery)

    report.write_reports([result], tmp_path)
    pages = sorted(tmp_path.rglob("FX004-*.md"))
    assert len(pages) == 3
    seen: dict[str, Path] = {}
    for page in pages:
        for line in repetition.prose_lines(page.read_text(encoding="utf-8")):
            assert line not in seen, f"{page.name} repeats a paragraph of {seen[line].name}"
            seen[line] = page
    # the written page is the one a single-incident render gives
    assert report.render_incident(result, third.incident) == pages[2].read_text(encoding="utf-8")


def test_a_different_cause_is_told_in_full(tmp_path: Path) -> None:
    """The same session with the third re-send following an empty reply, not a provider error:
    that incident has its own cause, so it is read and explained, not pointed elsewhere."""
    import json

    rows = [json.loads(line) for line in RESENDS.read_text(encoding="utf-8").splitlines()]
    timed_out = next(r for r in rows if r.get("isApiErrorMessage")
                     and "timed out" in r["message"]["content"][0]["text"])
    del timed_out["isApiErrorMessage"], timed_out["error"]
    timed_out["message"].update(model="claude-sonnet-4-5-20250929", stop_reason="end_turn",
                                content=[{"type": "text", "text": ""}])
    variant = tmp_path / "empty_then_resend.jsonl"
    variant.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    [result] = scan_sessions(load(variant))
    resends = [cs for cs in report.case_studies(result) if cs.incident.code == "FX004"]
    assert [cs.incident.turn for cs in resends] == [4, 7, 11]
    last = resends[-1]
    assert last.cause == "empty_between" and last.same_as is None
    assert "A silent failure: the empty reply at turn 10" in _text(last.explanations)
    assert not _text(last.shows).startswith("Same cause")
    assert resends[1].same_as is resends[0].incident


def test_ignored_tool_error_reads_what_came_next_from_the_findings_facts() -> None:
    """The case study says what the rule saw after the failure: a success claim only where the
    finding holds one, moving on in words otherwise, and the failure as the rule judged it
    (Codex's status line, typed when read)."""
    from forensics.report import readings
    from forensics.report.narrative import scene_of

    sys.path.insert(0, str(Path(__file__).parent))
    from test_report import RESULTS

    def signals_of(case: str) -> dict:
        result = RESULTS[case]
        (incident,) = [i for i in result.incidents if i.code == "FX003"]
        return readings.signals(result.session, incident, scene_of(result.session, incident))

    claimed = signals_of("tests-fail-claimed-pass")
    assert "success_claim_after" in claimed and "moved_on_after" not in claimed
    moved = signals_of("codex-exit-in-text-only")
    assert "moved_on_after" in moved and "success_claim_after" not in moved
    def words(pieces) -> str:
        return "".join(p if isinstance(p, str) else p.text for p in pieces)

    # the Codex reader typed the status line as exit 2; the line quoted is the error before it
    assert words(moved["failed_call"].values["status"]) == "exited with code 2"
    assert "Makefile:4: all] Error 1" in words(moved["failed_call"].values["line"])


def test_a_launch_that_died_in_its_log_is_told_as_the_launchs_failure(tmp_path: Path) -> None:
    """FX003 on a launch whose later log read showed it died: the case study names the launch
    (not the read) as the failed call, how it died and the read that showed it."""
    import tomllib

    from case_formats import render

    cases = tomllib.loads((REPO / "tests" / "fixtures" / "rules" /
                           "FX003-ignored-tool-error.toml").read_text(encoding="utf-8"))["case"]
    raw = next(c for c in cases if c["name"] == "log-read-shows-launch-died")
    rendered, _ = render(raw, "claude-code")
    path = tmp_path / "died.jsonl"
    path.write_text(rendered.text, encoding="utf-8")
    [(result, cs)] = [(r, c) for r, c in _studies(path) if c.incident.code == "FX003"]
    assert cs.incident.anchor == result.session.turn(2).tool_calls[0].anchor
    [failure] = [f for f in cs.incident.facts if f.kind == "failure"]
    assert (failure.status, failure.turn) == ("port taken", 5)
    mistake = _text(cs.mistake)
    assert "The uvicorn launch at turn 2 found its port already taken" in mistake.replace("`", "").replace("*", "")
    assert "Address already in use" in mistake
