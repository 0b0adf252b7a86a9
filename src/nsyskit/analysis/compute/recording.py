"""Each rank's facts about what its nsys recorded: GPU copies without a single kernel (the kernels_not_recorded rule).

An nsys older than the CUDA the program runs does not know the newer launch calls: it records the copies, the
NVTX ranges and some CUDA API calls, but no kernel at all. Seen for real: nsys 2022.4 (CUPTI 11.8) on a CUDA 13.0
driver recorded 149 copies and 78 NCCL ranges of a GPT-2 training step on an H200, and no kernel
(tests/data/real/nsys-exports/h200_gpt2_ddp_nsys2022.4_cuda13.sqlite.xz). The map measures it per rank; the rule
(judge/recording.py) reads the rows from the parts like any other evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from nsyskit.analysis.compute import evidence

RULE = "kernels_not_recorded"
COPIES_KEY = "copies"  # the rank's GPU copies and memsets (all recorded, none a kernel)
NSYS_KEY = "nsys_version"  # the nsys that wrote the export, as year x 100 + release (202204): evidence is numbers
CUDA_KEY = "cuda_driver_version"  # the CUDA version of the driver (13.0) where the export states it


def recording_facts(inputs: evidence.RankInputs) -> Iterator[tuple[str, str, float]]:
    """A rank whose report holds GPU copies or memsets but not one kernel: how many, and the nsys and CUDA versions."""
    kernels = 0 if inputs.kernels is None else len(inputs.kernels)
    copies = sum(len(side) for side in (inputs.memcpys, inputs.memsets) if side is not None)
    if kernels or not copies:
        return
    yield RULE, COPIES_KEY, float(copies)
    if inputs.reader is None:
        return
    nsys = re.match(r"(\d{4})\.(\d+)", inputs.reader.nsys_version)
    if nsys:
        yield RULE, NSYS_KEY, float(int(nsys[1]) * 100 + int(nsys[2]))
    driver = inputs.reader.system_env.get("CudaDriverVersion", "")
    if driver.isdigit():  # CUDA's own encoding: 1000 x major + 10 x minor (13000 is 13.0)
        yield RULE, CUDA_KEY, int(driver) // 1000 + (int(driver) % 1000) / 100


evidence.EXTRACTORS.append(recording_facts)
