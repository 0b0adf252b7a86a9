"""What 'invoke nccl-tests' does: read the outputs (and a baseline), pair them, draw the plot, name the failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nsyskit.errors import NcclTestsFailed, NsyskitError, UsageError
from nsyskit.nccltests.diff import Diff, diff_tests
from nsyskit.nccltests.plot import busbw_plot
from nsyskit.nccltests.reading import Reading, no_table_error, read_paths

PLOT_NAME, JSON_NAME = "nccl-tests.png", "nccl-tests.json"  # what a run folder gets


@dataclass
class Outcome:
    """The reading, the diff against a baseline, the files written, the warnings and the error to exit with."""

    reading: Reading
    baseline: Reading | None = None
    diff: Diff | None = None
    written: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings and the failures beyond the one the error names
    error: NsyskitError | None = None

    def to_dict(self) -> dict:
        """JSON form, unrounded."""
        return {
            "files": [result.to_dict() for result in self.reading.files],
            "without_table": [
                {"path": r.path, "error": no_table_error(r).one_line()} for r in self.reading.without_table
            ],
            "baseline": [result.to_dict() for result in self.baseline.files] if self.baseline else None,
            "diff": self.diff.to_dict() if self.diff else None,
        }


def check_plot_target(plot: str | None) -> Path | None:
    """The --plot path, once its folder exists and it names a .png (checked before any reading)."""
    if plot is None:
        return None
    path = Path(plot).expanduser()
    if path.suffix.lower() != ".png":
        raise UsageError(f"--plot {plot!r}: the plot is a PNG image; fix: name a file ending in .png")
    if not path.parent.is_dir():
        raise UsageError(f"--plot {plot!r}: folder {str(path.parent)!r} does not exist; fix: create it or name another")
    return path


def _errors(reading: Reading, notes: list[str]) -> NsyskitError | None:
    """The error to exit with (a file without a table first, else the first failure); the rest go to NOTES."""
    no_table = [no_table_error(result) for result in reading.without_table]
    failures = [problem for result in reading.files for problem in result.all_failures()]
    if no_table:
        notes += [f"failed: {problem}" for problem in failures] + [e.one_line() for e in no_table[1:]]
        return no_table[0]
    if failures:
        notes += [f"failed: {problem}" for problem in failures[1:]]
        first = failures[0]
        return NcclTestsFailed(f"{first.path}:{first.line}", first.message, more=len(failures) - 1)
    return None


def nccl_tests_report(arguments: list[str], diff: list[str] | None = None, plot: Path | None = None) -> Outcome:
    """Read ARGUMENTS (files, globs, run folders), diff against DIFF's tests, write the plot(s) and the JSON."""
    import json

    reading = read_paths(arguments)
    outcome = Outcome(reading)
    if diff:
        outcome.baseline = read_paths(diff)
        outcome.diff = diff_tests(outcome.baseline.tests, reading.tests)
    outcome.notes += [str(p) for result in reading.files for p in result.all_warnings()]
    outcome.error = _errors(reading, outcome.notes)
    if not reading.tests:
        return outcome
    image = busbw_plot(reading.tests, outcome.baseline.tests if outcome.baseline else None)
    targets = [plot] if plot else []
    folders = [Path(a) for a in arguments if Path(a).is_dir() and (Path(a) / "run.json").is_file()]
    for folder in folders:
        (folder / JSON_NAME).write_text(json.dumps(outcome.to_dict(), indent=1))
        outcome.written.append(str(folder / JSON_NAME))
        targets.append(folder / PLOT_NAME)
    for target in targets:
        if image is not None:
            target.write_bytes(image)
            outcome.written.append(str(target))
    return outcome
