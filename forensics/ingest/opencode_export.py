"""``opencode export`` JSON: one session, ``{info, messages: [{info, parts}]}``.

Also reads the 2.x "transfer" export, whose ``messages[]`` are typed 2.x rows
(``{type: "user"|"assistant"|…, id, …}``) instead of ``{info, parts}``. The document is parsed
once with orjson; the part semantics live in ``_opencode``. Extra top-level keys (``todos``)
carry nothing for the turn model and are skipped.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import orjson

from forensics.errors import IngestError
from forensics.ingest._opencode import SessionBuilder
from forensics.ingest._source import crashed, loads_document
from forensics.model import Session

FORMAT = "opencode-export"


def read_stream(stream: BinaryIO, source: str) -> list[Session]:
    data = stream.read()
    try:
        doc = loads_document(data)
    except orjson.JSONDecodeError as exc:
        what = "truncated JSON" if exc.pos >= len(data.rstrip()) else "not valid JSON"
        raise IngestError(source, f"{what} ({exc.msg})", line=exc.lineno) from None
    del data
    return [read_document(doc, source)]


def read_document(doc: Any, source: str) -> Session:
    """A parsed export document as a Session."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise IngestError(source, "not an opencode export: expected {info, messages: [...]}")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    messages = doc["messages"]
    session_id = info.get("id") or _first_session_id(messages)
    if not isinstance(session_id, str):
        raise IngestError(source, "opencode export without a session id")
    builder = SessionBuilder(session_id=session_id, format=FORMAT, source=source)
    builder.set_info(info)
    for index, item in enumerate(messages):
        try:  # one_record's isolation, without a context manager and its label per message
            _add(builder, index, item)
        except Exception as exc:  # a reader bug on one message must not lose the others
            builder.issues.append(crashed(source, None, exc, f"messages[{index}]"))
    return builder.build()


def _add(builder: SessionBuilder, index: int, item: Any) -> None:
    if not isinstance(item, dict):
        builder.issue(f"messages[{index}] is not an object")
    elif isinstance(item.get("info"), dict):
        parts = item.get("parts") if isinstance(item.get("parts"), list) else []
        builder.add_message(item["info"], [p for p in parts if isinstance(p, dict)])
    elif isinstance(item.get("type"), str):
        builder.add_v2(item["type"], item)
    else:
        builder.issue(f"messages[{index}] has neither info nor type")


def _first_session_id(messages: list[Any]) -> str | None:
    for item in messages:
        if isinstance(item, dict):
            info = item.get("info") if isinstance(item.get("info"), dict) else item
            if isinstance(info.get("sessionID"), str):
                return info["sessionID"]
    return None
