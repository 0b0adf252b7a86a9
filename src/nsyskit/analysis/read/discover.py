"""Find a run's reports and the rank each one holds: from 'rank_N' in the name, run.json, or the order of the names."""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

from nsyskit.analysis.read import nsys
from nsyskit.analysis.read.reader import ExportReader
from nsyskit.analysis.read.runinfo import run_record
from nsyskit.errors import AnalysisError, ReportFileError

RANK_IN_NAME = re.compile(r"(?:^|[_\-.])rank[_\-.]?(\d+)", re.IGNORECASE)
# Best first: an export is read as is; a report is exported; a .qdstrm (Debian's nsys leaves them) is imported first.
REPORT_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".qdstrm")
OUTPUT_DIR_NAMES = {"analysis", "analysis-parts", "analysis-jobs"}  # folders the kit writes below a run folder
MAX_RANK = (1 << 63) - 1
GLOB = re.compile(r"[*?\[]")  # a path with these is a pattern (quoted, so the shell left it to us)


def discover(paths: list[str | Path]) -> list[tuple[int, Path]]:
    """(rank, report file) for every report under the given run folders / files; one file per report stem.

    A stem present as .sqlite, .nsys-rep and .qdstrm is read from the first that exists. Ranks come from
    'rank_N' in the name, else from run.json's record of the report, else the lowest ranks no file claims.
    Two files claiming one rank are an error naming both.
    """
    return [(rank, path) for rank, path, _named in discover_named(paths)]


def discover_named(paths: list[str | Path]) -> list[tuple[int, Path, bool]]:
    """discover's (rank, report file), each with whether its rank is named (by 'rank_N' or run.json) rather than
    given by the order of the names: a report mapped on its own cannot know the latter (the merge numbers it)."""
    chosen: dict[Path, Path] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            candidates = sorted(
                p for p in path.rglob("*") if p.suffix in REPORT_SUFFIXES and not (OUTPUT_DIR_NAMES & set(p.parts))
            )
            if not candidates:
                raise ReportFileError(
                    path,
                    "no .nsys-rep, .qdrep, .sqlite or .qdstrm reports in this folder",
                    "pass the run folder 'invoke run' wrote (reports/<run-id>)",
                )
        elif path.exists():
            candidates = [path]
        elif GLOB.search(str(given)):  # a pattern: one test's reports of a several-test run, a subset of ranks
            candidates = sorted(p for p in Path(path.anchor or ".").glob(str(path.relative_to(path.anchor or ".")))
                                if p.suffix in REPORT_SUFFIXES)  # fmt: skip
            if not candidates:
                raise ReportFileError(path, "the pattern matches no .nsys-rep, .qdrep, .sqlite or .qdstrm report",
                                      "check the pattern (quote it so the shell leaves it to nsyskit)")  # fmt: skip
        else:
            raise ReportFileError(path, "no such file or folder", "check the path")
        for candidate in candidates:
            stem = candidate.with_suffix("")
            best = chosen.get(stem)
            if best is None or _preference(candidate) < _preference(best):
                chosen[stem] = candidate
    files = sorted(chosen.values())
    recorded = _ranks_from_run_json(files)
    claimed: dict[int, Path] = {}
    unclaimed: list[Path] = []
    for file in files:
        match = RANK_IN_NAME.search(file.name)
        rank = int(match.group(1)) if match else recorded.get(file.with_suffix("").name)
        if rank is None:
            unclaimed.append(file)
            continue
        if rank > MAX_RANK:
            raise ReportFileError(
                file, f"rank {rank} in its name is beyond a 64-bit integer", "rename it to rank_<N> with N a real rank"
            )
        if rank in claimed:
            raise AnalysisError(file, f"claims rank {rank}, as {claimed[rank]} does", _one_per_rank_fix(file, paths))
        claimed[rank] = file
    return sorted([(rank, file, True) for rank, file in claimed.items()] + number_unnamed(unclaimed, set(claimed)))


def number_unnamed(unnamed: list[Path], claimed: set[int]) -> list[tuple[int, Path, bool]]:
    """The reports whose rank nothing names, in the order of their sorted paths, each given the lowest rank that no
    named report claims (as 'invoke analyze' numbers them)."""
    free = (r for r in range(len(unnamed) + len(claimed) + 1) if r not in claimed)
    return [(next(free), file, False) for file in sorted(unnamed)]


@functools.lru_cache(maxsize=1 << 16)
def report_stem(report: str) -> str:
    """A report's path without its suffix (one report per stem, as discover keeps one file per stem); each report's
    computed once, though a merge asks for it in every listing that names it (a Path per ask: 28k at 4,096 ranks)."""
    return str(Path(report).with_suffix(""))


