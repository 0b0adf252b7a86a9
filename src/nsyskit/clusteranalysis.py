"""A run's analysis on a cluster: its plan (reports, the map's elements, where parts, scripts and logs go) and the engine that runs it.

One plan serves both engines (nsyskit.slurm.analysis renders it as a job array and a dependent merge job,
nsyskit.k8s.analysis as an Indexed Job and a merge Job); each element runs 'nsyskit analyze-part' over every
`elements`-th report, the merge 'nsyskit analyze-merge' over the parts: the same code as 'invoke analyze'. Past
ANALYZE_TREE_RANKS reports the merge is a tree: a second array ('analyze-merge --partial') merges blocks of parts
into partial merges side by side, and the final merge takes those.
"""

from __future__ import annotations

import math
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from nsyskit import console
from nsyskit.errors import UsageError

PARTS = "analysis-parts"  # the run folder's subfolder of part files (one per report)
PARTIALS = "analysis-partials"  # the run folder's subfolder of partial merges (one per block of parts), in a tree
BLOCK_PARTS = 512  # parts per partial merge in a tree: 4,096 reports make 8 blocks, 16,384 make 32
JOBS = "analysis-jobs"  # the run folder's subfolder of the rendered scripts, the record and the logs
# At most this many map elements: 1,024 reports make 256 elements of 4 (Slurm's default MaxArraySize is 1001, and
# each element pays the interpreter's start once); fewer reports get one element each.
MAX_ELEMENTS = 256


@dataclass(frozen=True)
class AnalysisPlan:
    """What a cluster analysis runs: the run folder and its reports, the map's shape and the merge's options."""

    run: Path
    reports: list[Path]
    elements: int
    max_parallel: int | None = None
    timeline: bool = False
    timeline_max_events: int | None = None
    straggler_pct: float | None = None
    strict: bool = False
    merge_options: list[str] = field(default_factory=list)
    blocks: int = 0  # partial merges of the tree (0: the merge takes the parts itself)

    @property
    def parts(self) -> Path:
        """Where the map writes its parts."""
        return self.run / PARTS

    @property
    def partials(self) -> Path:
        """Where the partial merges go, in a tree."""
        return self.run / PARTIALS

    @property
    def folder(self) -> Path:
        """Where the scripts, the record and the logs of the analysis jobs go (beside the reports)."""
        return self.run / JOBS

    def reports_of(self, element: int) -> list[Path]:
        """The reports array element `element` maps (every `elements`-th from its index, as analyze-part takes them)."""
        return self.reports[element :: self.elements]

    def named_reports(self, element: int) -> str:
        """'rank_0.sqlite, rank_256.sqlite and 2 more': the reports of one element, for an error line."""
        reports = self.reports_of(element)
        more = f" and {len(reports) - 2} more" if len(reports) > 2 else ""
        return ", ".join(path.name for path in reports[:2]) + more

    def map_arguments(self) -> list[str]:
        """analyze-part's arguments but the element's --array-index, which each engine gives its own way."""
        words = ["analyze-part", str(self.run), "--out", str(self.parts), "--array-size", str(self.elements)]
        return [*words, *self._timeline_words(), *(["--strict"] if self.strict else [])]

    def partial_arguments(self) -> list[str]:
        """analyze-merge --partial's arguments (a tree's blocks) but the element's --array-index."""
        words = ["analyze-merge", str(self.parts), "--partial", str(self.partials), "--array-size", str(self.blocks)]
        return [*words, *(["--strict"] if self.strict else [])]

    def merge_arguments(self) -> list[str]:
        """analyze-merge's arguments: the parts (a tree's partial merges) into report.html and analysis.json in the
        run folder."""
        words = ["analyze-merge", str(self.partials if self.blocks else self.parts), "--output", str(self.run)]
        if self.straggler_pct is not None:
            words += ["--straggler-pct", f"{self.straggler_pct:g}"]
        words += self.merge_options  # the findings' inputs (--flops-per-step ...): the merge judges as 'analyze' would
        return [*words, *(["--timeline"] if self.timeline else []), *(["--strict"] if self.strict else [])]

    def _timeline_words(self) -> list[str]:
        if not self.timeline:
            return []
        cap = ["--timeline-max-events", str(self.timeline_max_events)] if self.timeline_max_events else []
        return ["--timeline", *cap]


def elements_for(reports: int) -> int:
    """How many map elements share `reports` reports: one each up to MAX_ELEMENTS, then MAX_ELEMENTS."""
    return max(1, min(reports, MAX_ELEMENTS))


def blocks_for(reports: int, tree_ranks: int) -> int:
    """Partial merges of a tree: none up to `tree_ranks` reports, then one per BLOCK_PARTS parts (at least 2)."""
    return 0 if reports <= tree_ranks else max(2, math.ceil(reports / BLOCK_PARTS))


