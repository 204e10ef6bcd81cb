"""What the evidence of one incident shows: named signals found in the transcript.

Each signal is a fact a careful reader would point at (the call timed out after its step had gone
through; the relaunch died because the first process held the port; the reply held reasoning
only) together with the values a knowledge sentence needs to say it (turn references, quotes,
commands). The knowledge files decide which signals a rule's case study mentions and in which
words; this module only finds them, from the finding's evidence (``evidence``) and the turns
around it (``Scene``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

from forensics.analysis.session import analysis_of
from forensics.findings import Incident
from forensics.model import (
    AssistantTurn,
    EventTurn,
    Session,
    ToolCall,
    ToolResultTurn,
    Turn,
    UserTurn,
)
from forensics.report import evidence as ev
from forensics.report import knowledge
from forensics.report._prose import Piece, code, norm, opening, quote, ref, shorten
from forensics.report._shell import (
    program,
    result_failed,
    result_status,
    status_words,
    strip_env,
    telling_lines,
)
from forensics.report._turns import calls_of, user_words


@dataclass
class Scene:
    """The turns a case study tells: what was asked, what happened after."""

    request: UserTurn | None = None
    """The user message the flagged turn belongs to (what the assistant was answering)."""
    reaction: UserTurn | None = None
    """The user's next message after the incident."""
    recovery: list[Turn] = field(default_factory=list)
    """What the assistant did after the reaction, up to its first visible answer."""


@dataclass
class Signal:
    name: str
    values: dict[str, list[Piece | str]]
    turns: list[int] = field(default_factory=list)


def _status(session: Session, result: ToolResultTurn) -> list[Piece | str]:
    return [result_status(session, result)]


def _line(result: ToolResultTurn) -> list[Piece | str] | None:
    lines = telling_lines(result.error or result.output, 1)
    return [quote(lines[0], 200)] if lines else None


def _cmd(command: str | None, width: int = 120) -> list[Piece | str]:
    return [code(shorten(strip_env(command or ""), width))]


@cache
def _completion() -> re.Pattern[str]:
    r"""Output lines that say a step went through (a commit made, files written, a push done).
    Indentation is ``[^\S\n]*``: ``^\s*`` is retried from every line start of a run of blank
    lines (quadratic in it) and finds nothing the line's own indentation does not."""
    return re.compile(
        r"^\[[\w./-]+(?: \(root-commit\))? [0-9a-f]{7,}\]|\b\d+ files? changed\b|"
        r"^[^\S\n]*(?:create|rewrite) mode \d+|\bSuccessfully (?:installed|built|pushed|created)\b|"
        r"^To \S+\n?|\bLogged in as\b|\bwrote \d+ (?:files|bytes)\b|✓ Ready in\b", re.M)


def _completed_line(result: ToolResultTurn) -> str | None:
    text = result.output or ""
    m = _completion().search(text[:20000])
    if m is None:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return shorten(text[start:end if end >= 0 else len(text)].strip(), 160)


def _foreground_server(session: Session, call: ToolCall) -> bool:
    """A call the ledger holds as a server launch that was not sent to the background."""
    ledger = analysis_of(session).latest_ledger()
    launch = next((la for la in ledger.launches if la.call_id == call.call_id), None) \
        if ledger else None
    return launch is not None and launch.server is not None and not (
        launch.background or launch.detached)


_RUNNING = re.compile(r"\b(?:is (?:now )?(?:running|up|live|serving|started)|now running|"
                      r"started (?:successfully|on)|running (?:at|on))\b|运行中|已启动", re.I)


def _server_killed(session: Session, turns: Sequence[Turn]) -> Signal | None:
    """A foreground server call the harness stopped, then a claim that the server runs."""
    for turn in turns:
        for call in calls_of(turn):
            result = session.result_for(call)
            if result is None or not (result.timed_out or result.killed) \
                    or not _foreground_server(session, call):
                continue
            for later in session.turns[result.ordinal:result.ordinal + 8]:
                if isinstance(later, UserTurn):
                    break
                if isinstance(later, AssistantTurn) and _RUNNING.search(later.text or ""):
                    said = next((s for s in re.split(r"(?<=[.!?])\s+|\n+", later.text)
                                 if _RUNNING.search(s)), later.text)
                    return Signal("server_killed_with_call", {
                        "command": [code(program(call.command or ""))],
                        "call": [ref(turn)], "result": [ref(result)], "status": _status(session, result),
                        "claim": [ref(later)], "said": [quote(said.strip(), 160)],
                    }, [turn.ordinal, result.ordinal, later.ordinal])
    return None


