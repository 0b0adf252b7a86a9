"""The analysis as a map (one part per report) and a merge: the merge of the parts, in whatever order the array
elements wrote them, is exactly the analysis of the same reports in one process; bad parts are one line."""

from __future__ import annotations

import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from nsys_fixtures import Export, Kernel, write_export
from real_exports import NAMES, PACKED, decompress

from nsyskit.analysis.mapreduce.partfile import SUFFIX, read_part
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.mapreduce.timelines import merged_timelines
from nsyskit.analysis.present.timeline import DEFAULT_MAX_EVENTS, write_timeline, write_trace
from nsyskit.analysis.read.discover import discover
from nsyskit.analysis.trace import analyze_run
from nsyskit.errors import AnalysisError, PartialAnalysis

REAL = [name for name in NAMES if name in PACKED]  # the real exports this checkout has (../shared's and its own)
# The run's reports: a clone without ../shared has only the project's own export (tests/data/real), so the run holds it
# twice (a second rank) and every test of a missing or cut part still has a rank left to merge.
RUN = {name: name for name in REAL} | ({} if len(REAL) > 1 else {f"second_{REAL[0]}": REAL[0]})


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, real_exports_dir):
    """A run folder of every real export (a file of several processes holds several ranks)."""
    folder = tmp_path_factory.mktemp("real-run")
    for target, name in RUN.items():
        shutil.copy(decompress(name, real_exports_dir), folder / target)
    return folder


