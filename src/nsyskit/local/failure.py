"""Which rank made a run fail, and which failed after it: from the wrappers' status files (ordered by the time each
rank's application died), else from the launcher's own verdict."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from nsyskit.runrecord import RankStatus

# Signals a launcher sends to the surviving ranks after the first failure: their victims are not the cause.
COLLATERAL_SIGNALS = {"SIGTERM", "SIGINT", "SIGHUP"}
# How a rank ends when a peer dies under it: Gloo and NCCL abort (SIGABRT), or an error exits. Not a sign of the cause.
PEER_LOSS_SIGNALS = {"SIGABRT"}
# Death times closer than this are not trusted to order a peer's abort after a kill (scheduling under load).
SIMULTANEOUS_S = 2.0
THEN_NAMED = 3  # the ranks that failed after the blamed one, named in the reason; more are counted
TORCHRUN_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+)", re.S)
MPIRUN_PROCESS = re.compile(r"process rank (\d+) with PID \d+ on node (\S+?) (?:exited on signal (\d+)|exited)")
MPIRUN_NONZERO = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]\s*Exit code:\s*(\d+)", re.S)


@dataclass(frozen=True)
class Failure:
    """The rank blamed for a failed run and why, and the ranks that failed after it (in the order they did)."""

    rank: int | None
    host: str | None
    exit_code: int | None
    how: str  # e.g. 'killed by SIGKILL', 'exited with code 1'
    then: tuple[Failure, ...] = ()

    def phrase(self) -> str:
        """'rank 1 on worker-0 was killed by SIGKILL'."""
        who = f"rank {self.rank}" if self.rank is not None else "a rank"
        where = f" on {self.host}" if self.host else ""
        return f"{who}{where} {self.how}"

    def describe(self) -> str:
        """The blamed rank, then the others: 'rank 1 on worker-0 was killed by SIGKILL; then rank 0 ... by SIGABRT'."""
        named = [f"then {other.phrase()}" for other in self.then[:THEN_NAMED]]
        more = len(self.then) - THEN_NAMED
        if more > 0:
            named.append(f"then {more} more rank{'s' if more > 1 else ''}")
        return "; ".join([self.phrase(), *named])

    def to_dict(self) -> dict:
        """The failure as run.json's failed_rank: rank, host, exit_code, how, and the later failures under 'then'."""
        data = {"rank": self.rank, "host": self.host, "exit_code": self.exit_code, "how": self.how}
        return {**data, "then": [{k: v for k, v in other.to_dict().items() if k != "then"} for other in self.then]}


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


def _failure(status: RankStatus, then: tuple[Failure, ...] = ()) -> Failure:
    """The Failure a rank's status tells."""
    return Failure(status.rank, status.host, status.exit_code, _how(status), then)


def death_time(status: RankStatus) -> float:
    """When the rank failed: when its application died (the wrapper's watch), else when its wrapper ended."""
    return status.died or status.ended


def killed_from_outside(status: RankStatus) -> bool:
    """A signal neither the launcher (SIGTERM) nor a peer's death (SIGABRT) explains: SIGKILL (the OOM killer, a
    user), SIGSEGV, SIGBUS: the rank's own end, a cause."""
    name = signal_of(status)
    return bool(name) and name not in COLLATERAL_SIGNALS | PEER_LOSS_SIGNALS


def first_cause(failures: list[RankStatus]) -> RankStatus:
    """Of failures ordered by death time, the cause: the first, unless a rank killed from outside died at nearly the
    same time (or either's death time is only its wrapper's end): a peer's abort follows a kill, never precedes it."""
    first = failures[0]
    if killed_from_outside(first):
        return first
    for status in failures[1:]:
        if killed_from_outside(status):
            timed = bool(first.died and status.died)
            if not timed or status.died - first.died <= SIMULTANEOUS_S:
                return status
            break
    return first


def blame(statuses: list[RankStatus], launcher_log: str = "") -> Failure | None:
    """The rank that failed first, and the ranks that failed after it (`then`), from the wrappers' status files.

    Failures are ordered by when each rank's application died. A rank killed from outside (SIGKILL, SIGSEGV, OOM) is
    preferred over a SIGABRT or error exit at about the same time: ranks that lose a peer abort or fail, and the
    launcher SIGTERMs the rest (those are the cause only when nothing else failed). When no status file shows a
    failure other than SIGTERM (the wrapper itself died), the launcher's verdict decides: torchrun's 'Root Cause' or
    mpirun's 'process rank N ... exited'.
    """
    failed = sorted((s for s in statuses if s.exit_code != 0), key=lambda s: (death_time(s), s.rank))
    own = [s for s in failed if signal_of(s) not in COLLATERAL_SIGNALS]
    if own:
        cause = first_cause(own)
    else:
        verdict = launcher_verdict(launcher_log)
        if verdict or not failed:
            return verdict
        cause = failed[0]
    return _failure(cause, tuple(_failure(s) for s in failed if s is not cause))


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
