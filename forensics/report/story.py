"""Turn one incident into a case study: the facts a reader needs, pulled from the transcript.

The seeds in ``docs/examples/`` show the arc users expect: what was flagged and where, what the
session was doing, the chain of events, the mistake, what the user did, what one needs to know,
which assumptions failed, and the lesson. This module gathers those facts; templates only lay them
out. Every sentence is built from turns (quoted, with their turn number and anchor) or from the
rule file; where the transcript cannot settle something, the sentence says so ("as far as the
transcript shows"). Nothing here guesses at motives.

This module holds the shape (``CaseStudy``) and the sections every rule shares: the flagged
message, reaction and recovery, knowledge, related incidents. The story parts (stakes, the chain
of events, what the evidence shows, explanations, lesson, cost) live in ``narrative``; the
rule-specific mistake and assumptions in ``chapters``; sentence pieces in ``_prose``; what
commands and outputs say in ``_shell``; turn helpers in ``_turns``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.findings import Incident
from forensics.model import AssistantTurn, EventTurn, Session, ToolResultTurn, Turn, UserTurn
from forensics.report._prose import (
    Piece,
    S,
    Sentence,
    code,
    duration,
    gist,
    opening,
    para,
    prose,
    quote,
    ref,
    shorten,
    shorten_block,
)
from forensics.analysis.session import analysis_of
from forensics.report._shell import (
    flags_in,
    program,
    result_failed,
    result_status,
    strip_env,
    telling_lines,
)
from forensics.report._turns import (
    SessionMemo,
    calls_of,
    fact_labels,
    commands_of,
    location,
    same_as_earlier,
    summarize_call,
    user_words,
    when,
)
from forensics.report import narrative
from forensics.report.chapters import CHAPTERS, title_for


@dataclass
class Step:
    """One row of the chain of events."""

    ordinal: int
    anchor: str
    when: str
    label: str
    what: str
    flagged: bool = False
    evidence: bool = False


@dataclass
class Fact:
    """One line of the knowledge section: a label and the values it lists."""

    label: str
    values: list[str]
    block: bool = False
    """Values are multi-line commands, shown as code blocks rather than inline."""


@dataclass
class CaseStudy:
    incident: Incident
    title: str
    rule_title: str
    summary: str = ""
    rationale: str = ""
    """The first paragraph of the rule's rationale: why it matters (the rest defines the rule,
    which ``forensics rules CODE`` prints)."""
    remediation: str = ""
    falsepositives: list[str] = field(default_factory=list)
    flagged_kind: str = ""
    message_number: int | None = None
    location: str = ""
    when: str = ""
    flagged_quote: str | None = None
    """The flagged message's words, or None when it was empty (the intro says so)."""
    flagged_command: str | None = None
    flagged_empty: bool = False
    """The flagged message showed the user nothing (the intro says so; no quote)."""
    introduction: list[Sentence] = field(default_factory=list)
    timeline: list[Step] = field(default_factory=list)
    timeline_omitted: int = 0
    mistake: list[Sentence] = field(default_factory=list)
    reaction: list[Sentence] = field(default_factory=list)
    recovery: list[Sentence] = field(default_factory=list)
    """What the assistant did after the user's reaction, one sentence per action."""
    knowledge: list[Fact] = field(default_factory=list)
    assumptions: list[Sentence] = field(default_factory=list)
    related: list[Sentence] = field(default_factory=list)
    stakes: list[Sentence] = field(default_factory=list)
    """What the user was trying to do and what had been achieved (``narrative``)."""
    shows: list[Sentence] = field(default_factory=list)
    """What the evidence shows actually happened, each with its anchor (knowledge files)."""
    explanations: list[Sentence] = field(default_factory=list)
    """Possible explanations whose signal is in the transcript (knowledge files)."""
    lesson: list[Sentence] = field(default_factory=list)
    """The rule's remediation specialised by this incident's evidence."""
    cost: Any = None
    """``narrative.Cost``: minutes and tokens from the mistake to the recovery, or None."""
    signals: list[str] = field(default_factory=list)
    """Names of the signals found in the evidence (``readings``)."""
    flagged_gloss: str | None = None
    """The meaning of the flagged message when a knowledge list translates it."""
    cause: str = ""
    """The signal that says most about why (``narrative.cause``): what "the same cause" means."""
    same_as: Incident | None = None
    """The earlier incident of the session with the same rule and cause, which this case study
    points to instead of retelling its readings, explanations and lesson."""
    lesson_signal: str = ""
    quoted_requests: list[int] = field(default_factory=list)
    """Ordinals of the user requests the stakes quote: a later case study of the session does
    not quote the session's opening request again."""

    @property
    def file_stem(self) -> str:
        return f"{self.incident.code}-{safe_name(self.incident.anchor)}"