def run_nsyskit(folder, *args: str) -> subprocess.CompletedProcess:
    """`nsyskit ARGS` run in `folder` as a user runs it (no NSYSKIT_ settings from the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")}
    return subprocess.run([sys.executable, "-m", "nsyskit", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def whole_json(analysis) -> str:
    return json.dumps(analysis.to_json(rows=1 << 30), sort_keys=True, default=str)


def test_the_merge_of_parts_written_in_any_order_is_the_whole_analysis(real_run, tmp_path):
    parts = tmp_path / "parts"
    for index in (2, 0, 1):  # three array elements, finishing in any order
        map_reports([real_run], parts, index, 3)
    assert len(list(parts.glob("*" + SUFFIX))) == len(RUN)
    merged, facts = merge_parts(parts)
    assert whole_json(merged) == whole_json(analyze_run([real_run]))  # equal numbers, every row of every table
    assert facts["missing"] == [] and merged.incomplete == []


def test_parts_are_small_and_say_what_they_hold(real_run, tmp_path):
    written = map_reports([real_run], tmp_path)
    for part in written:
        header, results = read_part(part)
        assert header["report"].endswith(part.name.removesuffix(SUFFIX)) and results[0]["rank"] == header["rank"]
        assert part.stat().st_size < 1 << 20  # KB, whatever the report's size


def test_a_missing_part_names_the_report_at_the_top_and_the_rest_is_merged(real_run, tmp_path):
    written = map_reports([real_run], tmp_path)
    written[0].unlink()
    merged, facts = merge_parts(tmp_path)
    assert len(facts["missing"]) == 1 and merged.incomplete[0].startswith(f"1 of {len(RUN)} reports left out: ranks ")
    assert f"{written[0].name.removesuffix(SUFFIX)}: their map failed or has not run" in merged.incomplete[0]


def test_two_parts_claiming_one_rank_are_one_error_naming_both(real_run, tmp_path):
    first = map_reports([real_run], tmp_path, 0, len(RUN))[0]
    other = tmp_path / ("copy_" + first.name)
    shutil.copy(first, other)
    with pytest.raises(AnalysisError, match=r"claims rank 0, as .* does; fix: keep one part per report"):
        merge_parts(tmp_path)


def test_a_truncated_part_is_one_line(real_run, tmp_path):
    part = map_reports([real_run], tmp_path, 0, len(RUN))[0]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(AnalysisError, match=r"is not a whole part file .*; fix: map its report again"):
        read_part(part)


def test_a_part_of_another_version_is_refused(real_run, tmp_path):
    part = map_reports([real_run], tmp_path, 0, len(RUN))[0]
    with np.load(part) as data:
        arrays = dict(data)
    header = json.loads(str(arrays["header"]))
    arrays["header"] = np.asarray(json.dumps({**header, "nsyskit": "0.0.1"}))
    with open(part, "wb") as out:
        np.savez(out, **arrays)
    with pytest.raises(AnalysisError, match=r"is a part of nsyskit 0.0.1 .*; fix: map the report again"):
        read_part(part)
    assert zipfile.is_zipfile(part)


def test_the_commands_give_what_analyze_gives_and_exit_4_when_incomplete(real_run, tmp_path):
    nsyskit = functools.partial(run_nsyskit, tmp_path)
    parts = tmp_path / "parts"
    for index in ("0", "1"):
        done = nsyskit("analyze-part", str(real_run), "--out", str(parts), "--array-index", index, "--array-size", "2")
        assert done.returncode == 0, done.stderr
    merged = nsyskit("analyze-merge", str(parts), "--json", "--no-html")
    whole = nsyskit("analyze", str(real_run), "--json", "--no-html")
    assert merged.returncode == whole.returncode == 0 and merged.stdout == whole.stdout
    next(parts.glob("*" + SUFFIX)).unlink()
    partial = nsyskit("analyze-merge", str(parts), "--json", "--no-html")
    assert partial.returncode == 4 and json.loads(partial.stdout)["run"]["incomplete"]
    assert partial.stderr.strip().splitlines()[-1].startswith("error: the analysis is incomplete: 1 of ")


def rank_run(folder, source, ranks):
    """A run folder of `ranks` copies (hard links) of one real export under rank_N names."""
    folder.mkdir()
    for rank in ranks:
        os.link(source, folder / f"rank_{rank}.sqlite")
    return folder


def test_ranks_in_the_names_are_kept_whatever_order_the_parts_come_in(real_exports_dir, tmp_path):
    source = decompress(REAL[0], real_exports_dir)
    run = rank_run(tmp_path / "run", source, (10, 2, 1))
    parts = tmp_path / "parts"
    for index in (1, 2, 0):
        map_reports([run], parts, index, 3)
    merged, _facts = merge_parts(parts)
    assert sorted(merged.sources) == [1, 2, 10]
    assert whole_json(merged) == whole_json(analyze_run([run]))


def test_hundreds_of_ranks_merge_to_the_whole_analysis(real_exports_dir, tmp_path):
    # Real scale: 256 ranks, copies of the smallest real export, mapped by 8 array elements.
    source = min((decompress(name, real_exports_dir) for name in REAL), key=lambda p: p.stat().st_size)
    run = rank_run(tmp_path / "run", source, range(256))
    parts = tmp_path / "parts"
    for index in range(8):
        map_reports([run], parts, index, 8)
    merged, facts = merge_parts(parts)
    assert facts["parts"] == 256 and len(merged.ranks) == 256 and merged.incomplete == []
    assert whole_json(merged) == whole_json(analyze_run([run]))


def test_a_report_that_cannot_be_read_gets_a_part_saying_why_and_the_merge_names_its_rank(real_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    cut = sorted(run.iterdir())[0]
    cut.write_bytes(cut.read_bytes()[:5000])  # a rank killed while writing its export
    parts = tmp_path / "parts"
    written = map_reports([run], parts)
    assert len(written) == len(RUN)
    merged, facts = merge_parts(parts)
    assert facts["left_out"][0][1] == str(cut)
    assert merged.sources == analyze_run([run]).sources  # the others' ranks (one per process of a file), cut's left out
    rank = dict((str(path), rank) for rank, path in discover([run]))[str(cut)]  # as 'invoke analyze' numbers it
    assert merged.incomplete == [
        f"1 of {len(RUN)} reports left out: ranks {rank} (1 that could not be analyzed); "
        "this analysis covers the others", f"rank {rank} left out: {facts['left_out'][0][2]}",
    ]  # fmt: skip
    assert str(cut) in merged.incomplete[1]
    with pytest.raises(AnalysisError):
        map_reports([run], tmp_path / "strict", strict=True)
    with pytest.raises(PartialAnalysis, match=rf"^rank {rank} \(.*\): .*; fix: map it again"):
        merge_parts(parts, strict=True)


def test_an_unreadable_part_leaves_its_rank_out_with_why_unless_strict(real_run, tmp_path):
    written = map_reports([real_run], tmp_path)
    written[-1].write_bytes(written[-1].read_bytes()[:100])
    merged, facts = merge_parts(tmp_path)
    assert merged.incomplete[0].startswith(f"1 of {len(RUN)} reports left out: ranks ")
    assert any("is not a whole part file" in line for line in merged.incomplete[1:])
    with pytest.raises(AnalysisError, match="is not a whole part file"):
        merge_parts(tmp_path, strict=True)


def test_a_part_whose_results_are_damaged_behind_a_whole_header_leaves_its_rank_out_unless_strict(real_run, tmp_path):
    # The merge reads the headers first and each part's results only when the reduce takes them: a part damaged
    # past its header is still named, not merged half, and the rest is the analysis of the others.
    written = map_reports([real_run], tmp_path)
    damaged = written[0]
    header, _results = read_part(damaged)
    with np.load(damaged) as data:
        arrays = dict(data)
    arrays["results"] = np.asarray("{cut")
    with open(damaged, "wb") as out:
        np.savez(out, **arrays)
    merged, facts = merge_parts(tmp_path)
    assert len(merged.incomplete) == 1 and merged.incomplete[0].startswith(f"rank {header['rank']} left out: {damaged}: is not a whole part file")
    assert header["report"] not in merged.sources.values() and merged.sources and facts["missing"] == []
    with pytest.raises(AnalysisError, match="is not a whole part file"):
        merge_parts(tmp_path, strict=True)


def test_the_timeline_from_the_parts_is_the_timeline_of_the_reports(real_run, tmp_path):
    parts = tmp_path / "parts"
    for index in (1, 0):
        map_reports([real_run], parts, index, 2, timeline_events=DEFAULT_MAX_EVENTS)
    merged, facts = merge_parts(parts)
    from_parts = write_trace(iter(merged_timelines(facts["part_files"], merged)), tmp_path / "parts.json.gz")
    from_reports = write_timeline([real_run], tmp_path / "reports.json.gz")
    assert from_parts == from_reports
    assert gzip.decompress((tmp_path / "parts.json.gz").read_bytes()) == gzip.decompress(
        (tmp_path / "reports.json.gz").read_bytes()
    )
    without = tmp_path / "plain"
    map_reports([real_run], without)
    with pytest.raises(AnalysisError, match=r"holds no timeline .*; fix: map again with 'invoke analyze-part --timeline'"):
        merged_timelines(merge_parts(without)[1]["part_files"], merged)


def test_the_commands_on_a_cut_export_name_its_rank_and_exit_4_or_stop_with_strict(real_run, tmp_path):
    nsyskit = functools.partial(run_nsyskit, tmp_path)
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    cut = sorted(run.iterdir())[-1]
    cut.write_bytes(cut.read_bytes()[:5000])
    parts = tmp_path / "parts"
    mapped = nsyskit("analyze-part", str(run), "--out", str(parts), "--timeline")
    assert mapped.returncode == 0, mapped.stderr
    merged = nsyskit("analyze-merge", str(parts), "--json", "--output", str(tmp_path / "out"), "--timeline")
    assert merged.returncode == 4, merged.stderr
    incomplete = json.loads(merged.stdout)["run"]["incomplete"]
    rank = dict((str(path), rank) for rank, path in discover([run]))[str(cut)]  # as 'invoke analyze' numbers it
    assert any(line.startswith(f"rank {rank} left out: {cut}") for line in incomplete)
    assert (tmp_path / "out" / "timeline.json.gz").exists() and (tmp_path / "out" / "report.html").exists()
    strict = nsyskit("analyze-merge", str(parts), "--no-html", "--strict")
    assert strict.returncode == 4 and strict.stderr.strip().splitlines()[-1].startswith(f"error: rank {rank} (")
    assert nsyskit("analyze-part", str(run), "--out", str(tmp_path / "p2"), "--strict").returncode == 1


@pytest.mark.parametrize("dtype", [np.uint32, np.int64])
def test_a_digests_durations_travel_as_steps_and_come_back_whole(dtype):
    """Each group's durations (its kinds one after another, each kind's sorted) are stored as their rises (a part 30x
    smaller): read back, the same values and dtype, whatever the groups' sizes and values (group starts, and kind
    starts inside a group, lower than the duration before them; sums that wrap the dtype: uint32 near its top,
    int64 folds' durations below zero)."""
    from nsyskit.analysis.mapreduce.partpack import _steps, _unsteps

    rng = np.random.default_rng(6)
    high = np.iinfo(np.uint32).max if dtype == np.uint32 else 1 << 45
    low = -high if dtype == np.int64 else 0
    falls = 0
    for _ in range(300):
        counts = rng.integers(1, 30, rng.integers(0, 8))
        groups = []
        for count in counts:  # a group: 1-3 kinds, each a sorted run of its own
            cuts = np.sort(rng.integers(0, count + 1, rng.integers(0, 3)))
            runs = [np.sort(run) for run in np.split(rng.integers(low, high, count, dtype=np.int64), cuts)]
            falls += sum(int(a[-1] > b[0]) for a, b in zip(runs[:-1], runs[1:], strict=True) if len(a) and len(b))
            groups.extend(runs)
        durations = np.concatenate(groups or [np.empty(0, np.int64)]).astype(dtype)
        back = _unsteps(_steps(durations))
        assert back.dtype == durations.dtype and back.tolist() == durations.tolist()
    assert falls > 100  # kinds that begin below the duration before them, inside a group