def _completed(session: Session, results: Sequence[ToolResultTurn]) -> Signal | None:
    for result in results:
        if not (result.timed_out or result.killed):
            continue
        line = _completed_line(result)
        pair = ev.call_of(session, result)
        if line and pair is not None:
            return Signal("completed_before_timeout", {
                "call": [ref(pair[0])], "result": [ref(result)], "status": _status(session, result),
                "command": _cmd(pair[1].command or pair[1].name), "line": [quote(line, 160)],
            }, [pair[0].ordinal, result.ordinal])
    return None


def _word_kind(text: str, kind: str) -> knowledge.Word | None:
    r"""The first word of this kind the text is (a correction: the text starts with it, then a
    non-word character or its end, as ``re.match(escape(w) + r"(?:\W|$)")`` would say)."""
    flat = norm(text).strip(" .!?。！？,，")
    prefix = kind == "correction"
    for w, word in _words_of_kind(kind):
        if flat == w:
            return word
        if prefix and flat.startswith(w) and (len(flat) == len(w) or not (
                (c := flat[len(w)]).isalnum() or c == "_")):
            return word
    return None


_WORDS_OF_KIND: dict[str, tuple[knowledge.Words, tuple[tuple[str, knowledge.Word], ...]]] = {}


def _words_of_kind(kind: str) -> tuple[tuple[str, knowledge.Word], ...]:
    """The knowledge's words of one kind, lower-cased, in the file's order: worked out once,
    not for every quote a case study glosses (kept while ``knowledge.words()`` is the same)."""
    words = knowledge.words()
    kept = _WORDS_OF_KIND.get(kind)
    if kept is None or kept[0] is not words:
        kept = _WORDS_OF_KIND[kind] = (words, tuple(
            (w.text.lower(), w) for w in words.words if w.kind == kind))
    return kept[1]


def gloss(text: str) -> knowledge.Word | None:
    """The knowledge entry translating a short quoted message (``重试`` -> retry), if any."""
    if len(text) > 80:
        return None
    for kind in ("retry", "continue", "correction"):
        word = _word_kind(text, kind)
        if word is not None and word.lang != "English":
            return word
    return None


def _up_words() -> list[str]:
    from forensics.rules import registry

    try:
        return [w.lower() for w in registry()["FX002"].params.get("user_up_words", [])]
    except Exception:
        return []


def _is_status(text: str) -> bool:
    flat = norm(text).strip(" .!?。！？")
    if not flat or len(flat.split()) > 4:
        return False
    return any(flat == w or flat.startswith(w + " ") for w in _up_words()) or \
        _word_kind(text, "continue") is not None or flat in ("ok", "okay", "yes", "go", "ready")


def _reasoning_only(turn: Turn) -> Signal | None:
    if isinstance(turn, AssistantTurn) and not turn.visible and turn.reasoning.strip():
        return Signal("reasoning_only", {"reply": [ref(turn)],
                                         "chars": [f"{len(turn.reasoning):,}"]}, [turn.ordinal])
    return None


def _long_request(user: UserTurn | None) -> Signal | None:
    if user is None:
        return None
    text = user_words(user).strip()
    lines = sum(1 for ln in text.splitlines() if ln.strip())
    if len(text) >= 800 or lines >= 12:
        return Signal("long_request", {"user": [ref(user)], "chars": [f"{len(text):,}"],
                                       "lines": [str(lines)]}, [user.ordinal])
    return None


def _pressure(session: Session, before: int) -> list[Signal]:
    out: list[Signal] = []
    limit = knowledge.words().pressure_tokens
    for turn in reversed(session.turns[:before - 1]):
        if isinstance(turn, AssistantTurn) and turn.tokens_in is not None:
            if turn.tokens_in >= limit:
                out.append(Signal("context_pressure", {"turn": [ref(turn)],
                                                       "tokens": [f"{turn.tokens_in:,}"]},
                                  [turn.ordinal]))
            break
    compaction = next((t for t in reversed(session.turns[:before - 1])
                       if isinstance(t, EventTurn) and t.event == "compaction"), None)
    if compaction is not None:
        out.append(Signal("compaction_before", {"event": [ref(compaction)]},
                          [compaction.ordinal]))
    return out


