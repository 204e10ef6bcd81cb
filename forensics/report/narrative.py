"""The story parts of a case study: the stakes, the chain that matters, what the evidence shows,
why it may have happened, the lesson for this incident, and what it cost.

The seed write-ups open with the goal and the figure just reached, tell only the events that
lead to the incident and out of it, read the evidence ("the port was held by the earlier
launch"), weigh explanations against it and end on a lesson for this very incident. This module
does the same from the transcript alone: the sentences that read the evidence, the explanations
and the lessons come from ``reports/knowledge/`` (filled by ``readings``), the connecting words
quote turns with their references, and nothing is said that the evidence does not carry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from forensics.findings import Incident
from forensics.model import AssistantTurn, Session, ToolResultTurn, Turn, UserTurn
from forensics.report import evidence as ev
from forensics.report import knowledge, readings
from forensics.report._memo import TextMemo
from forensics.report._prose import Piece, S, Sentence, duration, gist, opening, quote, ref
from forensics.report._turns import SessionMemo, calls_of, step_text, user_words, when
from forensics.report.readings import Scene, Signal

if TYPE_CHECKING:
    from forensics.report.story import CaseStudy, Step

KEY_LABELS = frozenset({"user", "launch", "kill", "check", "failed call", "empty reply",
                        "provider error", "aborted reply", "abort", "interrupt", "api error",
                        "compaction"})


@dataclass
class Cost:
    """What the incident cost, from the transcript's own times and token counts."""

    start: Turn
    end: Turn
    end_is_recovery: bool
    end_label: str
    """``the recovery``, ``the user's next message`` (no answer came before the user had to
    write again) or ``the session's end``."""
    minutes: float | None
    assistant_messages: int
    tokens_in: int | None
    tokens_out: int | None

    @property
    def elapsed(self) -> str:
        return duration(self.minutes * 60) if self.minutes is not None else "unknown"


# -- the scene: what was asked, what the user did next, what the assistant did then ----------

def _substantial(turn: UserTurn) -> bool:
    return len(user_words(turn).split()) >= 5 or len(user_words(turn)) >= 40


def request_of(session: Session, incident: Incident) -> UserTurn | None:
    """The request that opened this part of the session: what the flagged turn was serving."""
    if incident.rule == "user-resend":
        earlier = ev.repeated_message(session, incident)
        if earlier is not None:
            return earlier
    fallback = None
    for turn in reversed(session.turns[:incident.turn - 1]):
        if isinstance(turn, UserTurn) and user_words(turn).strip():
            fallback = fallback or turn
            if _substantial(turn):
                return turn
    return fallback


def scene_of(session: Session, incident: Incident) -> Scene:
    from forensics.report.story import next_reply

    start = incident.turn - 1 if incident.rule == "user-resend" else incident.turn
    reaction = next((t for t in session.turns[start:start + 80] if isinstance(t, UserTurn)),
                    None)
    recovery: list[Turn] = []
    if reaction is not None:
        recovery = next_reply(session, reaction.ordinal)
    return Scene(request=request_of(session, incident), reaction=reaction, recovery=recovery)


# -- the chain of events: relevance from the evidence, not a window --------------------------

def relevant_ordinals(session: Session, incident: Incident, scene: Scene,
                      memo: SessionMemo, others: Sequence[Incident] = ()) -> set[int]:
    """The flagged turn, its evidence, the result it answered and the user message before it,
    the turns of the incidents that share a turn with it, what all those reference (a call's
    result, a result's call), the key turns between the first of them and the incident, the
    request, the user's reaction and the assistant's recovery with its results."""
    core = {incident.turn, *(o for o in incident.evidence_turns if o > 0)}
    before = ev.result_before(session, incident)
    if before is not None:
        core.add(before.ordinal)
    last_user = next((t for t in reversed(session.turns[:incident.turn - 1])
                      if isinstance(t, UserTurn)), None)
    if last_user is not None and incident.rule != "user-resend":
        core.add(last_user.ordinal)
    mine = set(core)
    for other in others:
        theirs = {other.turn, *other.evidence_turns}
        if other.fingerprint != incident.fingerprint and mine & theirs:
            core |= {o for o in theirs if 0 < o <= incident.turn}
    keep = set(core)
    for o in core:
        keep |= _references(session, session.turns[o - 1])
    first = min(core)
    for turn in session.turns[first - 1:incident.turn]:
        if memo.label(turn) in KEY_LABELS:
            keep.add(turn.ordinal)
    for turn in [scene.request, scene.reaction, *scene.recovery]:
        if turn is not None:
            keep.add(turn.ordinal)
            keep |= _references(session, turn)
    return {o for o in keep if 0 < o <= len(session.turns)}


