"""Benchmark reading nccl-tests outputs (nsyskit.nccltests) against an awk script that extracts the same columns.

Input: the real outputs of ../shared/real-data/nccl-tests (43 files: every header generation, launcher prefixes,
NCCL INFO lines, rank lists of up to 2,160 lines) concatenated and repeated to --size-mb, written into a temporary
folder (deleted afterwards) and read once to warm the page cache. Both sides run as processes, interleaved (each
sees the same machine load), best of --repeat, and print the same columns: size and both placements' busbw of
every row, and every 'Avg bus bandwidth' value:
  awk (mawk)                     AWK below: cuts OpenMPI tags, srun -l and SkyPilot prefixes, prints the columns
  nsyskit.nccltests.read_file    this package (process start included), printing the same columns
    of which read_file           the reading alone (the file read and parsed), timed inside that process after
                                 its start-up (Python, numpy, the C helper loaded) and before its printing
MB/s of wall and CPU time, the ratio to awk's CPU time, and whether both printed the same rows.
Usage: .venv/bin/python bench/nccltests_bench.py [--size-mb 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARSE_ONLY_OF, PARSE_ONLY = "nsyskit.nccltests.read_file", "  of which read_file (after start-up)"
REAL = (ROOT.parent / "shared" / "real-data" / "nccl-tests").resolve()
AWK = r"""
{ gsub(/\[[0-9]+,[0-9]+\]<std(out|err)>:/, ""); sub(/^(\([^)]*\) |[0-9]+: )+/, "") }
/Avg bus bandwidth/ { sub(/.*Avg bus bandwidth *: */, ""); print "avg", $1; next }
$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[A-Za-z]/ && NF >= 11 { print $1, $(NF-5), $(NF-1) }
"""


def print_columns(path: str) -> None:
    """The columns the awk script prints, from nsyskit's reading (the bench's own side; run as a process)."""
    from nsyskit.native import rowscan
    from nsyskit.nccltests import read_file

    rowscan.functions()  # start-up, not reading: the C helper loaded (and numpy with it), as in any longer session
    wall, cpu = time.perf_counter(), time.process_time()
    result = read_file(Path(path))
    print(f"parsed {time.perf_counter() - wall:.4f} {time.process_time() - cpu:.4f}", file=sys.stderr)
    out = [(row.line, f"{row.size} {row.out_of_place.busbw!r} {row.in_place.busbw!r}")
           for test in result.tests for row in test.rows]  # fmt: skip
    out += [(test.avg_line, f"avg {test.avg_busbw!r}") for test in result.tests if test.avg_line]
    out += [(line, f"avg {value!r}") for line, value in result.stray_avg]
    sys.stdout.write("".join(text + "\n" for _, text in sorted(out)))


def write_input(path: Path, size_mb: int) -> int:
    """The real outputs concatenated, repeated to SIZE_MB; the bytes written."""
    one = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(REAL.glob("*.log")))
    copies = max(1, round(size_mb * 1e6 / len(one)))
    with open(path, "wb") as stream:
        for _ in range(copies):
            stream.write(one)
    return len(one) * copies


def timed(command: list[str]) -> tuple[float, float, str, str]:
    """Wall time, CPU time (user + system), stdout and stderr of one run."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        environ = os.environ | {"PYTHONPATH": str(ROOT / "src")}
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err, env=environ)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(command)} failed: {err.read().decode()[-500:]}")
        return wall, usage.ru_utime + usage.ru_stime, out.read().decode(), err.read().decode()


def same_columns(ours: str, theirs: str) -> str:
    """Whether both printed the same rows and averages (numbers compared as numbers: '0.00' is 0.0)."""

    def numbers(text: str) -> list[tuple]:
        """Each printed line as numbers ('avg' kept as the word)."""
        return [tuple(w if w == "avg" else float(w) for w in line.split()) for line in text.splitlines()]

    mine, awk = numbers(ours), numbers(theirs)
    rows = sum(1 for line in mine if line[0] != "avg")
    verdict = "same" if mine == awk else f"DIFFERENT (awk {len(awk)} lines)"
    return f"{verdict} columns: {rows:,} rows, {len(mine) - rows:,} averages"


def main() -> None:
    """Write the input, run both readers interleaved, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parse", help=argparse.SUPPRESS)  # the nsyskit side, run as its own process
    args = parser.parse_args()
    if args.parse:
        print_columns(args.parse)
        return
    awk = shutil.which("mawk") or shutil.which("awk")
    if not REAL.is_dir() or not awk:
        raise SystemExit(f"needs {REAL} and awk")
    workdir = Path(tempfile.mkdtemp(prefix="nsyskit-nccltests-bench-"))
    try:
        data, script = workdir / "nccl-tests.log", workdir / "columns.awk"
        size = write_input(data, args.size_mb)
        script.write_text(AWK)
        data.read_bytes()  # the page cache, warm for both
        commands = {
            f"awk ({Path(awk).name})": [awk, "-f", str(script), str(data)],
            "nsyskit.nccltests.read_file": [sys.executable, __file__, "--parse", str(data)],
        }
        runs: dict[str, list[tuple[float, float, str, str]]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():
                runs[name].append(timed(command))
        parses = [tuple(map(float, r[3].split()[1:3])) for r in runs[PARSE_ONLY_OF]]
        best = {name: (min(r[0] for r in rs), min(r[1] for r in rs), rs[-1][2]) for name, rs in runs.items()}
        best[PARSE_ONLY] = (min(p[0] for p in parses), min(p[1] for p in parses), "")
        awk_run, our_run = best[f"awk ({Path(awk).name})"], best[PARSE_ONLY_OF]
        print(f"{size / 1e6:.0f} MB of real nccl-tests outputs ({data}), best of {args.repeat}")
        print(f"  {same_columns(our_run[2], awk_run[2])}")
        print(f"  {'reader':<36}{'wall s':>8}{'MB/s':>8}{'CPU s':>8}{'MB/CPU-s':>10}{'vs awk (CPU)':>14}")
        for name, (wall, cpu, _) in best.items():
            print(f"  {name:<36}{wall:>8.2f}{size / wall / 1e6:>8.0f}{cpu:>8.2f}{size / max(cpu, 1e-3) / 1e6:>10.0f}"
                  f"{awk_run[1] / max(cpu, 1e-3):>13.2f}x")  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"(temporary folder {workdir} deleted)")


if __name__ == "__main__":
    main()