def _user_signals(scene: Scene, session: Session, incident: Incident) -> list[Signal]:
    out: list[Signal] = []
    before = next((t for t in reversed(session.turns[:incident.turn - 1])
                   if isinstance(t, UserTurn)), None)
    if before is not None and incident.rule != "user-resend" and _is_status(user_words(before)):
        out.append(Signal("user_status_before", {"user": [ref(before)],
                                                 "said": [quote(user_words(before), 80)]},
                          [before.ordinal]))
    if scene.reaction is not None and _word_kind(user_words(scene.reaction), "correction"):
        out.append(Signal("correction_after", {
            "user": [ref(scene.reaction)], "said": [quote(opening(user_words(scene.reaction)),
                                                          160)]}, [scene.reaction.ordinal]))
    return out


def _failure_signals(session: Session, result: ToolResultTurn | None, name: str,
                     failure: ev.FailedCall | None = None) -> list[Signal]:
    """The failed call's signals; ``failure``: how the rule's facts say it ended."""
    if result is None:
        return []
    pair = ev.call_of(session, result)
    if failure is not None and pair is not None and pair[1] is not failure.call:
        pair = ev.owner_of(session, failure.call) or pair  # a launch whose log showed it died
    line = [quote(failure.lines[-1], 200)] if failure and failure.lines else _line(result)
    if pair is None or line is None:
        return []
    status = [status_words(failure.status)] if failure else _status(session, result)
    values = {"call": [ref(pair[0])], "result": [ref(result)], "status": status,
              "command": _cmd(pair[1].command or pair[1].name), "line": line}
    out = [Signal(name, values, [pair[0].ordinal, result.ordinal])]
    if result.timed_out or result.killed:
        out.append(Signal("timed_out_before", dict(values), [result.ordinal]))
    return out


def _empty_response(session: Session, incident: Incident, scene: Scene) -> list[Signal]:
    out: list[Signal] = []
    failed = ev.failed_calls(session, incident)  # the result the silence answered, if failed
    if failed:
        out += _failure_signals(session, failed[0].result, "failed_call_before", failed[0])
        done = _completed(session, [failed[0].result])
        if done:
            out.append(done)
    turn = ev.flagged(session, incident)
    for s in (_reasoning_only(turn), _long_request(scene.request)):
        if s:
            out.append(s)
    return out


def _duplicate_launch(session: Session, incident: Incident, scene: Scene) -> list[Signal]:
    out: list[Signal] = []
    found = ev.relaunch(session, incident)
    earlier = ev.earlier_launch(session, incident)
    if found is None or earlier is None:
        return out
    call, result = found
    relaunch_turn = ev.flagged(session, incident)
    if result is not None and result_failed(session, result):
        port = ev.launch_port(session, incident)
        values: dict[str, list[Piece | str]] = {
            "earlier": [ref(earlier)], "relaunch": [ref(relaunch_turn)], "result": [ref(result)],
            "status": _status(session, result)}
        line = _line(result)
        if line:
            values["line"] = line
        check = next((t for t in scene.recovery if any(
            c.command and port and port in c.command for c in calls_of(t))), None)
        values["check_hint"] = []
        if port:
            values["port"] = [code(port)]
            if check is not None:
                cmd = next(c.command for c in calls_of(check) if c.command and port in c.command)
                values["check_hint"] = [" (as ", code(shorten(cmd, 80)), " did at ", ref(check),
                                        ")"]
            out.append(Signal("port_held", values, [earlier.ordinal, result.ordinal]))
        else:
            out.append(Signal("killed_at_once", values, [result.ordinal]))
    between_checks = ev.checks_between(session, earlier.ordinal, incident.turn)
    if not between_checks:
        out.append(Signal("no_check_between", {"earlier": [ref(earlier)],
                                               "relaunch": [ref(relaunch_turn)]},
                          [earlier.ordinal, incident.turn]))
    kills = ev.kills_between(session, 0, earlier.ordinal)
    if kills:
        out.append(Signal("earlier_kills", {"kills": _refs(kills[-3:])},
                          [k.ordinal for k in kills[-3:]]))
    for t in scene.recovery:
        for c in calls_of(t):
            res = session.result_for(c)
            port = ev.launch_port(session, incident)
            if res is not None and not res.failed and port and c.command and port in c.command:
                line = _line(res)
                if line:
                    out.append(Signal("checked_after", {"check": [ref(t)], "command": _cmd(
                        c.command, 80), "line": line}, [t.ordinal, res.ordinal]))
                    return out
    return out


def _refs(turns: Sequence[Turn]) -> list[Piece | str]:
    out: list[Piece | str] = []
    for i, t in enumerate(turns):
        if i:
            out.append(" and " if i == len(turns) - 1 else ", ")
        out.append(ref(t))
    return out


