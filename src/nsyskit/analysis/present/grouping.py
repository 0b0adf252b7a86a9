"""Notes that hold for many ranks as one line: 'rank 7: 976 of 11,164 events kept' on 512 ranks becomes
'on 512 of 512 ranks: 976-11,164 of 11,164-20,480 events kept', with the count and the range of each number."""

from __future__ import annotations

import re
from collections.abc import Iterable

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
RANK = re.compile(r"^rank \d+: ")
PATH = re.compile(r"\S*/\S*")  # a file's path: the part of a per-file note that names whose it is
GROUP_FROM = 4  # fewer alike notes are shown one by one


def _template(note: str) -> str:
    return NUMBER.sub("#", PATH.sub("<file>", RANK.sub("", note)))


def _span(texts: list[str]) -> str:
    values = sorted({float(t.replace(",", "")) for t in texts})
    shown = [f"{v:,.0f}" if v.is_integer() else f"{v:,}" for v in (values[0], values[-1])]
    return shown[0] if shown[0] == shown[1] else f"{shown[0]}-{shown[1]}"


def grouped(notes: Iterable[str], ranks: int) -> list[str]:
    """The notes, alike ones (same words, other numbers, files or rank) as one line each with how many ranks they
    hold for and each number's range; the order of first appearance is kept."""
    groups: dict[str, list[str]] = {}
    for note in notes:
        groups.setdefault(_template(note), []).append(note)
    out = []
    for template, members in groups.items():
        if len(members) < GROUP_FROM:
            out += members
            continue
        columns = list(zip(*(NUMBER.findall(PATH.sub("", RANK.sub("", m))) for m in members), strict=False))
        filled = template.replace("<file>", "<each rank's file>")
        for column in columns:
            filled = filled.replace("#", _span(list(column)), 1)
        out.append(f"on {len(members):,} of {ranks:,} ranks: {filled}")
    return out
