"""The findings' ground: each rank's evidence rows travel through the map and the merge whole, rules read them per
rank (pivot), and findings come out ordered by the time at stake per step."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from real_exports import NAMES, PACKED, decompress

from nsyskit.analysis.compute import evidence
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.judge.finding import Finding, ordered, ranks_text
from nsyskit.analysis.mapreduce.parts import map_reports, merge_parts
from nsyskit.analysis.trace import analyze_run

REAL = [name for name in NAMES if name in PACKED]


def kernel_facts(inputs: evidence.RankInputs):
    """A test extractor: facts of the rank's own kernels, so that every rank's rows differ."""
    kernels = inputs.kernels
    count = len(kernels) if kernels is not None else 0
    yield "test_rule", "kernels", float(count)
    if count:
        yield "test_rule", "first_start_ns", float(kernels.start.min())
    yield "other_rule", "steps", float(len(inputs.steps) if inputs.steps is not None else 0)


@pytest.fixture
def with_kernel_facts(monkeypatch):
    monkeypatch.setattr(evidence, "EXTRACTORS", [*evidence.EXTRACTORS, kernel_facts])


def test_evidence_from_parts_is_the_evidence_of_one_process(with_kernel_facts, real_exports_dir, tmp_path):
    if not REAL:
        pytest.skip("no real export in this checkout")
    run = tmp_path / "run"
    run.mkdir()
    for name in REAL[:4]:
        shutil.copy(decompress(name, real_exports_dir), run / name)
    whole = analyze_run([run], workers=1)
    map_reports([run], tmp_path / "parts")
    merged, _facts = merge_parts(tmp_path / "parts")
    for table in (whole.evidence, merged.evidence):
        assert set(table["rule"]) >= {"test_rule", "other_rule"}
    assert whole.evidence.to_json() == merged.evidence.to_json()
    facts = evidence.pivot(merged.evidence, "test_rule")
    assert facts["rank"].tolist() == sorted(whole.sources)  # one row per rank, every rank
    kernels = {rank: int(table["instances"].sum()) if len(table) else 0 for rank, table in merged.kernel_summaries.items()}
    assert dict(zip(facts["rank"].tolist(), facts["kernels"].astype(int).tolist(), strict=True)) == kernels  # each its own


def test_pivot_gives_a_row_per_rank_and_nan_where_a_rank_lacks_a_key():
    table = Table({
        "rank": np.asarray([3, 3, 1, 7], dtype=np.int64),
        "rule": np.asarray(["r", "r", "r", "s"], dtype=object),
        "key": np.asarray(["a", "b", "a", "a"], dtype=object),
        "value": np.asarray([1.0, 2.0, 5.0, 9.0]),
    })  # fmt: skip
    rows = evidence.pivot(table, "r")
    assert rows["rank"].tolist() == [1, 3]
    assert rows["a"].tolist() == [5.0, 1.0]
    assert math.isnan(rows["b"][0]) and rows["b"][1] == 2.0
    assert len(evidence.pivot(table, "none")) == 0 and len(evidence.pivot(None, "r")) == 0


def test_findings_are_ordered_by_time_at_stake_and_unestimated_ones_last():
    def finding(rule, stake, severity="warning"):
        return Finding(rule, severity, rule, 1.0, 0.0, "", at_stake_ns=stake)

    found = ordered([finding("none", math.nan), finding("small", 5.0), finding("info", math.nan, "info"),
                     finding("big", 50.0, "info")])  # fmt: skip
    assert [f.rule for f in found] == ["big", "small", "none", "info"]
    data = found[2].to_json()
    assert data["at_stake_ns"] is None and data["ranks"] == [] and data["evidence"] == {}


def test_a_wide_run_names_its_ranks_in_one_short_line():
    assert ranks_text([2]) == "rank 2"
    assert ranks_text([0, 5]) == "ranks 0, 5"
    line = ranks_text(list(range(0, 1024, 2)), 1024)
    assert line.startswith("512 of 1,024 ranks (0, 2, 4, 6") and len(line) < 60
