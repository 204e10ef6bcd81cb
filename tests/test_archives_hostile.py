"""Hostile archives, built here: duplicate names, links and devices, truncation, size bombs."""

from __future__ import annotations

import gzip
import io
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest
import zstandard
from typer.testing import CliRunner

from conftest import FIXTURES
from forensics.archive import Limits, Problem, iter_units
from forensics.batch import collect
from forensics.cli import app

CODEX = (FIXTURES / "ingest" / "codex_basic.jsonl").read_bytes()
CLAUDE = (FIXTURES / "ingest" / "claude_basic.jsonl").read_bytes()


def _tar_bytes(members: list[tuple[str, bytes]], extra: list[tarfile.TarInfo] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for info in extra:
            tf.addfile(info)
    return buf.getvalue()


def _units(path: Path, limits: Limits = Limits()):
    problems: list[Problem] = []
    units = list(iter_units([path], problems, limits=limits))
    return units, {p.label: p.reason for p in problems}


def test_zip_with_two_members_of_one_name_reads_both(tmp_path: Path) -> None:
    z = tmp_path / "dup.zip"
    with zipfile.ZipFile(z, "w") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate: that is the point
        zf.writestr("s/a.jsonl", CODEX)
        zf.writestr("s/a.jsonl", CLAUDE)
    units, problems = _units(z)
    assert [u.label for u in units] == [f"{z}!s/a.jsonl", f"{z}!s/a.jsonl#2"]
    got = collect([z], workers=1)
    agents = {o.label: [r["agent"] for r in o.sessions] for o in got.outcomes}
    assert agents == {f"{z}!s/a.jsonl": ["codex"], f"{z}!s/a.jsonl#2": ["claude-code"]}


def test_tar_with_two_members_of_one_name_reads_both(tmp_path: Path) -> None:
    t = tmp_path / "dup.tar"
    t.write_bytes(_tar_bytes([("a.jsonl", CODEX), ("a.jsonl", CLAUDE)]))
    got = collect([t], workers=1)
    agents = sorted((o.label, r["agent"]) for o in got.outcomes for r in o.sessions)
    assert agents == [(f"{t}!a.jsonl", "codex"), (f"{t}!a.jsonl#2", "claude-code")]


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz"])
def test_links_devices_and_fifos_are_listed_with_their_reason(tmp_path: Path,
                                                              suffix: str) -> None:
    def special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        return info

    raw = _tar_bytes([("ok.jsonl", CODEX)], [
        special("sym.jsonl", tarfile.SYMTYPE, "/etc/passwd"),
        special("hard.jsonl", tarfile.LNKTYPE, "ok.jsonl"),
        special("dev.jsonl", tarfile.CHRTYPE), special("pipe.jsonl", tarfile.FIFOTYPE)])
    t = tmp_path / f"special{suffix}"
    t.write_bytes(gzip.compress(raw) if suffix == ".tar.gz" else raw)
    units, problems = _units(t)
    assert [u.label for u in units] == [f"{t}!ok.jsonl"]
    assert problems == {
        f"{t}!sym.jsonl": "symbolic link (to /etc/passwd) not followed",
        f"{t}!hard.jsonl": "hard link (to ok.jsonl) not followed",
        f"{t}!dev.jsonl": "device member not read",
        f"{t}!pipe.jsonl": "FIFO member not read",
    }


def test_truncated_tar_is_reported_whether_cut_between_or_inside_members(tmp_path: Path) -> None:
    raw = _tar_bytes([("a.jsonl", CODEX), ("b.jsonl", CODEX), ("c.jsonl", CODEX)])
    blocks = (512 + len(CODEX) + 511) // 512 * 512  # one member: header + padded data
    between = tmp_path / "between.tar"
    between.write_bytes(raw[:2 * blocks])  # a cut exactly after b: tarfile itself is silent
    units, problems = _units(between)
    assert [u.label.rsplit("!", 1)[1] for u in units] == ["a.jsonl", "b.jsonl"]
    assert "no end-of-archive marker" in problems[str(between)]
    inside = tmp_path / "inside.tar"
    inside.write_bytes(raw[:2 * blocks + 700])
    units, problems = _units(inside)
    assert [u.label.rsplit("!", 1)[1] for u in units] == ["a.jsonl", "b.jsonl"]
    assert "truncated" in problems[str(inside)]
    whole = tmp_path / "whole.tar"
    whole.write_bytes(raw)
    assert _units(whole)[1] == {}


@pytest.mark.parametrize("suffix", [".tar.gz", ".tar.zst"])
def test_truncated_compressed_tar_is_reported(tmp_path: Path, suffix: str) -> None:
    raw = _tar_bytes([(f"{c}.jsonl", CODEX) for c in "abcdef"])
    packed = gzip.compress(raw) if suffix == ".tar.gz" else \
        zstandard.ZstdCompressor().compress(raw)
    t = tmp_path / f"cut{suffix}"
    t.write_bytes(packed[: len(packed) * 2 // 3])
    units, problems = _units(t)
    assert len(units) < 6
    assert "later members not read" in problems[str(t)]


def test_a_member_over_the_size_limit_is_skipped_and_named(tmp_path: Path) -> None:
    big = b"\n".join([CODEX.splitlines()[0]] + [b'{"type":"event_msg","payload":{}}'] * 60_000)
    t = tmp_path / "bomb.tar.zst"
    t.write_bytes(zstandard.ZstdCompressor(level=19).compress(
        _tar_bytes([("small.jsonl", CODEX), ("big.jsonl", big)])))
    assert t.stat().st_size < len(big) // 20  # small on disk, large expanded
    units, problems = _units(t, Limits(member_bytes=1 << 20))
    assert [u.label.rsplit("!", 1)[1] for u in units] == ["small.jsonl"]
    reason = problems[f"{t}!big.jsonl"]
    assert "over the 1M limit" in reason and "--archive-limits member=SIZE" in reason
    units, problems = _units(t, Limits(member_bytes=4 << 20))
    assert len(units) == 2 and not problems


def test_member_count_and_total_size_limits(tmp_path: Path) -> None:
    z = tmp_path / "many.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for i in range(5):
            zf.writestr(f"s{i}.jsonl", CODEX)
    units, problems = _units(z, Limits(members=3))
    assert len(units) == 3 and "more than 3 members" in problems[str(z)]
    units, problems = _units(z, Limits(total_bytes=len(CODEX) * 2))
    assert len(units) == 2 and "expanded size past" in problems[str(z)]


def test_limits_parse_and_the_cli_option(tmp_path: Path) -> None:
    assert Limits.parse("member=2G,members=10") == Limits(member_bytes=2 << 30, members=10)
    assert Limits.parse("total=512MiB").total_bytes == 512 << 20
    with pytest.raises(ValueError):
        Limits.parse("member=huge")
    z = tmp_path / "many.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for i in range(3):
            zf.writestr(f"s{i}.jsonl", CODEX)
    runner = CliRunner()
    res = runner.invoke(app, ["batch", str(z), "-o", str(tmp_path / "o"), "-j", "1",
                              "--no-progress", "--archive-limits", "members=2"])
    assert res.exit_code == 1 and "more than 2 members" in res.output
    assert "2 sessions from 2 sources" in res.output
    bad = runner.invoke(app, ["batch", str(z), "-o", str(tmp_path / "o"),
                              "--archive-limits", "member=lots"])
    assert bad.exit_code == 2 and "bad archive limit" in bad.output


def test_mutated_archives_never_stop_the_batch(tmp_path: Path) -> None:
    """Damaged zip, tar and compressed tars: collect() reports, never raises."""
    import random

    rng = random.Random(7)
    members = [("a/s.jsonl", CODEX), ("b/c.jsonl", CLAUDE)]
    raw_tar = _tar_bytes(members)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    packed = {".tar": raw_tar, ".zip": zbuf.getvalue(), ".tar.gz": gzip.compress(raw_tar),
              ".tar.zst": zstandard.ZstdCompressor().compress(raw_tar)}
    tried = 0
    for suffix, data in packed.items():
        for k in range(15):
            b = bytearray(data)
            if k % 3 == 0:
                b = b[: rng.randrange(1, len(b))]
            else:
                for _ in range(rng.randint(1, 20)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            path = tmp_path / f"m{k}{suffix}"
            path.write_bytes(bytes(b))
            got = collect([path], workers=1)
            for o in got.outcomes:
                assert o.status in ("scanned", "failed", "ignored"), o
            tried += 1
    assert tried == 60