def unranked_run(folder, real_exports_dir, count: int = 8):
    """A run folder of `count` reports named r0.sqlite, r1.sqlite, ... (no rank in the names, no run.json): the
    smallest real exports this checkout has, then exports made here with a kernel of their own each, so that every
    rank's tables tell which file it was read from."""
    folder.mkdir()
    real = sorted(REAL, key=lambda name: PACKED[name].stat().st_size)[:3]
    for index in range(count):
        target = folder / f"r{index}.sqlite"
        if index < len(real):
            os.link(decompress(real[index], real_exports_dir), target)
        else:
            write_export(target, Export(kernels=[Kernel(0, 1000 * (index + 1), f"kernel_of_r{index}")]))
    return folder


def without_warnings(analysis) -> str:
    data = analysis.to_json(rows=1 << 30)
    data.pop("warnings")
    return json.dumps(data, sort_keys=True, default=str)


def test_reports_without_ranks_mapped_each_on_its_own_merge_as_analyze_numbers_them(real_exports_dir, tmp_path):
    run = unranked_run(tmp_path / "run", real_exports_dir)
    nsyskit = functools.partial(run_nsyskit, tmp_path)
    parts = tmp_path / "parts"
    for report in sorted(run.iterdir(), reverse=True):  # each mapped on its own, as 8 separate jobs would
        mapped = nsyskit("analyze-part", str(report), "--out", str(parts))
        assert mapped.returncode == 0, mapped.stderr
        header, _results = read_part(parts / (report.name + SUFFIX))
        assert header["rank"] == 0 and header["rank_known"] is False  # the part says its rank is not known
    merged = nsyskit("analyze-merge", str(parts), "--json", "--no-html")
    whole = nsyskit("analyze", str(run), "--json", "--no-html")
    assert merged.returncode == whole.returncode == 0, merged.stderr
    merged_data, whole_data = json.loads(merged.stdout), json.loads(whole.stdout)
    said = [w for w in merged_data.pop("warnings") if "numbered in the order of their sorted names" in w]
    assert said and "r0.sqlite = rank 0" in said[0] and "8 reports" in said[0]  # the merge says it numbered them
    assert "numbered in the order" in merged.stderr
    whole_data.pop("warnings")
    assert merged_data == whole_data  # every table, rank by rank, as 'invoke analyze' of the same files
    in_rank_order = [Path(whole_data["sources"][rank]).name for rank in sorted(whole_data["sources"], key=int)]
    assert list(dict.fromkeys(in_rank_order)) == [f"r{i}.sqlite" for i in range(8)]  # a two-process file: 2 ranks


def test_named_and_unnamed_reports_mapped_apart_keep_the_named_ranks(real_exports_dir, tmp_path):
    run = unranked_run(tmp_path / "run", real_exports_dir, count=3)
    (run / "r1.sqlite").rename(run / "rank_1.sqlite")  # r0 and r2 take the ranks rank_1 leaves: 0 and 2
    parts = tmp_path / "parts"
    for report in run.iterdir():
        map_reports([report], parts)
    merged, facts = merge_parts(parts)
    assert without_warnings(merged) == without_warnings(analyze_run([run])) and facts["missing"] == []


def test_two_reports_of_one_named_rank_mapped_apart_are_still_a_clash(real_exports_dir, tmp_path):
    source = decompress(REAL[0], real_exports_dir)
    parts = tmp_path / "parts"
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        os.link(source, tmp_path / run / "job_rank_0.sqlite")
        map_reports([tmp_path / run / "job_rank_0.sqlite"], parts / run)
        for part in (parts / run).iterdir():
            part.rename(parts / f"{run}_{part.name}")
    with pytest.raises(AnalysisError, match=r"claims rank 0, as .*job_rank_0.* does; fix: keep one part per report"):
        merge_parts(parts)
