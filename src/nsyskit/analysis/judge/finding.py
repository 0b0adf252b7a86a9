"""A finding: the rule that fired, how bad, its evidence, the ranks and steps concerned, the time at stake, the fix.

The data type every rule module returns (findings.py holds the first rules and the order; fabric, counter and
diagnosis rules live in modules of their own and are listed there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# A run-level list of ranks is shown in full up to this many ranks, then as a count and the first few (a 4,096-rank
# run must stay one line per finding).
RANKS_SHOWN = 8


@dataclass(frozen=True)
class Finding:
    """One statement about the run: rule id, severity, a title with its number, the evidence behind it, where it
    holds (ranks, steps), what fixing it would give back per step (an estimate) and what to try."""

    rule: str
    severity: str  # 'warning' (costs time now) or 'info' (worth a look)
    title: str
    value: float
    threshold: float
    advice: str
    evidence: dict[str, float] = field(default_factory=dict)  # the numbers behind the title, by name (units in names)
    ranks: tuple[int, ...] = ()  # the ranks it fires on (empty: the run as a whole)
    steps: tuple[int, ...] = ()  # the steps concerned (empty: every step of the window)
    at_stake_ns: float = math.nan  # estimated time per step a fix would give back (NaN: not estimated)
    threshold_text: str = ""  # the threshold as the reader reads it ('1 MiB in 1 ms'); empty: a percent

    def to_json(self) -> dict[str, Any]:
        """The finding as JSON data (NaN and infinities as None)."""
        return {
            "rule": self.rule, "severity": self.severity, "title": self.title,
            "value": _finite(self.value), "threshold": _finite(self.threshold), "advice": self.advice,
            "evidence": {k: _finite(v) for k, v in self.evidence.items()},
            "ranks": list(self.ranks), "steps": list(self.steps), "at_stake_ns": _finite(self.at_stake_ns),
            "threshold_text": self.threshold_text,
        }  # fmt: skip


def ordered(found: list[Finding]) -> list[Finding]:
    """Findings by time at stake per step, largest first; those without an estimate after them, warnings before
    infos, each group in the rules' order (a stable sort)."""

    def key(finding: Finding) -> tuple[bool, float, bool]:
        stake = finding.at_stake_ns
        known = stake == stake and not math.isinf(stake)
        return (not known, -stake if known else 0.0, finding.severity != "warning")

    return sorted(found, key=key)


def ranks_text(ranks: tuple[int, ...] | list[int], total: int | None = None) -> str:
    """'ranks 0, 3, 7' or, past RANKS_SHOWN, '37 of 512 ranks (0, 3, 7, ...)': one line whatever the run's width."""
    ranks = list(ranks)
    if not ranks:
        return "all ranks"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if len(ranks) <= RANKS_SHOWN:
        return "ranks " + ", ".join(map(str, ranks))
    of = f" of {total:,}" if total else ""
    return f"{len(ranks):,}{of} ranks ({', '.join(map(str, ranks[:RANKS_SHOWN // 2]))}, ...)"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class RuleDoc:
    """What 'invoke analyze --explain RULE' prints: what the rule measures, when it fires, what to try."""

    rule: str
    measures: str
    fires_when: str  # with the thresholds' values (the modules' constants)
    advice: str

    def text(self) -> str:
        """The explanation as lines for the terminal."""
        return f"{self.rule}\n  measures:   {self.measures}\n  fires when: {self.fires_when}\n  what to try: {self.advice}"


CATALOG: dict[str, RuleDoc] = {}  # every rule's doc by rule id, filled as the rule modules load (judge/findings.py)


def document(rule: str, measures: str, fires_when: str, advice: str) -> RuleDoc:
    """Register a rule's doc in CATALOG (its findings quote the same advice); the doc."""
    doc = CATALOG[rule] = RuleDoc(rule, measures, fires_when, advice)
    return doc
