"""The analysis as a map and a reduce that any engine can run: one part file per report (the per-rank tables of
analyze_file, small whatever the report's size), and the merge of a folder of parts into the run's Analysis.

A part is an .npz (no pickle: nothing in it runs code): numeric columns as arrays, text columns and the per-rank
summaries as JSON, and a header naming the part format, the nsyskit version, the report, its rank and the run's
report list, so that a merge refuses parts of another version and names the ranks whose parts are missing.
Statistics that do not merge by sums (medians, standard deviations) are per rank in every table, so the part
keeps them whole; the run-level tables (top kernels, NCCL sizes, ranks) are computed from the per-rank rows at
the merge, exactly as in one process.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nsyskit import __version__
from nsyskit.analysis.compute.result import Analysis
from nsyskit.analysis.compute.table import Table
from nsyskit.analysis.read.discover import discover
from nsyskit.analysis.read.runinfo import not_profiled
from nsyskit.analysis.trace import TABLE_KEYS, analyze_file, merge
from nsyskit.errors import AnalysisError, UsageError

PART_FORMAT = 1
SUFFIX = ".part.npz"
HEADER = "header"


def part_name(report: Path) -> str:
    """The part file of a report: its name with the part suffix (one part per report)."""
    return report.name + SUFFIX


def _encode(results: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The per-rank results of one report as named arrays (numbers as they are, texts and summaries as JSON)."""
    arrays: dict[str, np.ndarray] = {}
    plain: list[dict[str, Any]] = []
    for index, result in enumerate(results):
        tables: dict[str, dict[str, str]] = {}
        for key in TABLE_KEYS:
            kinds = tables[key] = {}
            for column, values in result[key].columns.items():
                name = f"{index}/{key}/{column}"
                if values.dtype == object:
                    kinds[column] = "json"
                    arrays[name] = np.asarray(json.dumps([_plain(v) for v in values.tolist()]))
                else:
                    kinds[column] = "array"
                    arrays[name] = values
        plain.append({
            "rank": result["rank"], "source": result["source"], "nsys_version": result["nsys_version"],
            "summary": result["summary"], "warnings": result.get("warnings"), "tables": tables,
        })  # fmt: skip
    arrays["results"] = np.asarray(json.dumps(plain))
    return arrays


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _decode(data: Any, plain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for index, item in enumerate(plain):
        result = {k: item[k] for k in ("rank", "source", "nsys_version", "summary")}
        for key, kinds in item["tables"].items():
            columns = {}
            for column, kind in kinds.items():
                stored = data[f"{index}/{key}/{column}"]
                columns[column] = np.asarray(json.loads(str(stored)), dtype=object) if kind == "json" else stored
            result[key] = Table(columns)
        if item["warnings"] is not None:
            result["warnings"] = item["warnings"]
        results.append(result)
    return results


def write_part(results: list[dict[str, Any]], header: dict[str, Any], folder: Path) -> Path:
    """Write one report's part into `folder` atomically (a reader never sees half a part); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / part_name(Path(header["report"]))
    arrays = _encode(results)
    arrays[HEADER] = np.asarray(json.dumps({"format": PART_FORMAT, "nsyskit": __version__, **header}))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=SUFFIX)
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def read_part(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, per-rank results) of a part; a truncated part, or one of another format or version, is one error."""
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data[HEADER]))
            if header.get("format") != PART_FORMAT or header.get("nsyskit") != __version__:
                raise AnalysisError(
                    path, f"is a part of nsyskit {header.get('nsyskit')} (part format {header.get('format')}), "
                    f"not of this nsyskit {__version__} (format {PART_FORMAT})",
                    "map the report again with this version ('invoke analyze-part'), or merge with the version that wrote it",
                )  # fmt: skip
            return header, _decode(data, json.loads(str(data["results"])))
    except AnalysisError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise AnalysisError(
            path, f"is not a whole part file ({type(exc).__name__}: {exc})",
            "map its report again ('invoke analyze-part REPORT --out PARTS_DIR'): it was cut short or damaged",
        ) from None  # fmt: skip


def map_reports(
    paths: list[str | Path], out: Path, index: int | None = None, size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:  # fmt: skip
    """The map: analyze the reports under `paths` (array element `index` of `size` takes every size-th report from
    `index` on) and write one part per report into `out`; the parts written."""
    if (index is None) != (size is None) or (size is not None and not 0 <= index < size):
        raise UsageError(f"--array-index {index} of --array-size {size}", fix="give both, with 0 <= index < size")
    found = discover(paths)
    _unprofiled, unprofiled_line = not_profiled([path for _rank, path in found])
    everything = [str(path) for _rank, path in found]
    mine = found if size is None else found[index::size]
    written = []
    for done, (rank, path) in enumerate(mine, start=1):
        header = {"report": str(path), "rank": rank, "reports": everything, "unprofiled": unprofiled_line,
                  "folder": str(Path(paths[0]) if Path(paths[0]).is_dir() else Path(paths[0]).parent)}  # fmt: skip
        written.append(write_part(analyze_file(rank, path), header, out))
        if progress:
            progress(done, len(mine))
    return written


def merge_parts(folder: Path, straggler_pct: float = 5.0) -> tuple[Analysis, dict[str, Any]]:
    """The reduce: the Analysis of every part in `folder`, ranks in the order 'invoke analyze' gives them, and the
    run's facts (its folder, the reports whose parts are missing)."""
    paths = sorted(folder.glob("*" + SUFFIX)) if folder.is_dir() else []
    if not paths:
        raise AnalysisError(folder, "holds no part files (*.part.npz)", "map the reports first: 'invoke analyze-part'")
    parts = [(path, *read_part(path)) for path in paths]
    by_rank: dict[int, Path] = {}
    for path, header, _results in parts:
        if header["rank"] in by_rank:
            raise AnalysisError(
                path, f"claims rank {header['rank']}, as {by_rank[header['rank']]} does",
                "keep one part per report: remove the stale one (two runs' parts in one folder?)",
            )  # fmt: skip
        by_rank[header["rank"]] = path
    parts.sort(key=lambda part: part[1]["rank"])
    first = parts[0][1]
    mapped = {header["report"] for _path, header, _results in parts}
    missing = [report for report in first["reports"] if report not in mapped]
    shown = ", ".join(Path(m).name for m in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    incomplete = [f"{len(missing)} of {len(first['reports'])} reports have no part in {folder} (their map failed or "
                  f"has not run): {shown}; this analysis covers the others"] if missing else []  # fmt: skip
    analysis = merge([results for _path, _header, results in parts], straggler_pct, first["unprofiled"], incomplete)
    return analysis, {"folder": first["folder"], "missing": missing, "parts": len(parts)}
