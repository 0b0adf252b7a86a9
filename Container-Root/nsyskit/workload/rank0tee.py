#!/usr/bin/env python3
"""rank0tee: run a command; on rank 0 also copy its standard output into a file (nccl-tests print their table there).

Usage: python3 rank0tee.py OUTPUT COMMAND [ARGS...]   (what nsyskit.ranks.workloads renders for each NCCL test)

Rank 0 (NSYSKIT_RANK from the wrapper, else Open MPI's, Slurm's, PMIx's or torchrun's variable) runs COMMAND with
its standard output copied line by line to this process's standard output (the launcher's log) and to OUTPUT, whose
folder is made. Every other rank becomes COMMAND (exec). Exit code: COMMAND's (128+N when signal N ended it; 127
when it cannot be started). Standard library only, Python 3.8+, like the wrapper beside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

RANK_VARIABLES = ("NSYSKIT_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMIX_RANK", "RANK")
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def rank_of(env: dict) -> int:
    """This process's rank: the first of RANK_VARIABLES holding a number (0 when none does)."""
    for key in RANK_VARIABLES:
        value = env.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def tee(command: list[str], output: str) -> int:
    """Run COMMAND, copying each line it prints to stdout and to OUTPUT; its exit code (128+N for signal N)."""
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    child = subprocess.Popen(command, stdout=subprocess.PIPE)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            child.send_signal(signum)

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    with open(output, "wb") as handle:
        for line in iter(child.stdout.readline, b""):
            # Both at once, line by line: the launcher's log shows the table as it grows, the file keeps it whole.
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            handle.write(line)
            handle.flush()
    code = child.wait()
    return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    """Run argv[1:] (rank 0: copying its output to argv[0]); returns its exit code."""
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    output, command = argv[0], argv[1:]
    try:
        if rank_of(dict(os.environ)) != 0:
            os.execvp(command[0], command)
        return tee(command, output)
    except (FileNotFoundError, PermissionError) as exc:
        print(f"rank0tee: cannot run {command[0]} ({exc.strerror}); fix: check that it is on PATH", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
