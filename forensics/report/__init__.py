"""Case-study reports: one write-up per incident, one report per session, Markdown and HTML.

    render_incident(result, incident, fmt="markdown")   one incident's case study
    render_session(result, fmt="html")                  every incident of a session + timeline
    write_reports(results, out_dir)                     the files ``forensics report`` writes

The analysis lives in ``story`` (facts from the transcript), the layout in
``reports/templates/`` (Jinja), the figure in ``svg``, secret hiding in ``redact``. Jinja is
imported on first render only, so commands that never render do not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from pathlib import Path

from forensics.engine import ScanResult
from forensics.findings import SEVERITY_ORDER, Incident
from forensics.report import story
from forensics.report._memo import forget_all
from forensics.report._turns import SessionMemo
from forensics.redact import redact
from forensics.report.svg import incident_id, order_svg, timeline_svg

__all__ = ["render_incident", "render_session", "render_sessions", "write_reports", "case_study",
           "case_studies", "redact"]

FORMATS = ("markdown", "html")
_EXT = {"markdown": "md", "html": "html"}


def _spec(incident: Incident):
    from forensics.rules import registry

    try:
        return registry().get(incident.code)
    except Exception:  # a broken rule file must not stop a report; the prose falls back
        return None


def case_study(result: ScanResult, incident: Incident) -> story.CaseStudy:
    """The structured case study behind both formats (for notebooks and tests), told as in the
    session's report: knowing the case studies before it."""
    for cs in case_studies(result):
        if cs.incident is incident:
            return cs
    return story.build(result.session, incident, _spec(incident), result.incidents)


def harness_events(result: ScanResult) -> list[Incident]:
    """The harness events (aborts, provider errors, compactions): counted and listed on the
    session page, never told as case studies (they are not the assistant's mistakes)."""
    return [i for i in result.incidents if _is_harness(i)]


def _is_harness(incident: Incident) -> bool:
    spec = _spec(incident)
    return bool(spec is not None and getattr(spec, "is_harness", False))


def case_studies(result: ScanResult) -> list[story.CaseStudy]:
    """Every incident's case study (harness events aside), sharing one pass over the session's
    turns; each is told knowing the ones before it, so a reader of several does not read a
    paragraph twice."""
    memo = SessionMemo(result.session)
    studies: list[story.CaseStudy] = []
    for i in result.incidents:
        if _is_harness(i):
            continue
        studies.append(story.build(result.session, i, _spec(i), result.incidents, memo,
                                   studies))
    return studies


def _context(result: ScanResult, cs: story.CaseStudy, *, redact: bool, prefix: str = "",
             session_href: str = "", index_href: str = "") -> dict:
    """What a case-study template needs; ``prefix`` keeps ids unique when cases share a page;
    ``session_href``/``index_href`` link a case's own page back to its session and the index."""
    own = prefix + incident_id(cs.incident)
    return {
        "session_href": session_href,
        "index_href": index_href,
        "cs": cs,
        "session": result.session,
        "redact": redact,
        "id_prefix": own + "-",
        "linked_turns": {s.ordinal for s in cs.timeline},
        "order_svg": order_svg(cs.timeline, id_prefix=own + "-"),
        "incident_id": own,
    }


def render_incident(result: ScanResult, incident: Incident, *, fmt: str = "markdown",
                    redact: bool = True) -> str:
    """One incident's case study as Markdown or self-contained HTML."""
    from forensics.report.render import render

    cs = case_study(result, incident)
    return render(f"incident.{_EXT[_check(fmt)]}.j2", fmt,
                  **_context(result, cs, redact=redact, session_href=f"index.{_EXT[fmt]}"),
                  level=1)


def render_session(result: ScanResult, *, fmt: str = "markdown", redact: bool = True,
                   timeline_image: str | None = None) -> str:
    """All incidents of a session in turn order, with the timeline figure, as one document.

    ``timeline_image`` is a relative path to a ``timeline.svg`` written beside a Markdown file
    (Markdown viewers do not render inline SVG); HTML always carries the figure inline.
    """
    return render_sessions([result], fmt=fmt, redact=redact, timeline_image=timeline_image)


def render_sessions(results: Sequence[ScanResult], *, fmt: str = "markdown",
                    redact: bool = True, timeline_image: str | None = None) -> str:
    """Several sessions' reports as one document (what ``scan --format html`` prints)."""
    _check(fmt)
    several = len(results) > 1
    docs = [_session_doc(r, fmt, redact, f"s{n}-" if several else "", n, case_studies(r))
            for n, r in enumerate(results, 1)]
    return _render_docs(docs, fmt, redact, timeline_image)


def _render_docs(docs: list[dict], fmt: str, redact: bool, timeline_image: str | None) -> str:
    from forensics.report.render import render

    if fmt == "html":
        return render("session.html.j2", fmt, docs=docs, redact=redact)
    return "\n---\n\n".join(
        render("session.md.j2", fmt, redact=redact, timeline_image=timeline_image, **doc)
        for doc in docs)


def _session_doc(result: ScanResult, fmt: str, redact: bool, prefix: str, index: int,
                 studies: list[story.CaseStudy], svg: str | None = None,
                 contexts: list[dict] | None = None) -> dict:
    """``contexts``: the studies' ``_context``s when already made (one per study, same
    ``prefix``), so a session written in both formats draws each order figure once."""
    if fmt != "html":
        svg = ""
    elif svg is None:
        svg = timeline_svg(result.session, result.incidents, clean=redact_fn(redact),
                           id_prefix=prefix)
    if contexts is None:
        contexts = [_context(result, cs, redact=redact, prefix=prefix) for cs in studies]
    return {
        "harness": harness_events(result),
        "session": result.session, "result": result, "studies": studies, "svg": svg,
        "index": index, "severity_counts": _severity_counts(result.incidents),
        "rules": rule_docs(result.incidents),
        "contexts": contexts,
    }