def safe_name(text: str) -> str:
    """A file-name-safe version of an anchor or session id."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "x"
    return cleaned[:80]


def next_reply(session: Session, ordinal: int, limit: int = 40) -> list[Turn]:
    """What the assistant did after ``ordinal`` until its first visible text, in order."""
    out: list[Turn] = []
    for turn in session.turns[ordinal: ordinal + limit]:
        if isinstance(turn, UserTurn):
            break
        if isinstance(turn, AssistantTurn):
            out.append(turn)
            if turn.text.strip() and not turn.tool_calls:
                break
        elif isinstance(turn, ToolResultTurn) and out:
            out.append(turn)
    return out


def describe_actions(session: Session, turns: Sequence[Turn], limit: int = 3) -> list[Sentence]:
    """Sentences for what the assistant did: its calls and their outcomes, then its words."""
    out: list[Sentence] = []
    for turn in turns:
        if len(out) >= limit:
            break
        if isinstance(turn, AssistantTurn):
            for call in turn.tool_calls[:2]:
                result = session.result_for(call)
                outcome: list[str | Piece] = []
                if result is not None:
                    lines = telling_lines(result.error or result.output, 1)
                    outcome = [", which ", result_status(session, result)]
                    if lines:
                        outcome += [": ", quote(lines[0], 160)]
                who = "the assistant" if not out else "it"
                out.append(S("At ", ref(turn), f" {who} ran ", code(shorten(
                    strip_env(call.command) if call.command
                    else f"{call.name} {summarize_call(call)}", 200)), *outcome, "."))
            if turn.text.strip() and not turn.tool_calls:
                who = "the assistant" if not out else "it"
                out.append(S("At ", ref(turn), f" {who} replied ", quote(opening(turn.text), 320)))
            elif not turn.visible:
                out.append(S("At ", ref(turn), " the assistant again showed nothing the user "
                             "could see."))
    return out[:limit + 1]


def reaction_section(cs: CaseStudy, session: Session, incident: Incident, start: int) -> None:
    """The user's next message after ``start`` and what the assistant did with it."""
    user = None
    for turn in session.turns[start: start + 80]:
        if isinstance(turn, UserTurn):
            user = turn
            break
    if user is None:
        last = max([start, *incident.evidence_turns])
        after = next_reply(session, last)
        if after:
            cs.reaction.append(S("The user did not write again; the assistant went on by "
                                 "itself:"))
            cs.recovery.extend(describe_actions(session, after))
        else:
            cs.reaction.append(S("The session ends there: the user did not write again."))
        return
    earlier = same_as_earlier(session, user)
    flagged = session.turns[incident.turn - 1]
    gap = ""
    if user.time is not None and flagged.time is not None and user.ordinal != flagged.ordinal:
        gap = f", {duration(user.time - flagged.time)} later"
    if user.ordinal == incident.turn:
        pass  # the flagged message is the reaction itself (a re-send): the mistake tells it
    elif earlier is not None:
        cs.reaction.append(S("The user re-sent their message from ", ref(earlier), gap, ", at ",
                             ref(user), ": ", *gist(user_words(user))))
    else:
        cs.reaction.append(S("The user wrote next", gap, ", at ", ref(user), ": ",
                             *gist(user_words(user), 300)))
    after = next_reply(session, user.ordinal)
    if after:
        cs.recovery.extend(describe_actions(session, after))
    else:
        cs.reaction.append(S("The transcript shows no assistant reply after that message."))


