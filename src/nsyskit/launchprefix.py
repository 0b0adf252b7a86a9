"""The launcher prefixes in front of a program's output lines (srun --label, mpirun --tag-output, ...): one rule."""

from __future__ import annotations

import re

# srun --label prints the task number right-aligned to the width of the largest one: '3: ' under 10 tasks, ' 3: '
# with 10 or more, '  3: ' with 100 or more; wrappers that sort logs pad it with zeros ('03: ').
SRUN_LABEL = rb"[ \t]*\d+: "
# OpenMPI --tag-output ('[1,0]<stdout>:'); it tags each flush, so it may also stand in the middle of a line.
OPENMPI_TAG = rb"\[\d+,\d+\]<std(?:out|err)>:"
STAMP = rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"  # ISO 8601, 'T' or ' '
# Every prefix a reader cuts, any of them stacked: OpenMPI's tag, srun's label, SkyPilot/Ray job logs
# ('(head, rank=0, pid=3808) ', '(RayTrainWorker pid=1, ip=10.0.0.1) '), kubectl logs --prefix
# ('[pod/name/container] '), Intel MPI / MPICH -prepend-rank ('[0] '), ISO time stamps (kubectl --timestamps,
# CloudWatch), a nccl-tests fork that prints the source location ('run(), common.cu:967, '), and the forms the NCCL
# log reader takes too: bracketed stamps ('[2025-01-02 03:04:05] '), torchrun's tags ('[default0]:'), the CRI
# stream tag ('stdout F '), CloudWatch's column bars ('  | '), Python logging's level and logger ('- INFO - ').
PREFIX = (
    rb"(?:" + OPENMPI_TAG + rb"|" + SRUN_LABEL + rb"|\([^()\n]{1,200}\) |\[pod/[^\]\n]{1,250}\] |\[\d+\] "
    rb"|" + STAMP + rb" |\w+\(\), \w+\.cu:\d+, "
    rb"|\[" + STAMP + rb"\] |\[[A-Za-z]\w*\]: ?|(?:stdout|stderr) [FP] |[ \t]*\| |(?:- [A-Za-z_][\w.]* )+- )"
)
PREFIXES = re.compile(rb"(?:" + PREFIX + rb")*")
OPENMPI_TAGS = re.compile(OPENMPI_TAG)


def strip(line: bytes) -> bytes:
    """LINE without its launchers' prefixes and without OpenMPI tags anywhere in it."""
    line = line[PREFIXES.match(line).end() :]
    return OPENMPI_TAGS.sub(b"", line) if b"]<std" in line else line
