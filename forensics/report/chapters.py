"""Per-rule chapters of a case study: the critical mistake and the assumptions that failed.

One function per rule slug fills the rule-specific sections of a ``CaseStudy`` from the turns
the finding names; a rule without a chapter gets its finding's message. Titles name the failure
in the session's own terms (the program, the turn).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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
from forensics.report._prose import (
    Piece,
    S,
    Sentence,
    code,
    duration,
    gist,
    joined_quotes,
    norm,
    quote,
    ref,
    shorten,
)
from forensics.report._shell import (
    checks,
    kills,
    launches,
    ports_in,
    ports_named,
    program,
    result_failed,
    result_status,
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
    prev = session.turns[incident.turn - 2] if incident.turn >= 2 else None
    failed = prev if isinstance(prev, ToolResultTurn) else None
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
    if failed is not None:
        pair = session.call_for(failed)
        cmd = pair[1].command if pair else None
        lines = telling_lines(failed.error or failed.output, 2)
        status = result_status(failed)
        holder = pair[0] if pair else None
        if cmd and holder is not None and launches(cmd, pair[1]):
            subject: list[Piece | str] = ["the ", code(program(cmd)), " launch at ",
                                          ref(holder)]
        elif cmd:
            subject = [code(shorten(strip_env(cmd), 160))]
        else:
            subject = [failed.name or "a tool call"]
        cs.mistake.append(S(
            "It came right after the result of ", *subject,
            *([" (result at ", ref(failed), ")"] if holder is not None and
              holder.ordinal != failed.ordinal and launches(cmd, pair[1]) else
              [" at ", ref(failed)]),
            f", which {status}",
            *([": ", *joined_quotes(lines)] if lines and result_failed(failed) else []), "."))
        if result_failed(failed):
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


def _duplicate_launch(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    new_cmds = [(c, c.command) for c in calls_of(turn) if launches(c.command, c)]
    new_call, new_cmd = new_cmds[0] if new_cmds else (None, (commands_of(turn) or [None])[0])
    earlier = None
    for o in incident.evidence_turns:
        t = session.turns[o - 1]
        if o < incident.turn and any(launches(c.command, c) for c in calls_of(t)):
            earlier = t
            break
    if earlier is not None:
        old = next((c.command for c in calls_of(earlier) if launches(c.command, c)), None)
        same = bool(old and new_cmd and norm(old) == norm(new_cmd))
        what = code(program(new_cmd)) if new_cmd else "a long-running process"
        if same:
            cs.mistake.append(S("At ", ref(turn), " the assistant sent the launch of ", what,
                                " from ", ref(earlier), " again, unchanged."))
        elif old and new_cmd and program(old) == program(new_cmd):
            cs.mistake.append(S("At ", ref(turn), " the assistant started ", what, " again; "
                                "the same kind of process had been started at ", ref(earlier),
                                " with ", code(shorten(strip_env(old), 200)), "."))
        else:
            cs.mistake.append(S("At ", ref(turn), " the assistant started ", what, " while the "
                                "process it had started at ", ref(earlier),
                                *([" with ", code(shorten(strip_env(old), 200))] if old else []),
                                " could still be running."))
        between = [t for t in session.turns[earlier.ordinal: turn.ordinal - 1]]
        kill_turns = [t for t in between if any(kills(c.command) for c in calls_of(t))]
        if kill_turns:
            k = kill_turns[-1]
            cmd = next(c.command for c in calls_of(k) if kills(c.command))
            cs.mistake.append(S("Between the two launches the assistant ran ",
                                code(shorten(strip_env(cmd or ""), 160)), " at ", ref(k),
                                ", but the finding treats the first process as still running "
                                "after it: as far as the transcript shows, that kill did not "
                                "reach it."))
        else:
            cs.mistake.append(S("Nothing between the two launches stopped the first one: no "
                                "kill aimed at it and no output showing it had exited, as far "
                                "as the transcript shows."))
        history = _launch_history(session, program(new_cmd) if new_cmd else "", turn.ordinal)
        if len(history) > 1:
            cs.mistake.append(S(f"It was launch number {len(history) + 1} of ",
                                code(program(new_cmd or "")), " in the session: ",
                                *_history_pieces(history), "."))
        users = [t for t in between if isinstance(t, UserTurn)]
        said: list[Piece | str] = []
        for u in users[-2:]:
            said += [", and at " if said else "In between, the user wrote at ", ref(u), ": ",
                     *gist(user_words(u), 200)]
        if said:
            cs.mistake.append(S(*said))
        checked = [t for t in between if any(checks(c.command) for c in calls_of(t))]
        port_list = ports_in(new_cmd or "")
        if not checked:
            where = f" on port {port_list[0][0]}" if port_list else ""
            cs.assumptions.append(S("That the earlier process was gone and a new one could start"
                                    f"{where}: no check of the port, the process list or a "
                                    "health endpoint appears between the two launches."))
        else:
            cs.assumptions.append(S("That the earlier process was gone, although checks ran in "
                                    "between (", ref(checked[-1]), ")."))
        later_user = next((t for t in session.turns[turn.ordinal:]
                           if isinstance(t, UserTurn)), None)
        if users and later_user is not None and users[-1].ordinal in incident.evidence_turns:
            cs.assumptions.append(S("That the user's ", quote(user_words(users[-1]), 120),
                                    " at ", ref(users[-1]), " asked for a new launch. The "
                                    "user's next message, at ", ref(later_user), ", reads ",
                                    *gist(user_words(later_user), 200)))
    else:
        cs.mistake.append(S("At ", ref(turn), " the assistant started ",
                            code(shorten(new_cmd, 200)) if new_cmd else "a process",
                            " while an equivalent process it had started was still running, as "
                            "far as the transcript shows."))
    if new_call is not None:
        result = session.result_for(new_call)
        ports = ports_in(new_cmd or "")
        if result is not None:
            lines = telling_lines(result.error or result.output, 2)
            cs.mistake.append(S("At ", ref(result), " the relaunch's result shows it ",
                                result_status(result),
                                *([": ", *joined_quotes(lines)] if lines else
                                  [" with no output"]), "."))
            if not ports:  # a conflict message names the port the command did not
                ports = [(p, "named in the relaunch's output") for p in ports_named(
                    result.error or result.output)][:1]
        if ports:
            port, how = ports[0]
            cs.mistake.append(S("Both compete for port ", code(port),
                                f" ({how})" if how != "explicit" else "", ": only one process "
                                "can hold it, so the second launch can at best fail and at "
                                "worst disturb the running one."))


def _launch_history(session: Session, prog: str, before: int) -> list[tuple[Turn, str]]:
    """Earlier launches of ``prog`` and what became of each, as the transcript shows it."""
    launches_: list[Turn] = []
    for t in session.turns[: before - 1]:
        if any(launches(c.command, c) and c.command and program(c.command) == prog
               for c in calls_of(t)):
            launches_.append(t)
    out: list[tuple[Turn, str]] = []
    for i, t in enumerate(launches_):
        end = launches_[i + 1].ordinal if i + 1 < len(launches_) else before
        fate = "no kill or exit recorded before the relaunch" if i + 1 == len(launches_) else \
            "no kill or exit recorded before the next launch"
        for later in session.turns[t.ordinal: end - 1]:
            if isinstance(later, ToolResultTurn) and later.anchor == t.anchor \
                    and result_failed(later):
                fate = f"its launch {result_status(later)}"
                break
            if any(kills(c.command) for c in calls_of(later)):
                fate = f"killed at turn {later.ordinal}"
                break
        out.append((t, fate))
    return out


def _history_pieces(history: list[tuple[Turn, str]]) -> list[Piece | str]:
    out: list[Piece | str] = []
    for i, (t, fate) in enumerate(history):
        if i:
            out.append("; ")
        out += [ref(t), f" ({fate})"]
    return out


def _ignored_tool_error(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    failed: list[tuple[ToolCall, ToolResultTurn]] = []
    for call in calls_of(turn):
        result = session.result_for(call)
        if result is not None and result_failed(result):
            failed.append((call, result))
    if not failed and isinstance(turn, ToolResultTurn):
        pair = session.call_for(turn)
        if pair:
            failed.append((pair[1], turn))
    for call, result in failed[:2]:
        lines = telling_lines(result.error or result.output, 3)
        named: list[Piece | str] = (
            ["The ", code(program(call.command)), " launch"]
            if call.command and launches(call.command, call) else
            ["The call ", code(shorten(strip_env(call.command) if call.command
                                       else f"{call.name} {summarize_call(call)}", 200))])
        cs.mistake.append(S(*named,
                            " at ", ref(turn), f" {result_status(result)}",
                            *([": ", *joined_quotes(lines)] if lines else []), "."))
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
                                "says it ", result_status(failed[0][1]), "."))


def _user_resend(cs: CaseStudy, session: Session, incident: Incident) -> None:
    turn = session.turns[incident.turn - 1]
    earlier = next((session.turns[o - 1] for o in incident.evidence_turns
                    if o < incident.turn and isinstance(session.turns[o - 1], UserTurn)), None)
    words = user_words(turn) if isinstance(turn, UserTurn) else ""
    between = [session.turns[o - 1] for o in incident.evidence_turns
               if earlier is not None and earlier.ordinal < o < incident.turn]
    replies = [t for t in between if isinstance(t, (AssistantTurn, EventTurn, ToolResultTurn))]
    if not replies and earlier is not None:
        replies = [t for t in session.turns[earlier.ordinal: incident.turn - 1]
                   if isinstance(t, (AssistantTurn, EventTurn))]
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
        elif isinstance(t, ToolResultTurn) and result_failed(t):
            cs.mistake.append(S("In between, a tool call failed at ", ref(t), "."))
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


CHAPTERS: dict[str, Chapter] = {
    "empty-response": _empty_response,
    "duplicate-launch": _duplicate_launch,
    "ignored-tool-error": _ignored_tool_error,
    "user-resend": _user_resend,
}


def title_for(session: Session, incident: Incident, rule_title: str) -> str:
    turn = session.turns[incident.turn - 1]
    n = incident.turn
    prev = session.turns[n - 2] if n >= 2 else None
    if incident.rule == "empty-response":
        if isinstance(prev, ToolResultTurn) and result_failed(prev):
            pair = session.call_for(prev)
            what = program(pair[1].command) if pair and pair[1].command else prev.name or "tool"
            return f"Silence after a failed {what}: the empty reply at turn {n}"
        return f"The empty reply at turn {n}"
    if incident.rule == "duplicate-launch":
        cmd = next((c.command for c in calls_of(turn) if c.command), None)
        what = program(cmd) if cmd else "process"
        return f"A second {what} launched at turn {n} while the first was still running"
    if incident.rule == "ignored-tool-error":
        cmd = next((c.command for c in calls_of(turn) if c.command), None)
        what = program(cmd) if cmd else next((c.name for c in calls_of(turn)), "tool call")
        return f"The failed {what} at turn {n} that nobody dealt with"
    if incident.rule == "user-resend":
        between = [session.turns[o - 1] for o in incident.evidence_turns if o < n]
        why = ""
        for t in between:
            if isinstance(t, AssistantTurn):
                why = (" after a provider error" if t.error is not None else
                       " after an aborted reply" if t.aborted else
                       " after an empty reply" if not t.visible else why)
        return f"The user had to ask again at turn {n}{why}"
    return f"{rule_title} (turn {n})"