def write_reports(results: Iterable[ScanResult], out_dir: Path | str, *,
                  redact: bool = True, index_href: str | None = None,
                  on_crash: Callable[[ScanResult, Exception], None] | None = None) -> list[Path]:
    """Per session a folder with ``index.md``/``index.html``, ``timeline.svg`` and one Markdown
    and one HTML file per incident (``FX001-<anchor>``); a top-level index when several sessions.

    ``results`` may be a stream: each session is written as it comes and only what the top index
    needs is kept, so memory follows the largest session. ``on_crash``: a session the renderer
    raises on loses its files and is passed to it with the error, and the others are written
    (without it, the error propagates).

    Returns the written paths in a fixed order that callers may rely on (``forensics.cases``
    does): per session ``timeline.svg``, ``index.md``, ``index.html``, then for each incident in
    turn order its ``.md`` and ``.html``; the top-level ``index.md``/``index.html`` last."""
    from forensics.report.render import render

    stream = iter(results)
    first = list(islice(stream, 2))  # several sessions: each page links to a top index
    if index_href is None and len(first) > 1:
        index_href = "../index.{ext}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    folders: list[tuple[ScanResult, str]] = []
    used: set[str] = set()
    for result in _each(first, stream):
        name = story.safe_name(result.session.id)
        base, n = name, 2
        while name in used:
            name, n = f"{base}-{n}", n + 1
        mine: list[Path] = []
        try:
            _write_session(result, out / name, redact, index_href, render, mine)
        except OSError:
            raise
        except Exception as exc:
            if on_crash is None:
                raise
            for path in mine:
                path.unlink(missing_ok=True)
            if (out / name).is_dir() and not any((out / name).iterdir()):
                (out / name).rmdir()
            on_crash(result, exc)
            continue
        used.add(name)
        written.extend(mine)
        folders.append((result.released(), name))
        del result
    if len(folders) > 1:
        rows = [{"result": r, "folder": name, "counts": _severity_counts(r.incidents)}
                for r, name in folders]
        for fmt in FORMATS:
            path = out / f"index.{_EXT[fmt]}"
            path.write_text(render(f"index.{_EXT[fmt]}.j2", fmt, rows=rows, redact=redact),
                            encoding="utf-8")
            written.append(path)
    return written


def _each(ahead: list[ScanResult], rest: Iterable[ScanResult]) -> Iterable[ScanResult]:
    """The read-ahead results, then the rest: each handed over once (``chain`` would keep
    the read-ahead list, and its sessions, to the end)."""
    while ahead:
        yield ahead.pop(0)
    yield from rest


def _write_session(result: ScanResult, folder: Path, redact: bool, index_href: str | None,
                   render, written: list[Path]) -> None:
    """One session's folder; every path is added to ``written`` as soon as it exists."""
    forget_all()  # the memos hold one session's texts at a time
    folder.mkdir(parents=True, exist_ok=True)
    svg_path = folder / "timeline.svg"
    svg = timeline_svg(result.session, result.incidents, clean=redact_fn(redact))
    svg_path.write_text(svg + "\n", encoding="utf-8")
    written.append(svg_path)
    studies = case_studies(result)  # once, for the index and the pages, both formats
    contexts = [_context(result, cs, redact=redact) for cs in studies]
    for fmt in FORMATS:
        path = folder / f"index.{_EXT[fmt]}"
        doc = _session_doc(result, fmt, redact, "", 1, studies, svg, contexts)
        text = _render_docs([doc], fmt, redact, "timeline.svg")
        written.append(path)
        path.write_text(text, encoding="utf-8")
    stems: set[str] = set()
    for cs, context in zip(studies, contexts):
        stem, n = cs.file_stem, 2
        while stem in stems:
            stem, n = f"{cs.file_stem}-{n}", n + 1
        stems.add(stem)
        for fmt in FORMATS:
            path = folder / f"{stem}.{_EXT[fmt]}"
            back = (index_href or "").replace("{ext}", _EXT[fmt])
            text = render(f"incident.{_EXT[fmt]}.j2", fmt,
                          **{**context, "session_href": f"index.{_EXT[fmt]}",
                             "index_href": back}, level=1)
            written.append(path)
            path.write_text(text, encoding="utf-8")


def rule_docs(incidents: Iterable[Incident]) -> list[dict]:
    """The rules behind ``incidents``, once each, in code order: the prose every case study of
    a rule would otherwise repeat (why it matters, what to do, when it can be wrong). A rule
    the registry does not know (a newer rule file) is listed with what its incidents carry."""
    from forensics.report._prose import para

    out: dict[str, dict] = {}
    for inc in incidents:
        if inc.code in out:
            continue
        spec = _spec(inc)
        out[inc.code] = {
            "code": inc.code, "slug": inc.rule,
            "title": getattr(spec, "title", "") or inc.title,
            "rationale": para(getattr(spec, "rationale", "") or ""),
            "remediation": para(getattr(spec, "remediation", "") or ""),
            "falsepositives": list(getattr(spec, "falsepositives", ()) or ()),
        }
    return [out[k] for k in sorted(out)]


def redact_fn(enabled: bool):
    from forensics.report.render import redacted

    return redacted if enabled else (lambda s: s)


def _severity_counts(incidents: Iterable[Incident]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for i in incidents:
        counts[i.severity] = counts.get(i.severity, 0) + 1
    return sorted(counts.items(), key=lambda kv: SEVERITY_ORDER.get(kv[0], 9))


def _check(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; expected markdown or html")
    return fmt
