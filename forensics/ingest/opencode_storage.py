"""opencode's JSON storage tree (mid-2025 → v1.1): one file per session, message and part.

Layout (ids come from the file paths, as opencode's own migration does)::

    session/<projectID>/<sessionID>.json     Session.Info
    message/<sessionID>/<messageID>.json     Message.Info
    part/<messageID>/<partID>.json           Part

and the older per-project layout ``project/<slug>/storage/session/{info,message,part}/…``
(``info/<ses>.json``, ``message/<ses>/<msg>.json``, ``part/<ses>/<msg>/<prt>.json``). Message and
part ids sort chronologically. Every session, subagent children included, becomes its own
``Session`` (``parent_id`` set from ``parentID``). Other files (``project/``, ``todo/``,
``session_diff/``, ``permission/``, ``session_share/``, ``migration``, ``tool-output/``) carry
nothing for the turn model and are skipped. A file that is not valid JSON becomes a ``ReadIssue``
naming it; the rest of the tree is still read.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson

from forensics import knowledge_cache
from forensics.errors import IngestError
from forensics.ingest._opencode import SessionBuilder
from forensics.ingest._source import Tree, one_record
from forensics.model import ReadIssue, Session

FORMAT = "opencode-storage"

_SESSION = knowledge_cache.compile(  # or session/info/
    r"(?:^|/)session/[^/]+/(?P<ses>ses_[^/]+)\.json$")
_MESSAGE = knowledge_cache.compile(r"(?:^|/)message/(?P<ses>ses_[^/]+)/(?P<msg>[^/]+)\.json$")
_PART = knowledge_cache.compile(
    r"(?:^|/)part/(?:ses_[^/]+/)?(?P<msg>msg_[^/]+)/(?P<prt>[^/]+)\.json$")


def read_tree(tree: Tree) -> list[Session]:
    index = _Index(tree)
    if not index.sessions:
        raise IngestError(tree.label, "no opencode sessions in this storage tree")
    sessions: list[Session] = []
    lost: list[ReadIssue] = []
    for ses in index.sessions:  # one session the reader chokes on never costs the others
        with one_record(lost, tree.label, what=f"session {ses}"):
            sessions.append(index.build(ses))
    problems = index.loose_issues + lost + list(getattr(tree, "problems", []))
    if not sessions:
        raise IngestError(tree.label, str(problems[0]) if problems else
                          "no opencode sessions in this storage tree")
    sessions.sort(key=lambda s: (s.started is None, s.started or 0.0, s.id))
    sessions[0].issues.extend(problems)
    return sessions


class _Index:
    """Which files belong to which session and message; parses them lazily."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.session_files: dict[str, str] = {}
        self.message_files: dict[str, dict[str, str]] = defaultdict(dict)
        self.part_files: dict[str, dict[str, str]] = defaultdict(dict)
        self.loose_issues: list[ReadIssue] = []
        for rel in tree.files():
            if not rel.endswith(".json"):
                continue
            if m := _PART.search(rel):
                self.part_files[m["msg"]][m["prt"]] = rel
            elif m := _MESSAGE.search(rel):
                self.message_files[m["ses"]][m["msg"]] = rel
            elif m := _SESSION.search(rel):
                self.session_files[m["ses"]] = rel
        self.sessions = sorted(set(self.session_files) | set(self.message_files))
        self._msg_owner = {msg: ses for ses, msgs in self.message_files.items() for msg in msgs}
        orphans = [msg for msg in self.part_files if msg not in self._msg_owner]
        if orphans:
            n = sum(len(self.part_files[m]) for m in orphans)
            self.loose_issues.append(ReadIssue(
                path=tree.label,
                message=f"{n} part files belong to {len(orphans)} messages with no message file"))

    def path(self, rel: str) -> str:
        return f"{self.tree.label.rstrip('/')}/{rel}"

    def load(self, rel: str, builder: SessionBuilder) -> dict[str, Any] | None:
        try:
            raw = self.tree.read_bytes(rel)
        except OSError as exc:
            builder.issue(f"cannot read ({exc.strerror or exc})", path=self.path(rel))
            return None
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            what = "truncated JSON" if exc.pos >= len(raw.rstrip()) else "not valid JSON"
            builder.issue(f"{what} ({exc.msg})", path=self.path(rel), line=exc.lineno)
            return None
        if not isinstance(obj, dict):
            builder.issue("JSON but not an object", path=self.path(rel))
            return None
        return obj

    def build(self, ses: str) -> Session:
        builder = SessionBuilder(session_id=ses, format=FORMAT, source=self.tree.label)
        if ses in self.session_files:
            info = self.load(self.session_files[ses], builder)
            if info is not None:
                builder.set_info({**info, "id": ses})
        for msg in sorted(self.message_files.get(ses, {})):
            rel = self.message_files[ses][msg]
            info = self.load(rel, builder)
            if info is None:
                if parts := self.part_files.get(msg):
                    folder = self.path(next(iter(parts.values()))).rsplit("/", 1)[0]
                    builder.issue(f"{len(parts)} parts of the unreadable message skipped",
                                  path=folder)
                continue
            info = {**info, "id": msg, "sessionID": ses}
            parts, files = [], {}
            for prt in sorted(self.part_files.get(msg, {})):
                prel = self.part_files[msg][prt]
                part = self.load(prel, builder)
                if part is None:
                    continue
                parts.append({**part, "id": prt, "messageID": msg})
                files[prt] = self.path(prel)
            with one_record(builder.issues, self.path(rel)):
                builder.add_message(info, parts, file=self.path(rel), part_files=files)
        return builder.build()

