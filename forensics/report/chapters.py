"""Per-rule chapters of a case study: the critical mistake and the assumptions that failed.

One function per rule slug fills the rule-specific sections of a ``CaseStudy`` from the turns
the finding names; a rule without a chapter gets its finding's message. Titles name the failure
in the session's own terms (the program, the turn).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forensics.findings import Evidence, Incident
from forensics.model import (
    AssistantTurn,
    EventTurn,
    Session,
    ToolCall,
    ToolResultTurn,
    Turn,
    UserTurn,
)
from forensics.report._prose import (
    Piece,
    S,
    Sentence,
    code,
    duration,
    gist,
    joined_quotes,
    norm,
    prose,
    quote,
    ref,
    shorten,
)
from forensics.analysis.session import analysis_of
from forensics.report import evidence as ev
from forensics.report._shell import (
    program,
    result_status,
    status_words,
    strip_env,
    telling_lines,
)
from forensics.report._turns import (
    calls_of,
    commands_of,
    previous,
    step_text,
    summarize_call,
    user_words,
)

if TYPE_CHECKING:
    from forensics.report.story import CaseStudy


Chapter = Callable[["CaseStudy", Session, Incident], None]


def _empty_response(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    before = ev.silence_after(session, incident)
    failed, fact = before if before else (None, None)
    what: Sentence | None
    if isinstance(turn, AssistantTurn):
        if turn.reasoning.strip() and "reasoning_only" in cs.signals:
            what = None  # what the evidence shows reads the reasoning-only reply already
        elif turn.reasoning.strip():
            what = S("The assistant's reply at ", ref(turn), " holds reasoning only (",
                     f"{len(turn.reasoning)} characters) and no text or tool call, so the user "
                     "saw nothing.")
        else:
            parts = ", ".join(turn.part_kinds) if turn.part_kinds else ""
            what = S("The assistant's reply at ", ref(turn), " is empty: no text and no tool "
                     "call", f" (its only parts: {parts})" if parts else "", ".")
    else:
        what = S("At ", ref(turn), " the harness closed the turn with no assistant message at "
                 "all.")
    if what is not None:
        cs.mistake.append(what)
    if isinstance(turn, AssistantTurn) and turn.reasoning.strip():
        cs.mistake.append(S("Its reasoning, which the user never saw, begins: ",
                            quote(turn.reasoning, 300)))
    if failed is not None and fact is not None:
        pair = session.call_for(failed)
        cmd = pair[1].command if pair else None
        lines = [ln for ln in fact.quote.splitlines() if ln.strip()]
        status = status_words(fact.status or "ok")
        did_fail = fact.kind == "failure"
        holder = pair[0] if pair else None
        if cmd and holder is not None and _sent_to_background(session, pair[1]):
            subject: list[Piece | str] = ["the ", code(program(cmd)), " launch at ",
                                          ref(holder)]
        elif cmd:
            subject = [code(shorten(strip_env(cmd), 160))]
        else:
            subject = [failed.name or "a tool call"]
        cs.mistake.append(S(
            "It came right after the result of ", *subject,
            *([" (result at ", ref(failed), ")"] if holder is not None and
              holder.ordinal != failed.ordinal and _sent_to_background(session, pair[1]) else
              [" at ", ref(failed)]),
            f", which {status}",
            *([": ", *joined_quotes(lines)] if lines and did_fail else []), "."))
        if did_fail:
            cs.mistake.append(S("Instead of saying what failed and what it would do next, the "
                                "assistant ended its turn without a word."))
            cs.assumptions.append(S("That the failed call at ", ref(failed), " needed no "
                                    "explanation: the transcript shows no reaction to it",
                                    " before the user wrote again" if incident.severity == "high"
                                    else "", "."))
        elif cs.same_as is None:  # a later incident of the same cause: told at the first
            cs.mistake.append(S("The assistant ended its turn after that result without telling "
                                "the user what it meant."))
    else:
        user = previous(session, incident.turn, (UserTurn,))
        if user is not None:
            cs.mistake.append(S("The user's request it should have answered was ", ref(user),
                                ": ", *gist(user_words(user))))
    if incident.severity == "high" and cs.same_as is None:
        cs.mistake.append(S("The empty reply was the last thing the user saw before they wrote "
                            "again: they were left with silence."))


def _sent_to_background(session: Session, call: ToolCall) -> bool:
    """The call started something in the background (its own ``&`` or the harness's)."""
    return call.background or any(c.background for c in analysis_of(session).commands(call))


def _duplicate_launch(cs: CaseStudy, session: Session, incident: Incident) -> None:
    """The chain of launches, kills and signals the finding's typed evidence names."""
    facts = incident.facts
    launches_ = [f for f in facts if f.kind == "launch"]
    relaunch = next((f for f in launches_ if f.role == "relaunch"), None)
    earlier = [f for f in launches_ if f.role != "relaunch"]
    turn = session.turns[incident.turn - 1]
    if relaunch is None or not earlier:
        cs.mistake.append(S("At ", ref(turn), " the assistant started a process while an "
                            "equivalent one it had started was still running: ",
                            quote(incident.message, 300)))
        return
    first = next((f for f in reversed(earlier) if f.role == "earlier launch"), earlier[-1])
    first_turn = session.turns[first.turn - 1]
    new_cmd, old_cmd = relaunch.command or "", first.command or ""
    what = code(program(new_cmd)) if new_cmd else "a long-running process"
    if norm(old_cmd) == norm(new_cmd):
        cs.mistake.append(S("At ", ref(turn), " the assistant sent the launch of ", what,
                            " from ", ref(first_turn), " again, unchanged."))
    elif program(old_cmd) == program(new_cmd):
        cs.mistake.append(S("At ", ref(turn), " the assistant started ", what, " again; the "
                            "same kind of process had been started at ", ref(first_turn),
                            " with ", code(shorten(strip_env(old_cmd), 200)), "."))
    else:
        cs.mistake.append(S("At ", ref(turn), " the assistant started ", what, " while the "
                            "process it had started at ", ref(first_turn), " with ",
                            code(shorten(strip_env(old_cmd), 200)), " could still be running."))
    if len(earlier) > 1:
        pieces: list[Piece | str] = []
        for i, f in enumerate(earlier):
            pieces += (["; "] if i else []) + [ref(session.turns[f.turn - 1]),
                                                f" ({f.quote or f.role})"]
        counted = any(f.role == "earlier launches not listed" for f in earlier)
        lead = ("It came after many launches of " if counted else
                f"It was launch number {len(earlier) + 1} of ")
        cs.mistake.append(S(lead, what, " in the session: ", *pieces, "."))
    kills_ = [f for f in facts if f.kind == "kill"]
    if kills_:
        k = kills_[-1]
        cs.mistake.append(S("Between the two launches the assistant ran ",
                            code(shorten(strip_env(k.command or ""), 160)), " at ",
                            ref(session.turns[k.turn - 1]), f" (a {k.role}): as far as the "
                            "transcript shows, it did not stop the first process."))
    else:
        cs.mistake.append(S("Nothing between the two launches stopped the first one: no kill "
                            "aimed at it and no output showing it had exited, as far as the "
                            "transcript shows."))
    quoted = {f.turn for f in facts if f.kind == "message"}
    users = [t for t in session.turns[first.turn: incident.turn - 1]
             if isinstance(t, UserTurn) and t.ordinal not in quoted]
    said: list[Piece | str] = []
    for u in users[-2:]:
        said += [", and at " if said else "In between, the user wrote at ", ref(u), ": ",
                 *gist(user_words(u), 200)]
    if said:
        cs.mistake.append(S(*said))
    for signal in (f for f in facts if f.kind in ("check", "message")
                   or (f.kind == "result" and f.turn < relaunch.turn)):
        cs.mistake.append(S("Before the relaunch, at ", ref(session.turns[signal.turn - 1]),
                            ", the transcript shows the first one was up (", signal.role, "): ",
                            quote(signal.quote, 200)))
    answered = [f for f in facts if f.kind == "check"]
    port = next((f for f in facts if f.kind == "port"), None)
    if not answered:
        where = f" on port {port.port}" if port else ""
        cs.assumptions.append(S("That the earlier process was gone and a new one could start"
                                f"{where}: no health check answered between the two launches."))
    else:
        cs.assumptions.append(S("That the earlier process was gone, although a check had "
                                "answered in between (", ref(session.turns[answered[-1].turn - 1]),
                                ")."))
    shown = next((f for f in facts if f.kind == "result" and f.turn > relaunch.turn), None)
    if shown is not None:
        result = session.turns[shown.turn - 1]
        lines = (telling_lines(result.error or result.output, 2)
                 if isinstance(result, ToolResultTurn) else [])
        how = {"port taken": "found its port taken", "killed at once": "was killed at once"}.get(
            shown.role) or (result_status(session, result) if isinstance(result, ToolResultTurn)
                            else "came back")
        cs.mistake.append(S("At ", ref(result), " the relaunch's result shows it ", how,
                            *([": ", quote(shown.quote, 200)] if shown.quote else
                              [": ", *joined_quotes(lines)] if lines else [" with no output"]),
                            "."))
    if port is not None:
        how = "" if port.quote == "named in the command" else f" ({port.quote})"
        cs.mistake.append(S("Both compete for port ", code(str(port.port)), how, ": only one "
                            "process can hold it, so the second launch can at best fail and at "
                            "worst disturb the running one."))


def _ignored_tool_error(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    failed = ev.failed_calls(session, incident)
    for failure in failed[:2]:
        call = failure.call
        named: list[Piece | str] = (
            ["The ", code(program(call.command)), " launch"]
            if call.command and _sent_to_background(session, call) else
            ["The call ", code(shorten(strip_env(call.command) if call.command
                                       else f"{call.name} {summarize_call(call)}", 200))])
        cs.mistake.append(S(*named,
                            " at ", ref(turn), f" {status_words(failure.status)}",
                            *([": ", *joined_quotes(list(failure.lines))] if failure.lines
                              else []), "."))
    later = [session.turns[o - 1] for o in incident.evidence_turns if o > incident.turn]
    for t in later[:2]:
        if isinstance(t, AssistantTurn):
            if not t.visible:
                cs.mistake.append(S("The next reply, at ", ref(t), ", is empty: the failure "
                                    "was never mentioned."))
            elif t.text.strip():
                cs.mistake.append(S("The assistant went on at ", ref(t), " without a word about "
                                    "the failure: ", quote(t.text, 240)))
            else:
                cmds = ", ".join(shorten(c, 80) for c in commands_of(t)) or \
                    ", ".join(c.name for c in t.tool_calls)
                cs.mistake.append(S("The assistant went on at ", ref(t), " with ",
                                    code(cmds), ", which does not deal with the failure."))
    if failed:
        cs.assumptions.append(S("That the call at ", ref(turn), " had done its job; its result "
                                "says it ", status_words(failed[0].status), "."))


def _user_resend(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    earlier = ev.repeated_message(session, incident)
    words = user_words(turn) if isinstance(turn, UserTurn) else ""
    between = [session.turns[o - 1] for o in incident.evidence_turns
               if earlier is not None and earlier.ordinal < o < incident.turn]
    replies = [t for t in between if isinstance(t, (AssistantTurn, EventTurn, ToolResultTurn))]
    if not replies and earlier is not None:
        replies = [t for t in session.turns[earlier.ordinal: incident.turn - 1]
                   if isinstance(t, (AssistantTurn, EventTurn))]
    failures = ev.failed_results(session, incident)  # the failed call the finding names
    for t in replies[-2:]:
        if isinstance(t, AssistantTurn):
            if t.error is not None:
                cs.mistake.append(S("The reply in between, at ", ref(t), ", was a provider "
                                    "error: ", quote(f"{t.error.name}: {t.error.message}", 200)))
            elif t.aborted:
                cs.mistake.append(S("The reply in between, at ", ref(t), ", was aborted."))
            elif not t.visible:
                cs.mistake.append(S("The assistant's final reply to ", ref(earlier) if earlier
                                    else "it", ", at ", ref(t), ", showed the user nothing",
                                    " (it held reasoning only)" if t.reasoning.strip() else "",
                                    "."))
            else:
                cs.mistake.append(S("The reply in between, at ", ref(t), ", was: ",
                                    quote(t.text or step_text(session, t), 240)))
        elif isinstance(t, EventTurn):
            cs.mistake.append(S("In between, the harness recorded ", code(t.event), " at ",
                                ref(t), *([": ", quote(t.text, 200)] if t.text else []), "."))
        elif isinstance(t, ToolResultTurn) and t.ordinal in failures:
            cs.mistake.append(S("In between, a tool call failed at ", ref(t), " (",
                                failures[t.ordinal], ")."))
    if earlier is not None:
        likeness = _likeness(user_words(earlier), words)
        gap = ""
        if turn.time is not None and earlier.time is not None:
            gap = f", {duration(turn.time - earlier.time)} after the first time"
        if likeness == "retry":
            cs.mistake.append(S("So at ", ref(turn), gap.replace("the first time", "the request"),
                                ", the user asked for another try: ", *gist(words)))
        else:
            cs.mistake.append(S("So at ", ref(turn), gap, ", the user sent ",
                                "the same message again, word for word" if likeness == "same"
                                else "the message again, nearly unchanged", ": ", *gist(words)))


def _likeness(first: str, again: str) -> str:
    """``same`` (equal after whitespace and case), ``near`` (a small edit) or ``retry`` (a
    different, usually short message asking for another try, such as "retry" or "重试")."""
    a, b = norm(first), norm(again)
    if a == b:
        return "same"
    short, long_ = sorted((len(a), len(b)))
    if long_ and short / long_ >= 0.6 and long_ <= 20_000:
        from difflib import SequenceMatcher

        if SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.75:
            return "near"
    return "retry"


# -- the "did it really work?" rules: the claim, the loop, the lost call, the correction ----------


def _evidence(session: Session, incident: Incident) -> list[Turn]:
    return [session.turns[o - 1] for o in incident.evidence_turns
            if 0 < o <= len(session.turns)]


def _what_call(call: ToolCall) -> Piece:
    return code(shorten(strip_env(call.command) if call.command
                        else f"{call.name} {summarize_call(call)}", 200))


def _facts_of(session: Session, incident: Incident, *kinds: str) -> list[tuple[Evidence, Turn]]:
    """The finding's facts of these kinds, each with the turn it is in."""
    return [(f, session.turns[f.turn - 1]) for f in incident.facts
            if f.kind in kinds and 0 < f.turn <= len(session.turns)]


def _command(command: str | None) -> Piece:
    return code(shorten(strip_env(command or ""), 200))


def _unverified_claim(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    cs.mistake.append(S(*prose(incident.message)))
    for f, t in _facts_of(session, incident, "result", "failure", "edit"):
        if f.kind == "edit":
            cs.mistake.append(S("After it, at ", ref(t), ", the assistant edited ",
                                code(f.quote) if f.quote else "a file", " with ",
                                code(shorten(f.command or "", 80)), ", and ran nothing again."))
        elif isinstance(t, ToolResultTurn):
            lines = [ln for ln in f.quote.splitlines() if ln.strip()] or telling_lines(
                t.error or t.output, 2)
            cs.mistake.append(S("The run it rests on, ", _command(f.command), " at ", ref(t),
                                f", {status_words(f.status or 'ok')}",
                                *([": ", *joined_quotes(lines)] if lines else []), "."))
    cs.assumptions.append(S("That the check the message at ", ref(turn), " names had passed on "
                            "the code as it stood; the transcript shows ",
                            incident.severity_reason, "."))


def _retry_loop(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    cs.mistake.append(S(*prose(incident.message)))
    runs = [f for f, _t in _facts_of(session, incident, "failure")]
    statuses = {f.status for f in runs if f.status}
    how = f" (each {status_words(statuses.pop())})" if len(statuses) == 1 else ""
    cs.mistake.append(S("The runs: ", ", ".join(f"turn {f.turn}" for f in runs), how,
                        "; between them only reads, no edit, install or change of arguments."))
    cs.assumptions.append(S("That running the step again as it was, after ", ref(turn),
                            ", could end differently."))


def _dangling_call(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    cs.mistake.append(S(*prose(incident.message)))
    for f, t in _facts_of(session, incident, "message", "reply", "event"):
        if f.kind == "message":
            cs.mistake.append(S("Instead of the result came the user's message at ", ref(t),
                                ": ", quote(f.quote, 200)))
        else:
            cs.mistake.append(S("Instead of the result came ", ref(t), "."))
    cs.assumptions.append(S("That the call at ", ref(turn), " had finished; nothing in the "
                            "transcript says what it did."))


def _user_correction(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    cs.mistake.append(S("The user wrote at ", ref(turn), ": ",
                        quote(turn.text if isinstance(turn, UserTurn) else "", 240)))
    for f, t in _facts_of(session, incident, "call", "claim"):
        if f.role == "corrected action":
            cs.mistake.append(S("It corrects the action at ", ref(t), ": ", _command(f.command),
                                "."))
        elif f.role == "corrected claim":
            cs.mistake.append(S("It corrects the claim at ", ref(t), ": ", quote(f.quote, 200)))
        elif f.role == "destroyed state":
            cs.mistake.append(S("The call at ", ref(t), " destroyed state: ",
                                _command(f.command), "."))
    cs.assumptions.append(S("What the assistant believed when it acted, which the user's words "
                            "at ", ref(turn), " contradict."))


CHAPTERS: dict[str, Chapter] = {
    "empty-response": _empty_response,
    "duplicate-launch": _duplicate_launch,
    "ignored-tool-error": _ignored_tool_error,
    "user-resend": _user_resend,
    "unverified-claim": _unverified_claim,
    "retry-loop": _retry_loop,
    "dangling-call": _dangling_call,
    "user-correction": _user_correction,
}


_RESEND_AFTER = {"provider error": " after a provider error", "aborted reply": " after an aborted reply",
                 "aborted turn with no text shown": " after an aborted reply",
                 "empty reply": " after an empty reply",
                 "failed call with no reply": " after a failed call"}
"""What answered the repeated message (the user-resend finding's fact), for its title."""


def title_for(session: Session, incident: Incident, rule_title: str) -> str:
    turn = session.turns[incident.turn - 1]
    n = incident.turn
    if incident.rule == "empty-response":
        before = ev.silence_after(session, incident)
        if before is not None and before[1].kind == "failure":
            prev = before[0]
            pair = session.call_for(prev)
            what = program(pair[1].command) if pair and pair[1].command else prev.name or "tool"
            return f"Silence after a failed {what}: the empty reply at turn {n}"
        return f"The empty reply at turn {n}"
    if incident.rule == "duplicate-launch":
        cmd = next((f.command for f in incident.facts if f.role == "relaunch"), None) or next(
            (c.command for c in calls_of(turn) if c.command), None)
        what = program(cmd) if cmd else "process"
        return f"A second {what} launched at turn {n} while the first was still running"
    if incident.rule == "ignored-tool-error":
        cmd = next((f.command for f in incident.facts if f.kind == "failure" and f.command),
                   None) or next((c.command for c in calls_of(turn) if c.command), None)
        what = program(cmd) if cmd else next((c.name for c in calls_of(turn)), "tool call")
        return f"The failed {what} at turn {n} that nobody dealt with"
    if incident.rule == "user-resend":
        answer = next((f.role for f in incident.facts if f.role in _RESEND_AFTER), "")
        return f"The user had to ask again at turn {n}{_RESEND_AFTER.get(answer, '')}"
    return f"{rule_title} (turn {n})"
