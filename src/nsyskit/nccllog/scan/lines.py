"""The layouts of an NCCL/RCCL INFO line: the launcher prefixes before it, its source, its collective fields.

One precompiled regex (INFO_LINE) reads every INFO line of a block in C; where it found fewer lines than the block
has 'NCCL INFO's, MISSED_LINE finds the others (another program's output sharing the physical line, an unknown
prefix) and read_missed_line reads their NCCL part.
"""

from __future__ import annotations

import re

from nsyskit import launchprefix

# The launchers' prefixes are the shared rule of nsyskit.launchprefix (nccl-tests reads the same ones); here the
# source 'host:pid:tid' must follow, so no token can take a host name. A bracket's inside runs across lines (fast):
# one left open runs into the next line and the match fails there. native/linescan.c mirrors the tokens.
_PREFIX = launchprefix.prefix(across_lines=True)
_ANY_PREFIX = rb"(?:(?=" + launchprefix.FIRST + rb")" + _PREFIX + rb")?"  # tried only where a prefix may start
# The source 'host:pid:tid [dev]' as one span (split only for the distinct ones). A run of one negated character
# (fast, see _COLL) may start on earlier lines that hold no space (bare timestamps): the source is what follows
# its last newline (clean_source); such lines hold no NCCL line, so nothing is lost.
_SOURCE = rb"([^ ]++ \[\d++\]) NCCL INFO "
# A collective: op, then the fields after recvbuff as one span (RCCL puts 'acc (nil)' first; buffers may be
# '(nil)'); the span is split per distinct value by TAIL. Two groups: few groups make findall cheap. The values
# are '[^ ]' runs (one negated character is a tight loop in the engine; a class is a call per character): a line
# cut inside one runs into the next line, where the following field name or the 'count'/'acc' that must start
# the span cannot match, so the cut line falls to the message branch (counted as garbled), the next read whole.
_COLL_HEAD = rb"([A-Z][A-Za-z]++): opCount [^ ]++ sendbuff [^ ]++ recvbuff [^ ]++ "
_COLL = _COLL_HEAD + rb"((?:count|acc) [^\n]*+)"
# Other INFO messages are kept only when they may carry a fact (else the empty message: counted as 'other').
_FACT_WORDS = (
    rb"(?=NCCL version|Using |NET/|Channel|Ring|Trees|Connected|NCCL_|comm |ncclCommInit|nranks|Init |\d"
    rb"|[A-Za-z]++: (?:\d++ Bytes|opCount))"
)
# Groups: source, op, tail (collective lines) | message (other INFO lines).
INFO_LINE = re.compile(
    rb"\n" + _ANY_PREFIX + _SOURCE + rb"(?:" + _COLL + rb"|" + _FACT_WORDS + rb"([^\n]*+)|[^\n]*+)"
)  # the last branch walks a message of no interest to its end (faster than findall's search for the next line)
# A line holding 'NCCL INFO' that does not start as above (another program's output before the NCCL part, an unknown
# prefix), for read_missed_line; looked for only in blocks where INFO_LINE found fewer lines than 'NCCL INFO's.
# Unrolled (runs of a class, no per-character retry).
MISSED_LINE = re.compile(rb"\n(?!" + _ANY_PREFIX + _SOURCE + rb")[^N\n]*+(?:N(?!CCL INFO)[^N\n]*+)*+NCCL INFO[^\n]*+")
_PREFIX_ONLY = re.compile(_PREFIX)
# 'count N datatype D' and, unless the line was cut short, 'op O root R comm 0x.. [nranks=N]'.
_TAIL = rb"(?:acc \S+ )?count (\d+) datatype (\d+)(?: op -?\d+ root -?\d+ comm (\S+) \[nranks=(\d+)\])?"
TAIL = re.compile(_TAIL)
# NCCL's own stamp (NCCL_DEBUG_TIMESTAMP_FORMAT, 2.26+): its default '[%F %T] ' or the kit's '[%F %T.%6f %z] '
# (ranks/launch.py), in groups: date, time, sub-second digits, zone. The prefix rule's '[...]' token skips it in
# both readers (here and native/linescan.c); only the log join reads its time (STAMPED_CALL).
NCCL_STAMP = rb"\[(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(?: ?(Z|[+\-]\d\d:?\d\d))?\] "
# One collective call wherever it stands in its line (after launcher prefixes, or glued to another program's output:
# no prefix rule needed), with NCCL's stamp right before its source when there is one: stamp (4 groups, empty when
# none), source, op, then TAIL's groups. The one COLL layout, as INFO_LINE's; the log join reads it (scan/calls.py).
STAMPED_CALL = re.compile(rb"(?:" + NCCL_STAMP + rb")?" + _SOURCE + _COLL_HEAD + _TAIL)
SOURCE = re.compile(rb"(.*):(\d+):\d+ \[(\d+)\]")
DAMAGED_SOURCE = re.compile(rb"(.*?) ?(?:\[(\d+)\])?$", re.S)

# The NCCL part anywhere in such a line: the host token starts after a space or a non-host character.
_EMBEDDED = re.compile(rb"([^\s:\[\]|<>()]+:\d+:\d+ \[\d+\]) NCCL INFO (.*)")
_EMBEDDED_COLL = re.compile(_COLL)
# A host glued to the end of a table row ('-1mew0', '0mew0'): the row's last number before the real host name.
GLUED_NUMBER = re.compile(r"^[-+]?[\d.]+")


def clean_source(source: bytes) -> bytes:
    """The 'host:pid:tid [dev]' of a matched source span (without the space-less lines it may start on, nor the
    space-less prefix of its own line, e.g. mpirun's '[1,0]<stdout>:')."""
    if b"\n" not in source:
        return source
    line = source.rpartition(b"\n")[2]
    return line[_PREFIX_ONLY.match(line).end() :]


def split_source(source: bytes) -> tuple[str, str, int]:
    """(host, pid, dev) of a 'host:pid:tid [dev]' span; a damaged one (no ':pid:tid', or only a prefix before
    '[dev]') gives what it holds: its text as the host, pid '', its dev or 0."""
    match = SOURCE.match(source)
    if match is None:
        damaged = DAMAGED_SOURCE.match(source)
        return damaged.group(1).decode("utf-8", "replace"), "", int(damaged.group(2) or 0)
    host, pid, dev = match.groups()
    return host.decode("utf-8", "replace"), pid.decode(), int(dev)


def read_missed_line(line: bytes) -> tuple[bytes, bytes, bytes, bytes] | None:
    """A finding shaped like INFO_LINE's (source, op, tail, message) from a line whose NCCL part does not start it
    (another program's output before it on the same line); None when the line holds no readable NCCL INFO part."""
    match = _EMBEDDED.search(line)
    if match is None:
        return None
    source, rest = match.groups()
    coll = _EMBEDDED_COLL.match(rest)
    if coll:
        return source, coll.group(1), coll.group(2), b""
    return source, b"", b"", rest.rstrip(b"\r")


def fix_glued_hosts(hosts_by_pid: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    """{(host, pid): real host} for hosts that are another host of the same process with a table row's number glued
    in front (nccl-tests prints its table on the same stdout as NCCL); only those that need fixing."""
    fixed = {}
    for pid, hosts in hosts_by_pid.items():
        for host in hosts:
            for other in hosts:
                if other != host and host.endswith(other) and GLUED_NUMBER.fullmatch(host[: -len(other)]):
                    fixed[(host, pid)] = other
    return fixed
