"""What the ranks run, in one place: the DDP example's command line, each NCCL test's (binary, flags, -g, MPI), the user's COMMAND.

nsyskit.ranks.launch wraps these in the nsys wrapper and the launchers (mpirun, srun, the MPIJob); the config parses
NCCL_TESTS with `parse_tests`. The binaries a test may name are those the image's nccl-tests step installs: one
list, Container-Root/nsyskit/install/nccl-tests-binaries.txt, read by that install script and here.
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from nsyskit.assets import PACKAGED

WORKLOADS = ("ddp", "nccl-tests", "command")  # WORKLOAD's values: the DDP example (default), the NCCL tests, COMMAND
EXAMPLE = "/nsyskit/workload/train.py"  # paths inside the image (Container-Root/ is copied to /)
TEE = "/nsyskit/workload/rank0tee.py"  # rank 0 copies a test's output to a file (nccl-tests print only there)
OUTPUT_FOLDER = "nccl-tests"  # in the run folder: <test>.out, rank 0's output of each test
BINARIES_FILE = PACKAGED / "Container-Root" / "nsyskit" / "install" / "nccl-tests-binaries.txt"
TEST_SEPARATOR = ";"  # between tests in NCCL_TESTS (no test flag takes one; .env keeps it literally)
# Which workloads are MPI programs: the image builds nccl-tests with MPI=1 (one process per rank, started by mpirun or
# srun --mpi), while the example's ranks meet through torch.distributed (torchrun on one node, MASTER_ADDR).
MPI_PROGRAMS = ("nccl-tests",)

# nccl-tests' options (v2.13's getopt: every one takes a value): short letter -> (long name, kind of value).
OPTIONS = {
    "t": ("nthreads", "count"), "g": ("ngpus", "count"), "b": ("minbytes", "size"), "e": ("maxbytes", "size"),
    "i": ("stepbytes", "size"), "f": ("stepfactor", "count"), "n": ("iters", "number"), "m": ("agg_iters", "number"),
    "w": ("warmup_iters", "number"), "N": ("run_cycles", "number"), "p": ("parallel_init", "number"),
    "c": ("check", "number"), "o": ("op", "word"), "d": ("datatype", "word"), "r": ("root", "number"),
    "z": ("blocking", "number"), "y": ("stream_null", "number"), "T": ("timeout", "number"),
    "G": ("cudagraph", "number"), "C": ("report_cputime", "number"), "a": ("average", "number"),
    "R": ("local_register", "number"),
}  # fmt: skip
LONG_OPTIONS = {long: short for short, (long, _kind) in OPTIONS.items()}
SIZE = re.compile(r"([0-9]+)([KkMmGg]?)")  # nccl-tests' sizes: bytes with an optional K, M or G (powers of 1024)
DEFAULT_TESTS = "all_reduce_perf -b 8 -e 2G -f 2 -g 1"


class ExampleSettings(Protocol):
    """The settings the example's command line is made of (a Config has them; typed apart: config imports this module)."""

    model_size: str
    batch_size: int
    seq_len: int
    steps: int
    profile_steps: tuple[int, int] | None
    profiler: str


class SettingProblem(ValueError):
    """What is wrong with a setting of what the ranks run, and how to fix it (the config loader adds key and value)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.fix = problem, fix


class NcclTestsProblem(SettingProblem):
    """What is wrong with NCCL_TESTS."""


@dataclass(frozen=True)
class NcclTest:
    """One entry of NCCL_TESTS: a binary the image installs and its flags; `name` is unique within the run."""

    name: str  # the binary, or binary-2, -3 ... when NCCL_TESTS runs one binary again
    binary: str
    args: tuple[str, ...]

    def option(self, short: str, default: str) -> str:
        """The value the test gives option -SHORT (or --LONG), the last one when given twice; else DEFAULT."""
        found, words = default, list(self.args)
        for index, word in enumerate(words):
            letter, value = _split_option(word)
            if letter == short:
                found = value if value is not None else words[index + 1]
        return found

    @property
    def gpus_per_rank(self) -> int:
        """GPUs each process drives: -g (GPUs per thread) x -t (threads), both 1 by default."""
        return int(self.option("g", "1")) * int(self.option("t", "1"))

    @property
    def tag(self) -> str:
        """The name without '_' (it separates the fields of report names): all-reduce, all-reduce-2."""
        return self.name.replace("_perf", "").replace("_", "-")

    def command(self, report_dir: str) -> list[str]:
        """The application each rank runs: the binary, rank 0 copying its table to REPORT_DIR/nccl-tests/NAME.out."""
        return ["python3", TEE, self.output(report_dir), self.binary, *self.args]

    def output(self, report_dir: str = "") -> str:
        """Where rank 0's output of this test goes: nccl-tests/NAME.out in the run folder, under REPORT_DIR when given."""
        relative = f"{OUTPUT_FOLDER}/{self.name}.out"
        return f"{report_dir}/{relative}" if report_dir else relative

    def text(self) -> str:
        """The entry as NCCL_TESTS holds it."""
        return shlex.join([self.binary, *self.args])


def needs_mpi(workload: str) -> bool:
    """Whether WORKLOAD's ranks must be started by MPI (mpirun, srun --mpi=pmix): the NCCL tests, not the example."""
    return workload in MPI_PROGRAMS


@cache
def installed_binaries() -> tuple[str, ...]:
    """The nccl-tests binaries the image installs (nccl-tests-binaries.txt, shared with the install step)."""
    lines = BINARIES_FILE.read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


