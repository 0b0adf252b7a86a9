"""A part's file as the merge reads it: a rank's NCCL durations in 16-bit steps whose low bytes are stored where
deflate does not pay (jittered ranks) and deflated where it does, read back exact, and each file opened once by a
block's merge."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
from part_copies import copy_part
from test_ncclfold import random_ops
from test_partial_merge import mapped as mapped  # the real exports' parts: test_partial_merge's fixture
from test_partial_merge import same_merge
from test_parts import real_run as real_run  # the run folder of every real export: test_parts' fixture

from nsyskit.analysis.compute import nccldigest
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.mapreduce import partfile, partpack
from nsyskit.analysis.mapreduce.partfile import SUFFIX, read_part, read_results, write_npz
from nsyskit.analysis.mapreduce.partial import merge_block
from nsyskit.analysis.mapreduce.parts import merge_parts

NO_STEPS = Table({"start_ns": np.empty(0, dtype=np.int64), "duration_ns": np.empty(0, dtype=np.int64)})
OPERATIONS = 40_000


def one_rank_part(mapped):
    """A real export's part file that holds one rank."""
    return next(path for path in sorted(mapped.glob("*" + SUFFIX)) if len(read_part(path)[1]) == 1)


def rotted(path, member: str) -> None:
    """Flip 400 bytes inside a member's deflated data, as bit rot on a file system would: the file stays whole."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{member}.npy")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    data[start : start + 400] = bytes(byte ^ 0x5A for byte in data[start : start + 400])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("dtype", [np.uint32, np.int64])
def test_steps_in_16_bits_and_those_that_do_not_fit_come_back_exact(dtype):
    """Rises of 0, 0xFFFF and 0x10000 and more, falls where a run begins, int64 ones below zero: packed in 16 bits with
    the others apart, and unpacked to the same durations and dtype."""
    rng = np.random.default_rng(21)
    edges = np.cumsum([5, 0, 0xFFFF, 0x10000, 1, 0xFFFE, 1 << 20])
    runs = [edges, np.sort(rng.integers(0, 1 << 30, 500)), edges + 7]  # the last begins below the one before ends
    if dtype == np.int64:
        runs.append(np.sort(rng.integers(-(1 << 40), 1 << 40, 500)))
    durations = np.concatenate(runs).astype(dtype)
    packed, low = partpack.Packer(), partpack.Packer()
    places = partpack._pack_steps(packed, low, partpack._steps(durations))
    back = partpack._unsteps(partpack._unpack_steps(packed.bytes(), low.bytes(), places))
    assert back.dtype == durations.dtype and back.tolist() == durations.tolist()


def test_a_jittered_ranks_low_bytes_are_stored_and_an_alike_ranks_deflated(mapped, tmp_path):
    """A rank whose NCCL durations are nearly all distinct (jitter) has the low bytes of its steps stored as they
    are (deflate would shrink them little and cost the merge its time); a rank of few distinct durations has them
    deflated. The other members are deflated either way, and both parts read back to the same digests."""
    header, results = read_part(one_rank_part(mapped))
    rng = np.random.default_rng(22)
    typical = rng.choice([8_000, 90_000, 2_000_000], OPERATIONS)  # each operation's time, as alike ranks take it
    kinds = {"jittered": typical + rng.integers(0, 3_000, OPERATIONS), "alike": typical}
    for name, durations in kinds.items():
        ops = random_ops(rng, OPERATIONS)
        results[0]["nccl"] = digest = nccldigest.digest(Table({**ops.columns, "duration_ns": durations}), NO_STEPS)
        path = tmp_path / f"{name}{SUFFIX}"
        with open(path, "wb") as out:
            write_npz(out, partpack.encode_results(results))
        with zipfile.ZipFile(path) as archive:
            methods = {info.filename: info.compress_type for info in archive.infolist()}
        stored = zipfile.ZIP_STORED if name == "jittered" else zipfile.ZIP_DEFLATED
        assert methods.pop(f"{partpack.NCCL_LOW}.npy") == stored
        assert set(methods.values()) == {zipfile.ZIP_DEFLATED}, methods
        back = read_results(path)[0]["nccl"]
        assert back.durations.tolist() == digest.durations.tolist()
        assert back.kind_codes.tolist() == digest.kind_codes.tolist() and back.sums == digest.sums


def test_a_blocks_merge_opens_each_part_file_once(mapped, tmp_path, monkeypatch):
    """Header, listing, timeline and results of a part come from one opening of its file (three openings a part were
    a tenth of a jittered part's merge)."""
    copy_part(one_rank_part(mapped), 12, tmp_path / "parts")
    opened: list[str] = []
    load = np.load

    def counted(path, *args, **kwargs):
        opened.append(str(path))
        return load(path, *args, **kwargs)

    monkeypatch.setattr(partfile.np, "load", counted)
    written = merge_block(tmp_path / "parts", tmp_path / "partials")
    assert sorted(opened) == sorted(str(path) for path in (tmp_path / "parts").glob("*" + SUFFIX))
    monkeypatch.setattr(partfile.np, "load", load)
    same_merge(merge_parts(tmp_path / "parts"), merge_parts(written.parent))


def test_a_part_whose_deflated_bytes_rotted_is_left_out_in_one_line_by_the_merge_and_a_blocks_merge(mapped, tmp_path):
    """A part whole in length but with damaged deflated bytes (zlib's error, not a cut): its rank is left out and
    named with its file, by the merge of the parts and through a partial merge, not a traceback."""
    parts = tmp_path / "parts"
    copy_part(one_rank_part(mapped), 4, parts)
    rotted(parts / f"rank_2.sqlite{SUFFIX}", "columns")
    for folder in (parts, merge_block(parts, tmp_path / "partials").parent):
        merged, _facts = merge_parts(folder)
        assert len(merged.sources) == 3 and 2 not in merged.sources
        assert any(line.startswith(f"rank 2 left out: {parts / f'rank_2.sqlite{SUFFIX}'}: is not a whole part file")
                   for line in merged.incomplete), merged.incomplete  # fmt: skip
