"""The launcher prefixes in front of a program's output lines (srun --label, mpirun --tag-output, ...): one rule."""

from __future__ import annotations

import re

# A prefix is blanks or '|', then tokens in any order, each followed by separators; both readers build their regex
# from these pieces (nccl-tests' rows, nccllog/scan/lines.py's INFO lines: each adds only what must follow, and
# native/rowscan.c and native/linescan.c mirror the tokens in this order). The tokens:
#   '[...]'     OpenMPI's '[1,0]' (of '[1,0]<stdout>:'), kubectl logs --prefix '[pod/name/container]', Intel MPI /
#               MPICH -prepend-rank '[0]', NCCL_DEBUG_TIMESTAMP_FORMAT '[2025-01-02 03:04:05]', torchrun '[default0]'
#   '<word>'    OpenMPI's '<stdout>'
#   '(...)'     SkyPilot and Ray job logs: '(head, rank=0, pid=3808)', '(RayTrainWorker pid=1, ip=10.0.0.1)'
#   'N:'        srun --label; its padding (' 3: ' from 10 tasks, '  3: ' from 100) is the blanks before it, and
#               wrappers that sort logs pad it with zeros ('03: ')
#   stamps      ISO 8601 dates with or without 'T', fraction, offset or 'Z' (kubectl logs --timestamps, CloudWatch,
#               Loki / Fluent Bit, Python logging)
#   'stdout F'  the CRI stream tag (Loki, Fluent Bit)
#   'run(), common.cu:967,'  a nccl-tests fork that prints the source location
#   'INFO' before ' - ' and '-' before ' '  Python logging's level and logger ('- torch.distributed - INFO - ')
#   a number before a blank or '|'  epoch seconds ('1735787045.123 ')
# Possessive, so a line costs one pass.
LEAD = rb"[ \t|]*+"
SEPARATORS = rb"[ \t:|]*+"
FIRST = rb"[ \t|\[<\d(]"  # the bytes a prefix starts with (the readers' lookahead)
STAMP = rb"\d{4}-\d\d-\d\d(?:[T ][\d:.,]*+)?(?:Z|[+\-]\d\d:?\d\d)?"


def tokens(across_lines: bool) -> bytes:
    """The tokens as one alternation. ACROSS_LINES: a bracket's inside is a run of one negated character that may
    run into the next line (the fastest loop of the engine; the NCCL log reader copes with it), else it stays in
    its line."""
    inside = (rb"[^\]]", rb"[^)]") if across_lines else (rb"[^\]\n]", rb"[^)\n]")
    return (
        rb"\[" + inside[0] + rb"*+\]|<\w++>|\(" + inside[1] + rb"*+\)|\d++:|" + STAMP + rb"|(?:stdout|stderr) [FP]"
        rb"|[A-Za-z_]\w*+\(\), \w++\.cu:\d++,|[A-Za-z_][\w.]*+(?= - )|-(?= )|\d++(?:\.\d++)?(?=[ \t|])"
    )


def prefix(across_lines: bool, guard: bytes = b"") -> bytes:
    """The regex of a whole prefix; GUARD is the reader's context, asserted before each token."""
    return LEAD + rb"(?:" + guard + rb"(?:" + tokens(across_lines) + rb")" + SEPARATORS + rb")*+"


# In nccl-tests outputs a number that ends there is the table's (a row's size, a piece of a row cut by other output:
# '20.00    0.00'), never a prefix: not the epoch token either, only a label's 'N:' or a date's 'YYYY-' start so.
NOT_A_ROW = rb"(?!\d++(?:\.\d++)?(?![.:\-]))"
PREFIXES = re.compile(prefix(across_lines=False, guard=NOT_A_ROW))
# OpenMPI --tag-output ('[1,0]<stdout>:'); it tags each flush, so it may also stand in the middle of a line.
OPENMPI_TAGS = re.compile(rb"\[\d+,\d+\]<std(?:out|err)>:")


def strip(line: bytes) -> bytes:
    """LINE of a nccl-tests output without its launchers' prefixes and without OpenMPI tags anywhere in it."""
    line = line[PREFIXES.match(line).end() :]
    return OPENMPI_TAGS.sub(b"", line) if b"]<std" in line else line