def knowledge_section(cs: CaseStudy, session: Session, incident: Incident,
                      steps: Sequence[Step]) -> None:
    ordinals = {s.ordinal for s in steps if s.flagged or s.evidence
                or (s.label in ("check", "kill", "launch") and s.ordinal > incident.turn)}
    commands: list[str] = []
    tools: list[str] = []
    for o in sorted(ordinals):
        turn = session.turns[o - 1]
        calls = calls_of(turn)
        if isinstance(turn, ToolResultTurn):
            pair = session.call_for(turn)
            calls = [pair[1]] if pair else []
        for call in calls:
            if call.name and call.name not in tools:
                tools.append(call.name)
            if call.command and call.command.strip() not in commands:
                commands.append(call.command.strip())
    if not commands and not tools:
        return
    flags: list[str] = []
    ports: list[str] = []
    programs: list[str] = []
    for cmd in commands:
        p = program(cmd)
        if p and p not in programs:
            programs.append(p)
        for f in flags_in(cmd):
            if f not in flags:
                flags.append(f)
    ledger = analysis_of(session).latest_ledger()
    for launch in ledger.launches if ledger is not None else []:
        if (launch.turn in ordinals or launch.result in ordinals) and launch.port is not None:
            how = ("" if launch.port_explicit or not launch.server
                   else f" (default of {launch.server})")
            if not any(x.split()[0] == str(launch.port) for x in ports):
                ports.append(f"{launch.port}{how}")
    for fact in incident.facts:  # the ports the finding names, and how it knows them
        if fact.kind == "port" and fact.port is not None:
            how = fact.quote
            label = str(fact.port) if how == "named in the command" else f"{fact.port} ({how})"
            if not any(x.split()[0] == str(fact.port) for x in ports):
                ports.append(label)
    errors: list[str] = []
    for o in sorted(ordinals):
        turn = session.turns[o - 1]
        if isinstance(turn, ToolResultTurn) and result_failed(session, turn):
            for line in telling_lines(turn.error or turn.output, 2, fallback=1):
                if line not in errors:
                    errors.append(line)
    if programs:
        cs.knowledge.append(Fact("Programs", programs[:8]))
    if tools:
        cs.knowledge.append(Fact("Agent tools", tools[:8]))
    shown = (cs.flagged_command or "").strip()
    listed = [c for c in commands if c != shown]
    if listed:
        cs.knowledge.append(Fact("Other commands involved" if shown else "Commands",
                                 [shorten_block(c) for c in listed[:5]], block=True))
    if flags:
        cs.knowledge.append(Fact("Flags", flags[:20]))
    if ports:
        cs.knowledge.append(Fact("Ports", ports[:6]))
    if errors:
        cs.knowledge.append(Fact("Errors seen", errors[:6]))


def related_section(cs: CaseStudy, others: Sequence[Incident], incident: Incident) -> None:
    mine = {incident.turn, *incident.evidence_turns}
    for other in others:
        if other is incident or other.fingerprint == incident.fingerprint:
            continue
        theirs = {other.turn, *other.evidence_turns}
        if mine & theirs:
            cs.related.append(S(f"{other.code} {other.rule} at ",
                                Piece("ref", f"turn {other.turn}", other.turn), " (",
                                code(other.anchor), "): ", *prose(other.message)))


