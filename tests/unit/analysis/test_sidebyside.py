"""The merge on this machine's cores: blocks of parts merged side by side in worker processes, then the final merge,
give the merge of one process field for field (the real exports' parts), stop with a block's error named, and
clean up after themselves."""

from __future__ import annotations

import functools
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from part_copies import copy_part
from test_partial_merge import mapped as mapped  # the real exports' parts, with timelines: test_partial_merge's fixture
from test_partial_merge import same_merge
from test_parts import real_run as real_run  # noqa: F401 (mapped's fixture)
from test_parts import run_nsyskit

from nsyskit.analysis.mapreduce import sidebyside
from nsyskit.analysis.mapreduce.parts import SUFFIX, merge_parts
from nsyskit.analysis.mapreduce.sidebyside import blocks_for, merged_parts
from nsyskit.analysis.mapreduce.timelines import merged_timelines
from nsyskit.analysis.present.timeline import write_trace
from nsyskit.errors import AnalysisError, MergeWorkerError, NsyskitError


@pytest.fixture
def few_files_side_by_side(monkeypatch):
    """Side by side from 2 part files on (the real run has a few; a user's run goes side by side from 512)."""
    monkeypatch.setattr(sidebyside, "SIDE_BY_SIDE_FILES", 2)


def test_the_cores_cut_large_runs_into_blocks_and_leave_small_ones_to_one_process():
    assert blocks_for(511, 8) == 1 and blocks_for(100_000, 1) == 1  # below the threshold, or one worker
    assert blocks_for(512, 2) == 2 and blocks_for(4096, 2) == 4  # a block per worker, at most 1,024 files each
    assert blocks_for(16_384, 8) == 16 and blocks_for(1024, 8) == 8


@pytest.mark.parametrize("workers", [2, 3])
def test_parts_merged_side_by_side_are_the_merge_of_one_process(mapped, tmp_path, few_files_side_by_side, workers):
    direct = merge_parts(mapped)
    progress: list[tuple[int, int]] = []
    with merged_parts(mapped, workers=workers, progress=lambda done, total: progress.append((done, total))) as merged:
        same_merge(direct, merged)
        scratch = {Path(path).parent for path, _span in merged[1]["part_files"]}
        assert len(scratch) == 1 and next(iter(scratch)).name.startswith("nsyskit-merge-")  # read from the partials
        traces = [write_trace(iter(merged_timelines(m[1]["part_files"], m[0])), tmp_path / f"{n}.json.gz")
                  for n, m in (("direct", direct), ("side", merged))]  # fmt: skip
    assert traces[0] == traces[1]
    unzipped = [gzip.decompress((tmp_path / f"{name}.json.gz").read_bytes()) for name in ("direct", "side")]
    assert unzipped[0] == unzipped[1]
    assert progress == [(done, workers) for done in range(1, workers + 1)]
    assert not next(iter(scratch)).exists()  # the partial merges go with the block


def test_a_damaged_part_is_left_out_as_by_one_process_and_stops_a_strict_merge_naming_its_block(
    mapped, tmp_path, few_files_side_by_side
):  # fmt: skip
    parts = tmp_path / "parts"
    shutil.copytree(mapped, parts)
    cut = sorted(parts.glob("*" + SUFFIX))[-1]
    cut.write_bytes(cut.read_bytes()[:100])
    with merged_parts(parts, workers=2) as merged:
        same_merge(merge_parts(parts), merged)
        assert any(cut.name in line and "is not a whole part file" in line for line in merged[0].incomplete)
    stop = rf"block 2 of 2 of the merge: .*{cut.name}.* is not a whole part file"
    with pytest.raises(MergeWorkerError, match=stop) as stopped, merged_parts(parts, strict=True, workers=2):
        pass
    assert stopped.value.exit_code == AnalysisError.exit_code


def _killed(*_args) -> None:
    """A worker that dies as one the kernel kills for memory does."""
    os._exit(9)


def test_a_worker_killed_stops_the_merge_with_one_line_that_says_how_to_merge_in_one_process(
    mapped, few_files_side_by_side, monkeypatch
):  # fmt: skip
    monkeypatch.setattr(sidebyside, "_merge_block", _killed)
    stop = r"a worker process of the merge of .* stopped .*fix: merge in one process with --workers 1"
    with pytest.raises(NsyskitError, match=stop), merged_parts(mapped, workers=2):
        pass


def test_the_command_merges_512_parts_side_by_side_as_in_one_process(mapped, tmp_path):
    nsyskit = functools.partial(run_nsyskit, tmp_path)
    parts = tmp_path / "parts"
    copy_part(min(mapped.glob("*" + SUFFIX), key=lambda p: p.stat().st_size), 512, parts)  # a small real part
    side = nsyskit("analyze-merge", str(parts), "--json", "--no-html", "--workers", "2")
    alone = nsyskit("analyze-merge", str(parts), "--json", "--no-html", "--workers", "1")
    assert side.returncode == alone.returncode == 0, side.stderr
    assert json.loads(side.stdout) == json.loads(alone.stdout) and len(json.loads(side.stdout)["ranks"]) == 512
    assert "merge: 2/2 blocks of parts merged side by side" in side.stderr + side.stdout  # the blocks' progress
    bad = nsyskit("analyze-merge", str(parts), "--workers", "0", "--no-html")
    assert bad.returncode != 0 and "--workers" in bad.stderr and "0" in bad.stderr


def test_two_parts_claiming_one_rank_are_named_by_their_own_files_not_the_partial_merges(
    mapped, tmp_path, few_files_side_by_side
):  # fmt: skip
    parts = tmp_path / "parts"
    shutil.copytree(mapped, parts)
    first = min(parts.glob("*" + SUFFIX))
    shutil.copy(first, parts / ("stale_" + first.name))  # another run's part of the same report
    claims = r"claims rank \d+, as .* does; fix: keep one part per report"
    with pytest.raises(AnalysisError, match=claims) as claimed, merged_parts(parts, workers=2):
        pass
    named = str(claimed.value)
    assert str(parts / first.name) in named and str(parts / ("stale_" + first.name)) in named
    assert "nsyskit-merge-" not in named and "block-" not in named
