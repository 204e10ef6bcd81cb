"""List columns built in pieces (``forensics.frame._nested``) equal the column built whole.

The pieces exist for memory (issue 17): polars' list builder keeps a temporary per row. The
frame a user gets must not show it: the same values, the same dtype, one chunk.
"""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics import frame as frames

_WORDS = st.lists(st.text(max_size=6), max_size=4)
_ROWS_AROUND_A_PIECE = st.sampled_from([0, 1, frames.NESTED_CHUNK - 1, frames.NESTED_CHUNK,
                                        frames.NESTED_CHUNK + 1, 3 * frames.NESTED_CHUNK + 2])


@settings(max_examples=30, deadline=None)
@given(st.data(), _ROWS_AROUND_A_PIECE)
def test_a_list_of_strings_in_pieces_is_the_whole_column(data: st.DataObject, n: int) -> None:
    values = [data.draw(st.none() | _WORDS) for _ in range(n)]
    built = frames._nested("evidence", values, pl.List(pl.String()))
    whole = pl.Series("evidence", values, dtype=pl.List(pl.String()))
    assert built.dtype == whole.dtype
    assert built.n_chunks() == 1
    assert built.to_list() == values
    assert built.equals(whole)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.none() | st.lists(st.integers(-2**63, 2**63 - 1), max_size=3),
                min_size=frames.NESTED_CHUNK - 1, max_size=2 * frames.NESTED_CHUNK + 1))
def test_incident_rows_past_a_piece_give_the_same_frame(turns: list[list[int] | None]) -> None:
    rows = [{"code": f"FX00{i % 9}", "turn": i, "evidence_turns": t,
             "evidence": None if t is None else [str(x) for x in t]} for i, t in enumerate(turns)]
    got = frames.frame(rows, frames.INCIDENT_COLUMNS)
    assert got.schema == frames.schema(frames.INCIDENT_COLUMNS)
    assert got["evidence_turns"].to_list() == turns
    assert got["evidence"].to_list() == [r["evidence"] for r in rows]
    assert all(got[c].n_chunks() == 1 for c in got.columns)


def test_session_rule_counts_survive_the_pieces() -> None:
    n = frames.NESTED_CHUNK * 2 + 5
    rows = [{"session_id": f"s{i}", "rule_counts": [{"code": "FX001", "count": i}]}
            for i in range(n)]
    got = frames.frame(rows, frames.SESSION_COLUMNS)
    assert got["rule_counts"].to_list() == [r["rule_counts"] for r in rows]
    assert got["rule_counts"].n_chunks() == 1


_CELL = {
    "str": st.none() | st.text(max_size=8),
    "i64": st.none() | st.integers(-2**63, 2**63 - 1),
    "datetime": st.none() | st.floats(0, 253402300799.0),
    "list[str]": st.none() | _WORDS,
    "list[i64]": st.none() | st.lists(st.integers(-2**63, 2**63 - 1), max_size=3),
}


@settings(max_examples=30, deadline=None)
@given(st.data(), _ROWS_AROUND_A_PIECE)
def test_rows_held_as_tuples_give_the_frame_dict_rows_give(data: st.DataObject, n: int) -> None:
    """``read_incidents`` keeps rows as tuples (``as_tuple``) until the frame: every column
    kind, and keys a row lacks, come out as ``frame`` makes them from the dicts."""
    columns = frames.INCIDENT_COLUMNS
    assert set(columns.values()) <= set(_CELL)  # a new kind of column needs its cells here
    drawn = []
    for _ in range(min(n, 6)):  # a few rows drawn, repeated to the length around a piece
        row = {name: data.draw(_CELL[kind]) for name, kind in columns.items()}
        for gone in data.draw(st.sets(st.sampled_from(sorted(columns)), max_size=3)):
            del row[gone]
        drawn.append(row)
    rows = [dict(drawn[i % len(drawn)]) for i in range(n)]
    from_tuples = frames.frame_of_tuples([frames.as_tuple(r, columns) for r in rows], columns)
    assert from_tuples.equals(frames.frame(rows, columns))
    assert from_tuples.schema == frames.schema(columns)
