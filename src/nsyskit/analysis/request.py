"""What 'invoke analyze' is asked to do, as one typed request: the run, the outputs, the mode and its options.

The task parses its flags into an AnalyzeRequest and hands it to one entry point (nsyskit.analyze.answer), which
dispatches on the mode; a new option is a field here and a use there, never another branch in the task. The
request checks that its flags go together (check()) before anything is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsyskit.errors import UsageError

DEFAULT_TOP = 15  # rows in each terminal table
DEFAULT_STRAGGLER_PCT = 5.0


@dataclass(frozen=True)
class ClusterRequest:
    """--slurm / --k8s: map and merge the run folder where its reports are, through that engine."""

    engine: str  # 'slurm' or 'k8s'
    cfg: Any  # the loaded nsyskit.config.Config (the cluster's settings)
    root: Path  # the project folder (jobs, .env)


@dataclass(frozen=True)
class AnalyzeRequest:
    """One 'invoke analyze' call: which reports, which outputs, and the options of its mode."""

    paths: list[str]
    json: bool = False
    html: bool = True
    output: Path | None = None
    timeline: bool = False
    timeline_max_events: int | None = None  # None: the default cap (present.timeline.DEFAULT_MAX_EVENTS)
    straggler_pct: float | None = None  # None: DEFAULT_STRAGGLER_PCT (a cluster merge keeps its own default)
    top: int = DEFAULT_TOP
    full_names: bool = False
    strict: bool = False
    diff: list[str] | None = None  # the baseline: compare `paths` against it
    fail_on: str | None = None  # with diff: METRIC=PCT,...
    fail_on_regression: float | None = None  # with diff: step_time=PCT
    cluster: ClusterRequest | None = None
    wait: bool = False  # with cluster: follow the jobs to the merged report
    max_parallel: int | None = None  # with cluster: map elements at once
    tree_ranks: int | None = None  # with cluster: merge as a tree past this many reports (None: ANALYZE_TREE_RANKS)
    dry_run: bool = False  # with cluster: render the jobs, submit nothing
    explain: str | None = None  # a rule id (or 'all'): print what it measures, its thresholds, what to try
    flops_per_step: float | None = None  # the model's training FLOPs of one step on one GPU (low_mfu)
    dtype: str | None = None  # the dtype of the model's math, for the peak MFU is against (None: the run's, else bf16)
    gpu_model: str | None = None  # the GPU model when the export names none (or another), matched on the peak table
    fabric: list[str] | None = None  # nccl-tests outputs (files or a nccl-tests run folder): the fabric's ceiling

    @property
    def mode(self) -> str:
        """'explain', 'diff', 'cluster' or 'run' (one analysis here): what answer() does."""
        if self.explain:
            return "explain"
        if self.diff:
            return "diff"
        return "cluster" if self.cluster else "run"

    @property
    def straggler(self) -> float:
        """The straggler threshold in percent."""
        return DEFAULT_STRAGGLER_PCT if self.straggler_pct is None else self.straggler_pct

    def judge_inputs(self) -> dict[str, Any]:
        """What the findings' rules get from this request beyond the reports (RunView.inputs), read once here;
        --fabric's measured ceiling (nsyskit.nccltests.Ceiling; a file without a table is one error naming it)."""
        given = {"flops_per_step": self.flops_per_step, "dtype": self.dtype, "gpu_model": self.gpu_model}
        inputs = {key: value for key, value in given.items() if value is not None}
        if self.fabric:
            from nsyskit.nccltests import ceiling_from

            inputs["fabric"] = ceiling_from(self.fabric)
        return inputs

    def judge_words(self) -> list[str]:
        """The flags of judge_inputs as a command line ('analyze-merge' on a cluster takes the same; --fabric's paths
        made absolute: the merge job runs elsewhere)."""
        words = ["--flops-per-step", repr(float(self.flops_per_step))] if self.flops_per_step is not None else []
        words += ["--dtype", self.dtype] if self.dtype is not None else []
        words += ["--fabric", ",".join(str(Path(p).resolve()) for p in self.fabric)] if self.fabric else []
        return words + (["--gpu-model", self.gpu_model] if self.gpu_model is not None else [])

    def check(self) -> AnalyzeRequest:
        """The request itself, or a UsageError naming the flags that do not go together."""
        if self.explain:
            return self  # reads no report: the other flags do not matter
        if not self.paths:
            raise no_reports()
        if self.cluster is None and (self.wait or self.dry_run or self.max_parallel is not None or self.tree_ranks):
            raise UsageError("--wait, --dry-run, --slurm-max-parallel and --tree-ranks go with --slurm or --k8s",
                             fix="invoke analyze RUN_FOLDER --slurm --wait")  # fmt: skip
        if not self.diff and (self.fail_on is not None or self.fail_on_regression is not None):
            raise UsageError("--fail-on and --fail-on-regression need a baseline (--diff)",
                             fix="use 'invoke analyze --diff BASELINE RUN --fail-on step_time=5'")  # fmt: skip
        if self.fabric and self.diff:
            raise UsageError("--fabric and --diff both given",
                             fix="compare each run with the fabric on its own: invoke analyze RUN --fabric NCCL_TESTS_OUTPUT")  # fmt: skip
        if self.cluster is not None:
            if self.diff:
                raise UsageError("--diff and --slurm/--k8s both given",
                                 fix="analyze the run on the cluster first, then --diff its analysis.json here")  # fmt: skip
            if len(self.paths) != 1 or not Path(self.paths[0]).is_dir():
                raise UsageError(f"--slurm/--k8s analyze one run folder, not {','.join(self.paths)!r}",
                                 fix="pass the run folder (reports/<run-id>)")  # fmt: skip
        return self


def dtype_flag(value: str | None) -> str | None:
    """--dtype's value (None when not given), or a UsageError naming the dtypes the peak table has."""
    from nsyskit.analysis.compute.peaks import DTYPES

    if value is None or str(value).lower() in DTYPES:
        return None if value is None else str(value).lower()
    raise UsageError(f"--dtype {value!r}: no such dtype", fix=f"one of: {', '.join(DTYPES)}")


def split_paths(text: str | None) -> list[str]:
    """The comma-separated paths of a flag or argument, blanks dropped."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def no_reports() -> UsageError:
    """The error of a command given no run folder or report."""
    return UsageError("no run folder or report given",
                      fix="pass a run folder (reports/<run-id>) or report files separated by commas")  # fmt: skip
