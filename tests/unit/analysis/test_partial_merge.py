"""The merge as a tree: partial merges of blocks of parts, merged again, give the merge of all the parts field for
field, on the real exports, for uneven blocks, partials of partials, and blocks holding failed or missing ranks."""

from __future__ import annotations

import functools
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from part_copies import copy_part
from test_parts import RUN, run_nsyskit, whole_json
from test_parts import real_run as real_run  # the run folder of every real export: test_parts' fixture

from nsyskit.analysis.mapreduce.block import JOINED_KEYS, TABLE_KEYS
from nsyskit.analysis.mapreduce.partfile import SUFFIX, read_block, read_part
from nsyskit.analysis.mapreduce.partial import merge_block
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.mapreduce.timelines import merged_timelines
from nsyskit.analysis.present.timeline import DEFAULT_MAX_EVENTS, write_trace
from nsyskit.errors import AnalysisError, PartialAnalysis, UsageError


def tree(parts, out, blocks: int):
    """The partial merges of `parts` cut into `blocks` blocks, in a folder of their own; the folder."""
    for index in reversed(range(blocks)):  # array elements finish in any order
        merge_block(parts, out, index, blocks)
    return out


def same_merge(direct, merged) -> None:
    """Two merges (analysis, facts) are one: the whole analysis.json, and the ranks the facts say are left out."""
    assert whole_json(merged[0]) == whole_json(direct[0])
    assert merged[1]["left_out"] == direct[1]["left_out"] and merged[1]["missing"] == direct[1]["missing"]
    assert merged[1]["parts"] == direct[1]["parts"] and merged[0].incomplete == direct[0].incomplete


@pytest.fixture(scope="module")
def mapped(real_run, tmp_path_factory):
    """The real exports' parts, each rank's timeline kept (three array elements)."""
    parts = tmp_path_factory.mktemp("mapped")
    for index in range(3):
        map_reports([real_run], parts, index, 3, timeline_events=DEFAULT_MAX_EVENTS)
    return parts