def _references(session: Session, turn: Turn) -> set[int]:
    out: set[int] = set()
    for call in calls_of(turn):
        result = session.result_for(call)
        if result is not None:
            out.add(result.ordinal)
    if isinstance(turn, ToolResultTurn):
        pair = session.call_for(turn)
        if pair:
            out.add(pair[0].ordinal)
    return out


def chain(session: Session, incident: Incident, scene: Scene, memo: SessionMemo,
          others: Sequence[Incident] = (), limit: int = 30) -> tuple[list[Step], int]:
    from forensics.report.story import Step

    evidence = set(incident.evidence_turns)
    failures = ev.failed_results(session, incident)
    shown = sorted(relevant_ordinals(session, incident, scene, memo, others))
    omitted = 0
    if len(shown) > limit:
        keep = sorted(shown, key=lambda o: (not (o == incident.turn or o in evidence),
                                            abs(o - incident.turn)))[:limit]
        omitted = len(shown) - limit
        shown = sorted(keep)
    rows = []
    for o in shown:  # only the rows shown are worded
        turn = session.turns[o - 1]
        if o in failures:  # the finding says how it failed: its words, not another judgement
            label, text = "failed call", failures[o]
        else:
            label = memo.label(turn) or turn.kind.replace("_", " ")
            text = step_text(session, turn)
        rows.append(Step(o, turn.anchor, when(turn), label, text, o == incident.turn,
                         o in evidence))
    return rows, omitted


# -- the stakes --------------------------------------------------------------------------------

def _figure_pattern() -> re.Pattern[str]:
    return _figure_pattern_of(tuple(knowledge.words().figure_units))


@cache
def _figure_pattern_of(units: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(re.escape(u) for u in sorted(units, key=len, reverse=True)) or r"(?!)"
    return re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:" + alt + r")(?![A-Za-z])")


def figures_in(text: str, limit: int = 3) -> list[str]:
    """Sentences of ``text`` that state a figure: a number with a unit the knowledge knows."""
    return list(_figures(text or "", limit, _figure_pattern()))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"\*\*|__|`")
_DIGIT = re.compile(r"\d")
"""Every figure starts with a digit, and taking the markup off a sentence adds none: a
sentence without one is passed over before it is cleaned and searched."""


def _figures_in(text: str, limit: int, pattern: re.Pattern[str]) -> tuple[str, ...]:
    out: list[str] = []
    text = text or ""
    if not _DIGIT.search(text):
        return ()
    for chunk in _SENTENCE_END.split(text):
        if not _DIGIT.search(chunk):
            continue
        chunk = _MARKUP.sub("", chunk).strip(" -*#|>")
        if 8 < len(chunk) <= 400 and pattern.search(chunk) and not chunk.startswith("$"):
            out.append(chunk)
            if len(out) == limit:
                break
    return tuple(out)


_figures = TextMemo(_figures_in)
"""Once per text and session: the stakes of every case study read back over the same
assistant messages."""


def opening_request(session: Session, incident: Incident, scene: Scene) -> UserTurn | None:
    """The session's opening request when the stakes quote it: substantial, before the
    incident, and not the request this incident served (told then on its own)."""
    first = next((t for t in session.turns if isinstance(t, UserTurn)
                  and user_words(t).strip()), None)
    request = scene.request
    if first is not None and (request is None or first.ordinal != request.ordinal) \
            and _substantial(first) and first.ordinal < incident.turn:
        return first
    return None