def make_plan(
    run: Path, max_parallel: int | None = None, timeline: bool = False, timeline_max_events: int | None = None,
    straggler_pct: float | None = None, strict: bool = False, tree_ranks: int = 1024,
) -> AnalysisPlan:  # fmt: skip
    """The plan of analyzing the run folder `run` on a cluster (its reports found as 'invoke analyze' finds them);
    past `tree_ranks` reports its merge is a tree."""
    from nsyskit.analysis.read.discover import discover

    run = Path(run).resolve()
    if not run.is_dir():
        raise UsageError(f"{run} is not a run folder", fix="pass the run folder (reports/<run-id>) that holds the reports")
    reports = [path for _rank, path in discover([run])]
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--slurm-max-parallel {max_parallel}", fix="give 1 or more (elements running at once)")
    return AnalysisPlan(run, reports, elements_for(len(reports)), max_parallel, timeline, timeline_max_events,
                        straggler_pct, strict, blocks=blocks_for(len(reports), tree_ranks))  # fmt: skip


def words(command: str) -> list[str]:
    """A command setting (SLURM_NSYSKIT, K8S_ANALYZE_COMMAND) as its words."""
    return shlex.split(command)


def index_list(text: str) -> list[int]:
    """The indices of an index-range text (Slurm's ArrayTaskId and sacct's '[...]', Kubernetes' failedIndexes):
    '4', '3-15%2', '[1,3,5-7]'."""
    indices: list[int] = []
    for piece in text.strip("[]").partition("%")[0].split(","):
        first, _sep, last = piece.partition("-")
        if first.isdigit():
            indices += range(int(first), int(last) + 1) if last.isdigit() else [int(first)]
    return indices


def clear_parts(plan: AnalysisPlan) -> int:
    """Remove the part files an earlier analysis left (the map writes every one again); how many were removed.

    Stale parts would count as done while the new map runs, and a stale failure would outlive its fix.
    """
    from nsyskit.analysis.mapreduce.parts import SUFFIX

    removed = 0
    for folder in (plan.parts, plan.partials):  # a stale partial merge would hold an earlier map's parts
        for stale in folder.glob("*" + SUFFIX) if folder.is_dir() else []:
            stale.unlink()
            removed += 1
    return removed


def parts_done(plan: AnalysisPlan) -> int:
    """How many parts the map has written so far (each is written whole, then renamed into place)."""
    from nsyskit.analysis.mapreduce.parts import SUFFIX

    return sum(1 for _ in plan.parts.glob("*" + SUFFIX)) if plan.parts.is_dir() else 0


def count_elements(plan: AnalysisPlan) -> str:
    """'16 report(s) in 16 element(s)' / '1,024 report(s) in 256 element(s) of up to 4, at most 32 at once'."""
    per = math.ceil(len(plan.reports) / plan.elements)
    shape = f" of up to {per}" if per > 1 else ""
    cap = f", at most {plan.max_parallel} at once" if plan.max_parallel else ""
    return f"{len(plan.reports):,} report(s) in {plan.elements} element(s){shape}{cap}"


def count_blocks(plan: AnalysisPlan) -> str:
    """'4,096 parts in 8 partial merges of up to 512, then the final merge of those' (a tree's middle level)."""
    per = math.ceil(len(plan.reports) / plan.blocks)
    return f"{len(plan.reports):,} parts in {plan.blocks} partial merges of up to {per}, then the final merge of those"


def record_submitted(plan: AnalysisPlan, map_id: str, merge_id: str, **more: object) -> None:
    """What was submitted, in the run's analysis-jobs/job.json: the two jobs, the map's shape, when, where parts go."""
    from nsyskit.jobdir import write_record

    write_record(plan.folder, map_id=map_id, merge_id=merge_id, reports=len(plan.reports), elements=plan.elements,
                 submitted=time.time(), parts=str(plan.parts), **more)  # fmt: skip


def without_report_line(log: str, report: Path) -> str:
    """A merge's log less its '✓ report: REPORT' line, which the command prints itself (else it shows twice)."""
    said = {f"report: {report}", f"✓ report: {report}"}
    return "".join(line for line in log.splitlines(keepends=True) if line.strip() not in said)


def submit_and_follow(runner, cfg, root: Path, plan: AnalysisPlan, wait: bool, dry_run: bool = False) -> list[str]:
    """Submit the plan's map and merge through `runner` (nsyskit.slurm.analysis, nsyskit.k8s.analysis); with `wait`,
    follow them to the merged report; with `dry_run`, check and render only. The lines to print."""
    if dry_run:
        return [f"rendered {path} (nothing submitted)" for path in runner.prepare(cfg, root, plan)]
    jobs = runner.submit(cfg, root, plan)
    lines = runner.submitted_lines(plan, jobs)
    if not wait:
        return lines
    for line in lines:
        console.info(line)
    return [f"report: {runner.follow(cfg, plan, jobs)}"]
