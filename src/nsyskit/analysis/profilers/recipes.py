"""Run NVIDIA's nsys recipes (multi-report analyses, nsys 2023.4+) on a report, or say clearly why not."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from nsyskit.analysis.read import nsys
from nsyskit.errors import NsysUnavailable, ReportFileError

DEFAULT_RECIPES = ("cuda_gpu_kern_sum", "nccl_sum", "nccl_gpu_overlap_trace", "gpu_gaps")
RECIPE_TIMEOUT_S = 1800


@dataclass(frozen=True)
class RecipeResult:
    """One recipe run: its name, where it wrote, and the error line when it failed."""

    name: str
    output: Path
    ok: bool
    message: str


def run_recipes(report: Path, recipes: tuple[str, ...] = DEFAULT_RECIPES) -> list[RecipeResult]:
    """Run each recipe on `report` (a .nsys-rep or a folder of them) into <folder>/recipes/<name>/."""
    if not report.exists():
        raise ReportFileError(report, "no such file or folder", "check the path")
    binary = nsys.require_nsys("run nsys recipes", report)
    if not nsys.has_recipes(binary):
        raise NsysUnavailable(
            report,
            f"the installed nsys {nsys.version(binary) or ''} has no 'recipe' command (recipes came with nsys 2023.4)".replace(
                "  ", " "
            ),
            "install a newer Nsight Systems for recipes; 'invoke analyze' computes the kernel summary, NCCL sizes and overlaps without them",
        )
    folder = (report if report.is_dir() else report.parent) / "recipes"
    folder.mkdir(parents=True, exist_ok=True)
    results = []
    for name in recipes:
        output = folder / name
        cmd = [binary, "recipe", name, "--input", str(report), "--output", str(output), "--force-overwrite"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=RECIPE_TIMEOUT_S)
        lines = [line for line in (run.stderr or run.stdout).strip().splitlines() if line.strip()]
        results.append(
            RecipeResult(
                name,
                output,
                run.returncode == 0,
                "" if run.returncode == 0 else (lines[-1] if lines else f"exit {run.returncode}"),
            )
        )
    return results