def stakes(session: Session, incident: Incident, scene: Scene,
           told_opening: bool = False) -> list[Sentence]:
    """What the user was trying to do and what had been achieved, in the transcript's words.
    ``told_opening``: an earlier case study of the session quoted its opening request
    already, so this one starts at the request it served."""
    out: list[Sentence] = []
    request = scene.request
    first = opening_request(session, incident, scene)
    if first is not None and not told_opening:
        titled = [", titled ", quote(session.title, 100), ","] if session.title else []
        out.append(S("The session", *titled, " began at ", ref(first), " with ",
                     *gist(user_words(first), 200), "."))
    if request is not None:
        lead = "Then, at " if out else "At "
        verb = "the user asked" if incident.rule != "user-resend" else "the user first asked"
        out.append(S(lead, ref(request), f", {verb}: ", *gist(user_words(request), 260)))
    reports = _reported(session, incident.turn)
    pieces: list[Piece | str] = []
    for i, (turn, said, figs) in enumerate(reports):
        pieces += ["By " if not i else ", and by ", ref(turn),
                   " the assistant had reported " if not i else " ", quote(said, 240)]
        extra = [f for f in figs if f not in said][:1]
        if extra:
            pieces += [" (", quote(extra[0], 160), ")"]
    if pieces:
        out.append(S(*pieces, "."))
    return out


def _reported(session: Session, before: int) -> list[tuple[AssistantTurn, str, list[str]]]:
    """What the assistant had reported achieving before turn ``before``: its
    last two visible texts stating figures, in order, else its latest visible text."""
    found: list[tuple[AssistantTurn, str, list[str]]] = []
    latest = None
    for turn in reversed(session.turns[max(0, before - 300):before - 1]):
        if not isinstance(turn, AssistantTurn) or not turn.text.strip() or turn.error:
            continue
        latest = latest or turn
        figs = figures_in(turn.text)
        if figs:
            head = opening(turn.text)
            found.append((turn, head if figures_in(head) else figs[0], figs))
            if len(found) == 2:
                break
    if not found and latest is not None:
        found.append((latest, opening(latest.text), []))
    return list(reversed(found))


# -- readings, explanations, lesson ---------------------------------------------------------

def shows(code: str, found: dict[str, Signal], told: frozenset[str] = frozenset()
          ) -> list[Sentence]:
    """What the evidence shows actually happened: the knowledge file's sentence per signal;
    signals in ``told`` were shown by an earlier case study of the session and are left out."""
    out: list[Sentence] = []
    for name, template in knowledge.for_rule(code).shows.items():
        if name in found and name not in told:
            sentence = knowledge.fill(template, found[name].values)
            if sentence:
                out.append(sentence)
    return out


def explanations(code: str, found: dict[str, Signal], told: frozenset[str] = frozenset()
                 ) -> list[Sentence]:
    """The possible explanations whose signal is in the transcript, in the file's order, less
    those an earlier case study of the session weighed already (``told``)."""
    out: list[Sentence] = []
    for item in knowledge.for_rule(code).explanations:
        if item.signal in found and item.signal not in told:
            sentence = knowledge.fill(item.because, found[item.signal].values)
            if sentence:
                out.append(sentence)
    return out


def cause(code: str, found: dict[str, Signal]) -> str:
    """The signal that says most about why: the first explanation whose signal is present,
    else the first signal the knowledge file reads; "" when the file knows none of them."""
    rule = knowledge.for_rule(code)
    for item in rule.explanations:
        if item.signal in found:
            return item.signal
    return next((name for name in rule.shows if name in found), "")


def lesson(code: str, found: dict[str, Signal], told: str | None = None
           ) -> tuple[str, list[Sentence]]:
    """The first of the rule's lessons whose signal is present, with that signal. None when
    only the rule's remediation would apply (the session page states it once, under the rule)
    or when ``told`` (the lesson signal of an earlier case study with the same cause) is it."""
    for item in knowledge.for_rule(code).lessons:
        if item.signal in found:
            sentence = knowledge.fill(item.text, found[item.signal].values)
            if sentence:
                return item.signal, ([] if item.signal == told else [sentence])
    return "", []


def retold(code: str, signal: str, found: dict[str, Signal], first: CaseStudy
           ) -> Sentence | None:
    """The one sentence a later case study of the same cause says instead of retelling it:
    what is the same, pointing to ``first`` (turn and anchor), then this incident's values."""
    point: list[Piece | str] = [Piece("ref", f"turn {first.incident.turn}", first.incident.turn),
                                " (", Piece("code", first.incident.anchor), ")"]
    values = {**(found[signal].values if signal in found else {}), "first": point}
    template = knowledge.for_rule(code).again.get(signal) or knowledge.words().same_cause
    return knowledge.fill(template, values) if template else None


# -- what it cost --------------------------------------------------------------------------------

