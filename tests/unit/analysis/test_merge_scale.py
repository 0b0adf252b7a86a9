"""The merge at thousands of ranks: parts are read and folded one at a time, their NCCL durations too (counted, not
timed), and the reports left out are named in one line with their ranks as ranges."""

from __future__ import annotations

import weakref

import pytest
from part_copies import copy_part
from real_exports import NAMES, PACKED, decompress

from nsyskit.analysis.mapreduce import partfile
from nsyskit.analysis.mapreduce import parts as mapreduce_parts
from nsyskit.analysis.mapreduce.leftout import rank_ranges
from nsyskit.analysis.mapreduce.reduce import JOINED_RANKS, RANKED_KEYS

RANKS = 2048
# 37 reports without a part, in runs and alone, as a node lost mid-run and a few single ranks leave them
LOST = [*range(96, 128), 1500, *range(1700, 1704)]
HELD_PARTS = JOINED_RANKS + 1  # parts whose tables are alive at once: the chunk being joined and the one just read
HELD_DURATIONS = 2  # ranks whose NCCL durations are alive at once: the one being folded and the one just read


@pytest.fixture(scope="module")
def one_part(tmp_path_factory, real_exports_dir):
    """The part of the smallest one-rank real export this checkout has, one with NCCL operations where one has them
    (their durations are what grows per rank)."""
    folder = tmp_path_factory.mktemp("one")
    found = []
    for name in sorted((n for n in NAMES if n in PACKED), key=lambda n: decompress(n, real_exports_dir).stat().st_size):
        written = mapreduce_parts.map_reports([decompress(name, real_exports_dir)], folder / name)
        header, results = partfile.read_part(written[0])
        if len(results) == 1 and not header["error"]:
            if results[0]["nccl"].sums["count"]:
                return written[0]
            found.append(written[0])
    if not found:
        pytest.skip("no one-rank real export")
    return found[0]


def test_rank_ranges_join_consecutive_ranks():
    assert rank_ranges([2051, *range(96, 128)]) == "96-127, 2051"
    assert rank_ranges([5, 3, 4, 9, 7]) == "3-5, 7, 9" and rank_ranges([0]) == "0" and rank_ranges([]) == ""


def test_a_merge_of_2048_parts_holds_a_bounded_number_of_parts_at_once(one_part, tmp_path, monkeypatch):
    copy_part(one_part, RANKS, tmp_path / "parts")
    alive: set[int] = set()  # parts some of whose decoded tables are still referenced
    most = [0]
    durations_alive, most_durations = [0], [0]  # ranks whose NCCL durations are still referenced

    def durations_gone():
        durations_alive[0] -= 1
    read_results = partfile.read_results

    def counted(path, data=None):
        results = read_results(path, data)
        key = id(results)
        tables = [result[name] for result in results for name in RANKED_KEYS if result[name] is not None]
        left = [len(tables)]

        def gone():
            left[0] -= 1
            if not left[0]:
                alive.discard(key)

        for table in tables:
            weakref.finalize(table, gone)
        for result in results:
            weakref.finalize(result["nccl"].durations, durations_gone)
            durations_alive[0] += 1
            most_durations[0] = max(most_durations[0], durations_alive[0])
        alive.add(key)
        most[0] = max(most[0], len(alive))
        return results

    monkeypatch.setattr(partfile, "read_results", counted)
    merged, facts = mapreduce_parts.merge_parts(tmp_path / "parts")
    assert len(merged.ranks) == RANKS and facts["parts"] == RANKS and merged.incomplete == []
    assert 1 <= most[0] <= HELD_PARTS, f"{most[0]} parts' tables held at once"
    # the durations are folded as they come (compute.ncclfold): not one array per rank until the sizes table
    assert 1 <= most_durations[0] <= HELD_DURATIONS, f"{most_durations[0]} ranks' NCCL durations held at once"


def test_37_missing_parts_of_2048_are_named_in_one_line_as_ranges(one_part, tmp_path):
    kept = [rank for rank in range(RANKS) if rank not in set(LOST)]
    copy_part(one_part, RANKS, tmp_path / "parts", kept)
    merged, facts = mapreduce_parts.merge_parts(tmp_path / "parts")
    assert merged.incomplete == [
        f"37 of 2,048 reports left out: ranks 96-127, 1500, 1700-1703 (37 with no part in {tmp_path / 'parts'} "
        "(their map failed or has not run)); this analysis covers the others"
    ]
    assert sorted(merged.sources) == kept and len(merged.ranks) == len(kept) and len(facts["left_out"]) == 37


def test_the_final_merge_of_partial_merges_builds_no_table_per_rank(one_part, tmp_path, monkeypatch):
    # a partial merge holds its block's tables joined: the final merge reads a few tables per block, whatever the
    # ranks (it decoded ~13 small tables a rank before, 58k at 4,096 ranks: most of its time)
    from nsyskit.analysis.compute import table
    from nsyskit.analysis.mapreduce.partial import merge_block

    built = [0]
    init = table.Table.__init__

    def counted(self, *args, **kwargs):
        built[0] += 1
        init(self, *args, **kwargs)

    tables = {}
    for ranks in (64, 512):
        copy_part(one_part, ranks, tmp_path / f"parts{ranks}")
        for index in range(4):
            merge_block(tmp_path / f"parts{ranks}", tmp_path / f"partials{ranks}", index, 4)
        monkeypatch.setattr(table.Table, "__init__", counted)
        built[0] = 0
        merged, _facts = mapreduce_parts.merge_parts(tmp_path / f"partials{ranks}")
        monkeypatch.setattr(table.Table, "__init__", init)
        assert len(merged.ranks) == ranks and merged.incomplete == []
        tables[ranks] = built[0]
    assert tables[512] == tables[64] < 2 * 64, tables  # the same few per block and view at 8x the ranks