def _introduction(cs: CaseStudy, session: Session, incident: Incident) -> None:
    """The finding's own message and what the flagged turn holds (where it is, which rule and
    severity: the facts table; the rule's prose: the session page)."""
    turn = session.turns[incident.turn - 1]
    cs.introduction.append(S(*prose(incident.message)))
    if isinstance(turn, AssistantTurn):
        if not turn.visible:
            cs.flagged_quote = None
            cs.flagged_empty = True
            cs.introduction.append(S("The message is empty: it holds no text and no tool call",
                                     " (only reasoning the user never saw)"
                                     if turn.reasoning.strip() else "", "."))
        else:
            cs.flagged_quote = turn.text.strip() or None
            cmds = commands_of(turn)
            if cmds:
                cs.flagged_command = cmds[0].strip()
            elif turn.tool_calls:
                c = turn.tool_calls[0]
                cs.flagged_command = f"{c.name} {summarize_call(c)}"
    elif isinstance(turn, UserTurn):
        cs.flagged_quote = user_words(turn)
    elif isinstance(turn, ToolResultTurn):
        cs.flagged_quote = turn.error or turn.output or None
    elif isinstance(turn, EventTurn):
        cs.flagged_quote = turn.text or None
        if not turn.text:
            cs.introduction.append(S("No assistant message exists for this point: the flagged "
                                     "turn is the harness closing the turn."))


def build(session: Session, incident: Incident, spec=None,
          others: Iterable[Incident] = (), memo: SessionMemo | None = None,
          earlier: Sequence[CaseStudy] = ()) -> CaseStudy:
    """The case study of ``incident`` in ``session``; ``spec`` is its RuleSpec when known.
    Pass one ``memo`` for all incidents of a session to label its turns only once, and the
    case studies told before this one as ``earlier`` so it does not retell what they said."""
    memo = memo or SessionMemo(session)
    if not 0 < incident.turn <= len(session.turns):
        return _unplaced(session, incident, spec)
    turn = session.turns[incident.turn - 1]
    rule_title = spec.title if spec is not None else incident.title
    cs = CaseStudy(
        incident=incident,
        title=title_for(session, incident, rule_title),
        rule_title=rule_title,
        summary=getattr(spec, "summary", "") or "",
        rationale=para(getattr(spec, "rationale", "")).split("\n\n")[0],
        remediation=para(getattr(spec, "remediation", "")),
        falsepositives=list(getattr(spec, "falsepositives", ()) or ()),
        flagged_kind=turn.kind,
        message_number=memo.message_number(turn),
        location=location(session, turn),
        when=when(turn),
    )
    _introduction(cs, session, incident)
    others = list(others)
    narrative.build(cs, session, incident, memo, others, earlier)
    chapter = CHAPTERS.get(incident.rule)
    if chapter is not None:
        chapter(cs, session, incident)
    else:
        cs.mistake.append(S(*prose(incident.message)))
    if cs.flagged_empty and len(cs.introduction) > 1 and len(cs.mistake) > 0:
        del cs.introduction[1]  # the chapter tells what the empty message holds: say it once
    if isinstance(turn, AssistantTurn) and turn.visible and turn.reasoning.strip():
        cs.mistake.insert(1, S("The assistant's reasoning in that message: ",
                               quote(turn.reasoning, 300)))
    reaction_start = incident.turn
    if incident.rule == "user-resend":
        reaction_start = incident.turn - 1  # the resend is the reaction; tell what came of it
    reaction_section(cs, session, incident, reaction_start)
    knowledge_section(cs, session, incident, cs.timeline)
    related_section(cs, others, incident)
    for name in ("mistake", "reaction", "recovery", "assumptions"):
        setattr(cs, name, narrative.translate(getattr(cs, name)))
    return cs


def _unplaced(session: Session, incident: Incident, spec) -> CaseStudy:
    """A finding that names a turn the session does not have (a rule bug): say so, plainly."""
    cs = CaseStudy(incident=incident, title=f"{incident.title} (turn {incident.turn})",
                   rule_title=spec.title if spec is not None else incident.title,
                   summary=getattr(spec, "summary", "") or "",
                   rationale=para(getattr(spec, "rationale", "")),
                   remediation=para(getattr(spec, "remediation", "")),
                   falsepositives=list(getattr(spec, "falsepositives", ()) or ()),
                   location=session.source)
    cs.introduction.append(S(f"The rule named turn {incident.turn}, but the session has "
                             f"{len(session.turns)} turns, so the finding cannot be placed: ",
                             *prose(incident.message)))
    cs.mistake.append(cs.introduction[-1])
    return cs