@pytest.mark.parametrize("blocks", [2, 3, 5])
def test_the_merge_of_partial_merges_of_uneven_blocks_is_the_merge_of_the_parts(mapped, tmp_path, blocks):
    count = len(list(mapped.glob("*" + SUFFIX)))
    sizes = [count * (i + 1) // blocks - count * i // blocks for i in range(blocks)]
    assert count == len(RUN) and sum(sizes) == count
    partials = tree(mapped, tmp_path / "partials", blocks)
    assert len(list(partials.glob("*" + SUFFIX))) == blocks
    direct, merged = merge_parts(mapped), merge_parts(partials)
    same_merge(direct, merged)
    assert merged[0].incomplete == [] and list(merged[0].sources) == list(direct[0].sources)
    # the timeline too: each part's ranks' events, kept in the partial and renumbered as the merge numbers them
    trace = [write_trace(iter(merged_timelines(m[1]["part_files"], m[0])), tmp_path / f"{n}.json.gz")
             for n, m in (("direct", direct), ("tree", merged))]  # fmt: skip
    assert trace[0] == trace[1]
    assert gzip.decompress((tmp_path / "direct.json.gz").read_bytes()) == gzip.decompress((tmp_path / "tree.json.gz").read_bytes())


def test_a_partial_merge_of_partial_merges_is_the_merge_of_the_parts(mapped, tmp_path):
    # three levels, as a 16,384-rank run might take: 5 blocks of parts, then 2 blocks of those
    level2 = tree(tree(mapped, tmp_path / "level1", 5), tmp_path / "level2", 2)
    same_merge(merge_parts(mapped), merge_parts(level2))


def test_a_block_holding_failed_missing_and_damaged_ranks_keeps_their_lines_through_the_tree(real_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    cut = sorted(run.iterdir())[0]
    cut.write_bytes(cut.read_bytes()[:5000])  # a rank killed while writing its export: its map fails
    parts = tmp_path / "parts"
    written = map_reports([run], parts)
    if len(written) > 2:  # a map that never ran: no part (a clone without ../shared has 2 reports: one stays)
        written[-1].unlink()
    if len(written) > 3:  # a part whose results were damaged behind a whole header
        with np.load(written[1]) as data:
            arrays = dict(data)
        arrays["results"] = np.asarray("{cut")
        with open(written[1], "wb") as out:
            np.savez(out, **arrays)
    direct = merge_parts(parts)
    assert direct[1]["left_out"][0][1] == str(cut)  # the failed rank is left out and named
    for blocks in (1, 2, 3):
        merged = merge_parts(tree(parts, tmp_path / f"partials{blocks}", blocks))
        same_merge(direct, merged)
        assert merged[0].incomplete[0].startswith(f"{min(2, len(written) - 1)} of {len(RUN)} reports left out")
        assert any(str(cut) in line for line in merged[0].incomplete)
        assert len(written) <= 3 or f"with no part in {parts} " in merged[0].incomplete[0]  # the parts' folder
    with pytest.raises(PartialAnalysis) as from_parts:
        merge_parts(parts, strict=True)
    with pytest.raises(PartialAnalysis) as from_tree:
        merge_parts(tmp_path / "partials2", strict=True)
    assert str(from_tree.value) == str(from_parts.value)  # --strict stops at the same rank with the same why


def test_an_unreadable_part_in_a_block_is_named_by_the_final_merge(mapped, tmp_path):
    parts = tmp_path / "parts"
    shutil.copytree(mapped, parts)
    cut = sorted(parts.glob("*" + SUFFIX))[-1]
    cut.write_bytes(cut.read_bytes()[:100])
    direct = merge_parts(parts)
    same_merge(direct, merge_parts(tree(parts, tmp_path / "partials", 2)))
    assert any("is not a whole part file" in line for line in direct[0].incomplete)
    with pytest.raises(AnalysisError, match="is not a whole part file"):
        merge_block(parts, tmp_path / "strict", 1, 2, strict=True)


def test_a_partial_merge_says_what_it_holds_and_refuses_a_block_that_is_not_one(mapped, tmp_path):
    path = merge_block(mapped, tmp_path, 1, 2)
    assert path.name == "block-00001.part.npz"
    header, results = read_part(path)
    held = header["partial"]
    assert [h["count"] for h in held] and sum(h["count"] for h in held) == len(results)
    assert all(h["report"] and "rank" in h for h in held)
    # its ranks' tables joined: one table per name over the block, each rank's row count beside, none per rank
    block, parts = read_block(path), [read_part(mapped / (Path(h["report"]).name + SUFFIX))[1] for h in held]
    ranks = [result for part in parts for result in part]
    assert [r["rank"] for r in block.results] == [r["rank"] for r in ranks] and not set(TABLE_KEYS) & set(results[0])
    for name in JOINED_KEYS:
        own = [r["nccl"].groups if name == "nccl_groups" else r[name] for r in ranks]
        assert block.row_counts(name).tolist() == [len(table) for table in own]
        assert len(block.tables[name]) == sum(map(len, own))
    with pytest.raises(UsageError, match="--array-index 2 of --array-size 2"):
        merge_block(mapped, tmp_path, 2, 2)
    with pytest.raises(AnalysisError, match=r"holds no part files .*; fix: map the reports first"):
        merge_block(tmp_path / "nothing", tmp_path)


def test_the_command_writes_partial_merges_that_analyze_merge_reads_as_parts(mapped, tmp_path):
    nsyskit = functools.partial(run_nsyskit, tmp_path)
    partials = tmp_path / "partials"
    for index in ("1", "0"):
        done = nsyskit("analyze-merge", str(mapped), "--partial", str(partials), "--array-index", index,
                       "--array-size", "2")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"partial merge in {partials / f'block-0000{index}.part.npz'}" in done.stdout + done.stderr
    tree_merge = nsyskit("analyze-merge", str(partials), "--json", "--no-html")
    direct = nsyskit("analyze-merge", str(mapped), "--json", "--no-html")
    assert tree_merge.returncode == direct.returncode == 0, tree_merge.stderr
    assert json.loads(tree_merge.stdout) == json.loads(direct.stdout)
    alone = nsyskit("analyze-merge", str(mapped), "--array-index", "0", "--array-size", "2", "--no-html")
    assert alone.returncode != 0 and "without --partial" in alone.stderr


def test_blocks_hold_consecutive_ranks_so_the_final_merge_reads_one_partial_at_a_time(mapped, tmp_path):
    # 24 ranks named rank_0 ... rank_23: by plain name order a block would hold rank_1, rank_10, rank_11, ...
    one = next(path for path in sorted(mapped.glob("*" + SUFFIX)) if len(read_part(path)[1]) == 1)
    parts = tmp_path / "parts"
    copy_part(one, 24, parts)
    partials = tree(parts, tmp_path / "partials", 3)
    held = [[h["rank"] for h in read_part(path)[0]["partial"]] for path in sorted(partials.glob("*" + SUFFIX))]
    assert held == [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]
    same_merge(merge_parts(parts), merge_parts(partials))


def test_a_partial_merge_cut_short_leaves_its_ranks_out_and_is_named_with_why(mapped, tmp_path):
    partials = tree(mapped, tmp_path / "partials", 3)
    # the first partial that holds parts (a clone without ../shared has 2 parts: its first block of 3 is empty)
    cut = next(path for path in sorted(partials.glob("*" + SUFFIX)) if read_part(path)[0]["partial"])
    cut.write_bytes(cut.read_bytes()[:200])
    merged, facts = merge_parts(partials)
    assert facts["missing"] and merged.incomplete[0].startswith(f"{len(facts['missing'])} of {len(RUN)} reports left out")
    assert merged.incomplete[-1].startswith(f"file left out: {cut}: is not a whole part file")
    assert set(merged.sources.values()) == set(merge_parts(mapped)[0].sources.values()) - set(facts["missing"])


def test_a_block_with_no_readable_part_writes_its_partial_and_the_final_merge_names_its_files(mapped, tmp_path):
    # more blocks than parts (empty blocks), and a block whose only part is cut: no array element fails, and the
    # final merge is the merge of the parts, naming the unreadable file as it does
    count = len(list(mapped.glob("*" + SUFFIX)))
    same_merge(merge_parts(mapped), merge_parts(tree(mapped, tmp_path / "wide", count + 2)))
    parts = tmp_path / "parts"
    shutil.copytree(mapped, parts)
    cut = sorted(parts.glob("*" + SUFFIX), key=lambda p: len(p.name))[-1]
    cut.write_bytes(cut.read_bytes()[:100])
    partials = tree(parts, tmp_path / "partials", count)  # one part a block: the cut one's block has nothing readable
    assert len(list(partials.glob("*" + SUFFIX))) == count
    merged = merge_parts(partials)
    same_merge(merge_parts(parts), merged)
    assert any(f"{cut}: is not a whole part file" in line for line in merged[0].incomplete)


def test_partial_merges_of_unreadable_parts_alone_are_one_error_naming_a_part(mapped, tmp_path):
    parts = tmp_path / "parts"
    shutil.copytree(mapped, parts)
    for part in parts.glob("*" + SUFFIX):
        part.write_bytes(part.read_bytes()[:100])  # every part cut short: the partials hold none
    partials = tree(parts, tmp_path / "partials", 2)
    first = sorted(parts.glob("*" + SUFFIX))[0]
    with pytest.raises(AnalysisError, match=rf"{first.name}: is not a whole part file .*; fix: map its report again"):
        merge_parts(partials)
