"""'invoke analyze' names the ranks a run ran without the profiler (PROFILE_RANKS), from the run's run.json."""

from __future__ import annotations

import json

from nsys_fixtures import Export, Kernel, Range, write_export

from nsyskit import runrecord
from nsyskit.analysis import run_analysis
from nsyskit.analysis.read.discover import discover


def local0_run(folder):
    """Ranks 0 and 2 profiled (local rank 0 of two nodes), ranks 1 and 3 not: two exports and a run.json saying so."""
    folder.mkdir()
    ranks = []
    for rank in range(4):
        profiled = rank % 2 == 0
        name = f"r1_node{rank // 2}_rank{rank}_w{rank // 2}"
        if profiled:
            kernels = [Kernel(i * 1000, i * 1000 + 400, "gemm") for i in range(4)]
            ranges = [Range(i * 1000, (i + 1) * 1000, f"step {i}") for i in range(4)]
            write_export(folder / f"{name}.sqlite", Export(kernels=kernels, ranges=ranges))
        ranks.append(runrecord.RankStatus(rank=rank, local_rank=rank % 2, node=rank // 2, profiled=profiled,
                                          profile_ranks="local0", sqlite=f"{name}.sqlite" if profiled else None))  # fmt: skip
    runrecord.RunRecord(run_id="r1", target="slurm", nodes=2, procs_per_node=2, world_size=4,
                        profile_ranks="local0", ranks=ranks).write(str(folder))  # fmt: skip
    return folder


def test_the_analysis_names_the_ranks_that_were_not_profiled(tmp_path):
    run = local0_run(tmp_path / "run")
    analysis, report = run_analysis([run])
    line = "ranks 1,3 were not profiled (PROFILE_RANKS=local0)"
    assert sorted(analysis.sources) == [0, 2] and line in analysis.warnings
    data = json.loads((run / "analysis.json").read_text())
    assert data["run"]["unprofiled_ranks"] == [1, 3] and data["run"]["not_profiled"] == line
    assert line in data["warnings"]
    assert line in report.read_text()


def test_a_fully_profiled_run_names_none(tmp_path):
    run = local0_run(tmp_path / "run")
    record = json.loads((run / "run.json").read_text())
    for status in record["ranks"]:
        status["profiled"] = True
    (run / "run.json").write_text(json.dumps(record))
    analysis, _ = run_analysis([run], write=False)
    assert not any("not profiled" in w for w in analysis.warnings)


def test_ranks_come_from_the_run_record_when_names_do_not_say(tmp_path):
    run = local0_run(tmp_path / "run")
    for path in run.glob("*.sqlite"):
        path.rename(path.with_name(path.name.replace("_rank", "_r")))  # names without 'rank_N'
    record = runrecord.read_run(str(run))
    for status in record.ranks:
        if status.sqlite:
            status.sqlite = status.sqlite.replace("_rank", "_r")
    record.write(str(run))
    assert [rank for rank, _path in discover([run])] == [0, 2]
