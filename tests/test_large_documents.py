"""A whole-document session past orjson's input limit (about 2 GiB) is read with the standard
library instead of being called invalid JSON (forensics.ingest._source.loads_document).

Nobody writes a 2 GiB fixture: orjson is made to refuse the bytes the way it refuses a
document that large, and the session must come out the same as orjson reads it."""

from pathlib import Path

import orjson
import pytest

from forensics.ingest import _source, load

FIXTURES = Path(__file__).parent / "fixtures" / "ingest"


@pytest.mark.parametrize("name", ["opencode_export_v1.json", "gemini_legacy_2026.json"])
def test_a_document_orjson_refuses_for_size_is_still_read(name, monkeypatch):
    expected = load(FIXTURES / name)
    whole = (FIXTURES / name).read_bytes()
    monkeypatch.setattr(_source.orjson, "loads", _refusing(orjson.loads, len(whole)))
    got = load(FIXTURES / name)
    assert got == expected
    assert got[0].turns


def _refusing(real, size):
    """orjson.loads, refusing input of ``size`` bytes and more as it refuses 2 GiB."""
    def loads(data):
        if len(data) >= size:
            raise orjson.JSONDecodeError(
                "Not enough memory to allocate buffer for parsing", "", 0)
        return real(data)
    return loads


def test_a_broken_document_past_the_limit_is_still_reported_broken(tmp_path, monkeypatch):
    bad = tmp_path / "ses_broken.json"
    bad.write_bytes(b'{"info": {"id": "ses_x"}, "messages": [' + b" " * 3000 + b"{,]}")
    monkeypatch.setattr(_source.orjson, "loads", _refusing(orjson.loads, 3000))
    with pytest.raises(Exception) as err:
        load(bad)
    assert "JSON" in str(err.value)
    assert "Not enough memory" not in str(err.value)