def example_command(cfg: ExampleSettings) -> list[str]:
    """What each rank of the DDP example runs (before the wrapper): the example with the run settings."""
    command = [
        "python3", EXAMPLE,
        "--model-size", cfg.model_size,
        "--batch-size", str(cfg.batch_size),
        "--seq-len", str(cfg.seq_len),
        "--steps", str(cfg.steps),
    ]  # fmt: skip
    if cfg.profile_steps:
        command += ["--profile-steps", f"{cfg.profile_steps[0]}-{cfg.profile_steps[1]}"]
    if cfg.profiler == "torch":  # the example profiles itself into the wrapper's $NSYSKIT_TORCH_TRACE
        command.append("--torch-profile")
    return command


def user_command(command: str) -> list[str]:
    """What each rank of WORKLOAD=command runs (before the wrapper): COMMAND split as a shell would (checked when loaded)."""
    return shlex.split(command)


def _split_option(word: str) -> tuple[str | None, str | None]:
    """(short letter, attached value or None) of an option word: -b, -b8, --minbytes, --minbytes=8; (None, None) else."""
    if word.startswith("--"):
        long, equals, value = word[2:].partition("=")
        return LONG_OPTIONS.get(long, "?" + long), value if equals else None
    if word.startswith("-") and len(word) >= 2:
        return word[1], word[2:] or None
    return None, None


def _size(value: str) -> int | None:
    """Bytes of an nccl-tests size (8, 128K, 2G), or None when it is not one."""
    match = SIZE.fullmatch(value)
    if not match:
        return None
    return int(match[1]) * 1024 ** " kmg".index(match[2].lower() or " ")


def _check_value(entry: str, letter: str, value: str) -> None:
    """A NcclTestsProblem when the value of option -LETTER is not of its kind."""
    long, kind = OPTIONS[letter]
    if kind == "size" and _size(value) is None:
        raise NcclTestsProblem(f"{entry}: -{letter} ({long}) {value!r} is not a size",
                            "give bytes with an optional K, M or G, e.g. -b 8 -e 2G")  # fmt: skip
    if kind in ("count", "number") and not value.isdigit():
        raise NcclTestsProblem(f"{entry}: -{letter} ({long}) {value!r} is not a whole number",
                            f"give a whole number, e.g. -{letter} 1")  # fmt: skip
    if kind == "count" and int(value) < 1:
        raise NcclTestsProblem(f"{entry}: -{letter} ({long}) must be 1 or more", f"e.g. -{letter} 1")
    if kind == "word" and not value:
        raise NcclTestsProblem(
            f"{entry}: -{letter} ({long}) has no value", f"e.g. -{letter} {'sum' if letter == 'o' else 'float'}"
        )


def _check_flags(entry: str, args: list[str]) -> None:
    """A NcclTestsProblem for the first flag nccl-tests would not take: unknown, without its value, or of the wrong kind."""
    index = 0
    while index < len(args):
        word = args[index]
        letter, value = _split_option(word)
        if letter in ("h", "?help"):
            raise NcclTestsProblem(f"{entry}: {word} prints the help and runs no test", f"remove {word}")
        if letter is None or letter not in OPTIONS:
            what = f"the unknown option {word}" if letter else f"the stray word {word!r}"
            raise NcclTestsProblem(f"{entry} has {what}",
                                "use nccl-tests' options, e.g. -b 8 -e 2G -f 2 -g 1 (see the binary's -h)")  # fmt: skip
        if value is None:
            if index + 1 >= len(args):
                raise NcclTestsProblem(f"{entry}: {word} has no value", f"give one, e.g. {word} 1")
            value, index = args[index + 1], index + 1
        _check_value(entry, letter, value)
        index += 1


def _parse_entry(text: str, entry: str) -> tuple[str, list[str]]:
    """(binary, flags) of the test TEXT (called ENTRY in messages), checked: a binary the image installs, flags nccl-tests take."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise NcclTestsProblem(f"{entry} does not split into words ({exc})", "balance the quotes") from None
    binary, args = words[0], words[1:]
    known = installed_binaries()
    if binary not in known:
        guess = difflib.get_close_matches(binary.rsplit("/", 1)[-1], known, n=1, cutoff=0.6)
        hint = f"did you mean {guess[0]}? " if guess else ""
        path = " (a path: give the name alone, the image puts them on PATH)" if "/" in binary else ""
        raise NcclTestsProblem(f"{entry} names {binary}, which the image does not install{path}",
                            f"{hint}use one of: {', '.join(known)}")  # fmt: skip
    _check_flags(entry, args)
    test = NcclTest(binary, binary, tuple(args))
    low, high = _size(test.option("b", "32M")), _size(test.option("e", "32M"))
    if low is not None and high is not None and low > high:
        raise NcclTestsProblem(f"{entry}: -b (minbytes) is larger than -e (maxbytes)", "use -b <= -e, e.g. -b 8 -e 2G")
    return binary, args


def parse_tests(raw: str) -> tuple[NcclTest, ...]:
    """NCCL_TESTS: tests separated by ';', each a binary the image installs and its flags (empty: none)."""
    tests: list[NcclTest] = []
    seen: dict[str, int] = {}
    entries = [part.strip() for part in raw.split(TEST_SEPARATOR) if part.strip()]
    for number, text in enumerate(entries, 1):
        # Messages name the test only when there are several: the value itself is shown beside them.
        binary, args = _parse_entry(text, f"test {number} ({text!r})" if len(entries) > 1 else "the test")
        seen[binary] = seen.get(binary, 0) + 1
        name = binary if seen[binary] == 1 else f"{binary}-{seen[binary]}"
        tests.append(NcclTest(name, binary, tuple(args)))
    return tuple(tests)