def cost(session: Session, incident: Incident, scene: Scene) -> Cost | None:
    """Time and tokens from the mistake to the recovery (the assistant's first visible answer
    after the user's reaction); without one, to the user's next message after the reaction
    (they had to step in again), or to the session's end."""
    if not session.turns:
        return None
    start: Turn = ev.flagged(session, incident)
    if incident.rule == "user-resend":
        between = ev.replies_between(session, incident)
        if between:
            start = between[0]
    answer = next((t for t in reversed(scene.recovery) if isinstance(t, AssistantTurn)
                   and t.text.strip() and not t.tool_calls), None)
    label = "the recovery"
    end = answer
    if end is None and scene.reaction is not None:
        end = next((t for t in session.turns[scene.reaction.ordinal:]
                    if isinstance(t, UserTurn)), None)
        label = "the user's next message"
    if end is None:
        end, label = session.turns[-1], "the session's end"
    if end.ordinal < start.ordinal:
        return None
    span = session.turns[start.ordinal - 1:end.ordinal]
    replies = [t for t in span if isinstance(t, AssistantTurn)]
    t_in = [t.tokens_in for t in replies if t.tokens_in is not None]
    t_out = [t.tokens_out for t in replies if t.tokens_out is not None]
    minutes = None
    if start.time is not None and end.time is not None:
        minutes = max(0.0, (end.time - start.time) / 60)
    return Cost(start, end, answer is not None, label, minutes, len(replies),
                sum(t_in) if t_in else None, sum(t_out) if t_out else None)


# -- translation ---------------------------------------------------------------------------------

def translate(sentences: Iterable[Sentence]) -> list[Sentence]:
    """Each quote a knowledge list can translate gets its meaning after it (“重试” -> retry)."""
    out: list[Sentence] = []
    for sentence in sentences:
        pieces: list[Piece] = []
        for piece in sentence:
            pieces.append(piece)
            if piece.kind == "quote":
                word = readings.gloss(piece.text)
                if word is not None:
                    pieces.append(Piece("words", f" ({word.lang} for “{word.means}”)"))
        out.append(tuple(pieces))
    return out


def gloss_line(text: str | None) -> str | None:
    word = readings.gloss(text or "")
    return f"{word.lang} for “{word.means}”" if word is not None else None


def build(cs: CaseStudy, session: Session, incident: Incident, memo: SessionMemo,
          others: Sequence[Incident] = (), earlier: Sequence[CaseStudy] = ()) -> None:
    """Fill the story parts of ``cs``; ``others`` are the session's other incidents, ``earlier``
    the case studies of the session told before this one: what they said (the session's
    opening, a cause of the same rule with its readings, explanations and lesson) is pointed
    to in one sentence, not said again, so the words go to what differs."""
    scene = scene_of(session, incident)
    cs.timeline, cs.timeline_omitted = chain(session, incident, scene, memo, others)
    found = readings.signals(session, incident, scene)
    cs.signals = sorted(found)
    cs.cause = cause(incident.code, found)
    quoted = {o for e in earlier for o in e.quoted_requests}
    opening = opening_request(session, incident, scene)
    told_opening = opening is not None and opening.ordinal in quoted
    cs.quoted_requests = sorted({t.ordinal for t in (opening, scene.request) if t is not None})
    cs.stakes = translate(stakes(session, incident, scene, told_opening))
    same = [e for e in earlier if e.incident.code == incident.code and cs.cause
            and e.cause == cs.cause]
    told = frozenset(s for e in same for s in e.signals)
    pointer = retold(incident.code, cs.cause, found, same[0]) if same else None
    cs.same_as = same[0].incident if same else None
    cs.shows = translate(([pointer] if pointer else []) + shows(incident.code, found, told))
    cs.explanations = translate(explanations(incident.code, found, told))
    cs.lesson_signal, taught = lesson(incident.code, found,
                                      same[0].lesson_signal if same else None)
    cs.lesson = translate(taught)
    cs.cost = cost(session, incident, scene)
    cs.flagged_gloss = gloss_line(cs.flagged_quote)


def join(sentences: Sequence[Sentence]) -> Sentence:
    """Sentences as one paragraph: a story reads in paragraphs, not one fact a line."""
    out: list[Piece] = []
    for i, sentence in enumerate(sentences):
        if i:
            out.append(Piece("text", " "))
        out.extend(sentence)
        last = sentence[-1].text.rstrip() if sentence else ""
        if last and last[-1] not in ".!?:”\"" and not last.endswith("…"):
            out.append(Piece("text", "."))
    return tuple(out)
