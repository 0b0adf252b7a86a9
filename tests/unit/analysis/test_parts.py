"""The analysis as a map (one part per report) and a merge: the merge of the parts, in whatever order the array
elements wrote them, is exactly the analysis of the same reports in one process; bad parts are one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from real_exports import NAMES, PACKED, decompress

from nsyskit.analysis.parts import SUFFIX, map_reports, merge_parts, read_part
from nsyskit.analysis.trace import analyze_run
from nsyskit.errors import AnalysisError

REAL = [name for name in NAMES if name in PACKED]  # the real exports this checkout has (../shared's and its own)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, real_exports_dir):
    """A run folder of every real export (the two-process one holds two ranks)."""
    folder = tmp_path_factory.mktemp("real-run")
    for name in REAL:
        shutil.copy(decompress(name, real_exports_dir), folder / name)
    return folder


def whole_json(analysis) -> str:
    return json.dumps(analysis.to_json(rows=1 << 30), sort_keys=True, default=str)


def test_the_merge_of_parts_written_in_any_order_is_the_whole_analysis(real_run, tmp_path):
    parts = tmp_path / "parts"
    for index in (2, 0, 1):  # three array elements, finishing in any order
        map_reports([real_run], parts, index, 3)
    assert len(list(parts.glob("*" + SUFFIX))) == len(REAL)
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
    assert len(facts["missing"]) == 1 and merged.incomplete[0].startswith(f"1 of {len(REAL)} reports have no part")
    assert written[0].name.removesuffix(SUFFIX) in merged.incomplete[0]


def test_two_parts_claiming_one_rank_are_one_error_naming_both(real_run, tmp_path):
    first = map_reports([real_run], tmp_path, 0, len(REAL))[0]
    other = tmp_path / ("copy_" + first.name)
    shutil.copy(first, other)
    with pytest.raises(AnalysisError, match=r"claims rank 0, as .* does; fix: keep one part per report"):
        merge_parts(tmp_path)


def test_a_truncated_part_is_one_line(real_run, tmp_path):
    part = map_reports([real_run], tmp_path, 0, len(REAL))[0]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(AnalysisError, match=r"is not a whole part file .*; fix: map its report again"):
        read_part(part)


def test_a_part_of_another_version_is_refused(real_run, tmp_path):
    part = map_reports([real_run], tmp_path, 0, len(REAL))[0]
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSYSKIT_")}

    def nsyskit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nsyskit", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip

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
