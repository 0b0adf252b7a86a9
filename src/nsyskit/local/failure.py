"""Which rank made a run fail: from the wrappers' status files, else from the launcher's own verdict."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from nsyskit.runrecord import RankStatus

# Signals a launcher sends to the surviving ranks after the first failure: their victims are not the cause.
COLLATERAL_SIGNALS = {"SIGTERM", "SIGINT", "SIGHUP"}
TORCHRUN_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+)", re.S)
MPIRUN_PROCESS = re.compile(r"process rank (\d+) with PID \d+ on node (\S+?) (?:exited on signal (\d+)|exited)")
MPIRUN_NONZERO = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]\s*Exit code:\s*(\d+)", re.S)


@dataclass(frozen=True)
class Failure:
    """The rank blamed for a failed run and why."""

    rank: int | None
    host: str | None
    exit_code: int | None
    how: str  # e.g. 'killed by SIGKILL', 'exited with code 1'

    def describe(self) -> str:
        """One phrase naming the rank: 'rank 1 on worker-0 was killed by SIGKILL'."""
        who = f"rank {self.rank}" if self.rank is not None else "a rank"
        where = f" on {self.host}" if self.host else ""
        return f"{who}{where} {self.how}"


def signal_of(status: RankStatus) -> str | None:
    """The signal that ended the rank: recorded by the wrapper, or encoded as 128+N in an exit code (nsys, shells)."""
    if status.signal:
        return status.signal
    if 128 < status.exit_code < 128 + 65:
        try:
            return signal.Signals(status.exit_code - 128).name
        except ValueError:
            return None
    return None


def _how(status: RankStatus) -> str:
    name = signal_of(status)
    return f"was killed by {name}" if name else f"exited with code {status.exit_code}"


def blame(statuses: list[RankStatus], launcher_log: str = "") -> Failure | None:
    """The failed rank: a rank killed by a signal its launcher does not send first, then the earliest non-zero exit.

    A rank killed from outside (SIGKILL, SIGSEGV, OOM) is the cause; ranks that then lose their peer exit with an
    error, and the launcher SIGTERMs the rest. When no status file shows a failure (the wrapper itself died),
    the launcher's verdict decides: torchrun's 'Root Cause' or mpirun's 'process rank N ... exited'.
    """
    failed = [s for s in statuses if s.exit_code != 0]
    killed = [s for s in failed if signal_of(s) and signal_of(s) not in COLLATERAL_SIGNALS]
    errored = [s for s in failed if not signal_of(s)]
    for group in (killed, errored):
        if group:
            first = min(group, key=lambda s: s.ended)
            return Failure(first.rank, first.host, first.exit_code, _how(first))
    verdict = launcher_verdict(launcher_log)
    if verdict:
        return verdict
    if failed:
        first = min(failed, key=lambda s: s.ended)
        return Failure(first.rank, first.host, first.exit_code, _how(first))
    return None


def launcher_verdict(text: str) -> Failure | None:
    """The failed rank as torchrun or mpirun reported it, if they did."""
    mpirun = MPIRUN_PROCESS.search(text)
    if mpirun:
        rank, host, signum = int(mpirun.group(1)), mpirun.group(2), mpirun.group(3)
        how = f"was killed by {signal.Signals(int(signum)).name}" if signum else "exited with an error"
        return Failure(rank, host, 128 + int(signum) if signum else None, how)
    nonzero = MPIRUN_NONZERO.search(text)
    if nonzero:
        return Failure(int(nonzero.group(1)), None, int(nonzero.group(2)), f"exited with code {nonzero.group(2)}")
    torchrun = TORCHRUN_ROOT_CAUSE.search(text)
    if torchrun:
        return Failure(int(torchrun.group(1)), None, None, "failed first (torchrun's root cause)")
    return None