def _ignored_tool_error(session: Session, incident: Incident, scene: Scene) -> list[Signal]:
    out: list[Signal] = []
    failed = ev.failed_calls(session, incident)
    if failed:
        out += _failure_signals(session, failed[0].result, "failed_call", failed[0])
        done = _completed(session, [f.result for f in failed])
        if done:
            out.append(done)
    # what the assistant did next, as the finding's facts say: a success it claimed, else its
    # first reply (empty, or moving on in words; a reply of calls only says nothing here)
    after = [f for f in incident.facts if f.kind == "claim"] or [
        f for f in incident.facts if f.kind == "reply"][:1]
    for fact in after:
        reply = session.turns[fact.turn - 1]
        if fact.kind == "claim":
            out.append(Signal("success_claim_after", {"reply": [ref(reply)], "said": [
                quote(opening(fact.quote), 200)]}, [fact.turn]))
        elif fact.role == "empty reply":
            out.append(Signal("empty_after", {"reply": [ref(reply)]}, [fact.turn]))
        elif fact.quote:
            out.append(Signal("moved_on_after", {"reply": [ref(reply)], "said": [
                quote(opening(fact.quote), 200)]}, [fact.turn]))
    return out


def _user_resend(session: Session, incident: Incident, scene: Scene) -> list[Signal]:
    out: list[Signal] = []
    for t in ev.replies_between(session, incident)[-3:]:
        if isinstance(t, AssistantTurn) and t.error is not None:
            out.append(Signal("provider_error_between", {"reply": [ref(t)], "error": [
                quote(f"{t.error.name}: {t.error.message}", 140)]}, [t.ordinal]))
        elif isinstance(t, EventTurn) and t.event == "api_error":
            out.append(Signal("provider_error_between", {"reply": [ref(t)], "error": [
                quote(t.text, 140)]}, [t.ordinal]))
        elif isinstance(t, AssistantTurn) and t.aborted:
            out.append(Signal("aborted_between", {"reply": [ref(t)]}, [t.ordinal]))
        elif isinstance(t, AssistantTurn) and not t.visible:
            out.append(Signal("empty_between", {"reply": [ref(t)]}, [t.ordinal]))
            s = _reasoning_only(t)
            if s:
                out.append(s)
        elif isinstance(t, AssistantTurn) and t.text.strip():
            out.append(Signal("full_reply_between", {"reply": [ref(t)], "said": [
                quote(opening(t.text), 160)]}, [t.ordinal]))
    seen: set[str] = set()
    out = [s for s in out if not (s.name in seen or seen.add(s.name))]  # first of each kind
    resend = ev.flagged(session, incident)
    if isinstance(resend, UserTurn):
        word = _word_kind(user_words(resend), "retry") or _word_kind(user_words(resend),
                                                                     "continue")
        if word is not None:
            out.append(Signal("retry_word", {"said": [quote(user_words(resend), 60)]},
                              [resend.ordinal]))
    earlier = ev.repeated_message(session, incident)
    s = _long_request(earlier)
    if s:
        out.append(s)
    if earlier is not None:
        done = _completed(session, [t for t in session.turns[earlier.ordinal:incident.turn - 1]
                                    if isinstance(t, ToolResultTurn)])
        if done:
            out.append(done)
    return out


_BY_RULE = {
    "empty-response": _empty_response,
    "duplicate-launch": _duplicate_launch,
    "ignored-tool-error": _ignored_tool_error,
    "user-resend": _user_resend,
}


def signals(session: Session, incident: Incident, scene: Scene) -> dict[str, Signal]:
    """Every signal in this incident's evidence, by name (the first found of each name).

    A rule without its own reader (a new rule) still gets the signals every rule shares: the
    user's status message before it, a correction after it, context pressure, a foreground
    server stopped by the harness."""
    found: list[Signal] = []
    reader = _BY_RULE.get(incident.rule)
    if reader is not None:
        found += reader(session, incident, scene)
    found += _user_signals(scene, session, incident)
    found += _pressure(session, incident.turn)
    window = [t for t in [*ev.evidence(session, incident), ev.flagged(session, incident),
                          *scene.recovery]]
    killed = _server_killed(session, sorted({t.ordinal: t for t in window}.values(),
                                            key=lambda t: t.ordinal))
    if killed:
        found.append(killed)
    if scene.reaction is None and session.turns:
        found.append(Signal("silent_session_end", {"last": [ref(session.turns[-1])]},
                            [session.turns[-1].ordinal]))
    out: dict[str, Signal] = {}
    for s in found:
        out.setdefault(s.name, s)
    return out