def number_reports(
    owned: list[tuple[str, int, bool]], listed: list[list[tuple[str, int, bool]]]
) -> tuple[dict[str, int], str]:
    """Every report the parts hold or their maps listed -> its rank in the run; and a line saying so when the ranks
    of reports that nothing names had to be numbered here ('' otherwise).

    `owned`: each part's (report, rank, whether named); `listed`: each map's list of them (once per map). A named rank
    (rank_N in the name, run.json) is kept. The others are numbered by number_unnamed over all the reports, as
    'invoke analyze' of the same files numbers them: reports mapped each on its own all said rank 0.
    """
    stems: dict[str, str] = {}  # one report per stem, as discover keeps one file per stem
    named: dict[str, int] = {}
    for report, rank, is_named in itertools.chain(owned, *listed):
        stem = report_stem(report)
        stems.setdefault(stem, report)
        if is_named:
            named.setdefault(stem, rank)
    unnamed = [Path(stems[stem]) for stem in stems if stem not in named]
    numbered = {str(path): rank for rank, path, _named in number_unnamed(unnamed, set(named.values()))}
    by_stem = {stem: named[stem] if stem in named else numbered[stems[stem]] for stem in stems}
    ranks = {report: by_stem[report_stem(report)] for report, _r, _n in itertools.chain(owned, *listed)}
    if not unnamed or len(listed) == 1:
        return ranks, ""  # no unnamed report, or one map listed them all and numbered them as this does
    shown = ", ".join(f"{path.name} = rank {numbered[str(path)]}" for path in sorted(unnamed)[:8])
    shown += f" and {len(unnamed) - 8} more" if len(unnamed) > 8 else ""
    return ranks, (f"{len(unnamed)} reports whose names and run.json give no rank were mapped apart: numbered in the "
                   f"order of their sorted names, as 'invoke analyze' numbers them: {shown}")  # fmt: skip


def _one_per_rank_fix(file: Path, paths: list[str | Path]) -> str:
    """How to pass one report per rank: for a run of several NCCL tests (each rank has a report per test), one
    test's reports by a pattern; otherwise move or rename one of the two."""
    for given in paths:
        folder = Path(given)
        record = run_record(folder) if folder.is_dir() else None
        tests = getattr(record, "nccl_tests", None) or []
        if len(tests) > 1:
            tags = [str(t.get("name", "")).replace("_perf", "").replace("_", "-") for t in tests if isinstance(t, dict)]
            return (f"{folder} holds the reports of {len(tests)} NCCL tests ({', '.join(tags)}): analyze one test's "
                    f"reports at a time, e.g. invoke analyze '{folder}/*-{tags[0]}_*'")  # fmt: skip
    return "pass one report per rank (move or rename one of them)"


def _preference(path: Path) -> int:
    return REPORT_SUFFIXES.index(path.suffix) if path.suffix in REPORT_SUFFIXES else len(REPORT_SUFFIXES)


def _ranks_from_run_json(files: list[Path]) -> dict[str, int]:
    """Report stem -> rank from the run records (run.json) beside the reports, as the ranks' wrappers wrote them."""
    found: dict[str, int] = {}
    for folder in sorted({f.parent for f in files}):
        record = run_record(folder)
        for status in record.ranks if record else []:
            if not 0 <= status.rank <= MAX_RANK:
                continue
            for name in (status.report, status.sqlite):
                if name:
                    found[Path(name).with_suffix("").name] = status.rank
    return found


def open_export(path: Path) -> ExportReader:
    """An ExportReader for a .sqlite, exporting a .nsys-rep/.qdrep (and importing a .qdstrm) with nsys first."""
    if path.suffix == ".qdstrm":
        path = nsys.import_qdstrm(path)
    if path.suffix in (".nsys-rep", ".qdrep"):
        if not path.exists():
            raise ReportFileError(path, "no such file", "check the path")
        path = nsys.export_sqlite(path)
    return _with_payloads(ExportReader(path))


def _with_payloads(reader: ExportReader) -> ExportReader:
    """The reader, or one of a fresh export with NCCL's payload values when the .sqlite was exported without them,
    its .nsys-rep sits beside it and the nsys here can export them (once: cached; said on the terminal)."""
    from nsyskit import console
    from nsyskit.analysis.read import payloadblob
    from nsyskit.ranks import nsysargs

    rep = reader.path.with_suffix(".nsys-rep")
    if not rep.is_file() or not payloadblob.exported_without_values(reader):
        return reader
    binary = nsys.find_nsys()
    if binary is None or not nsysargs.exports_payloads(binary):
        return reader  # its NVTX read says how to re-export it
    console.info(f"{reader.path.name} was exported without NCCL's payload values (the message sizes): using an "
                 f"export of {rep.name} with --include-blobs=true (made once, cached)")  # fmt: skip
    reader.close()
    return ExportReader(nsys.export_payloads(rep))
