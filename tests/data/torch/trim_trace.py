"""Cut a window of ProfilerSteps out of a Kineto trace, keeping every event of those steps and the file's metadata.

Kept: every key besides traceEvents; the metadata ('M') events; the CPU-side events starting inside the window (from
the first chosen ProfilerStep's start to the last one's end); the GPU events (kernels, memcpy, memset) launched from
it (their correlation id is a kept launch's), and the GPU-side ProfilerStep annotations of the chosen steps; the
launch flows (ac2g) of the kept launches; the forward/backward flows (fwdbwd) with both ends inside the window.

Usage: python trim_trace.py IN.pt.trace.json.gz OUT.pt.trace.json.gz FIRST_STEP LAST_STEP
"""

from __future__ import annotations

import gzip
import json
import sys

GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def trim(trace: dict, first: int, last: int) -> dict:
    """The trace with only the events of ProfilerStep#first .. #last (see the module docstring)."""
    events = trace["traceEvents"]
    chosen = {f"ProfilerStep#{n}" for n in range(first, last + 1)}
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"] in chosen]
    low, high = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)

    def on_cpu_inside(event: dict) -> bool:
        return event.get("ph") == "X" and event.get("cat") not in (*GPU, "gpu_user_annotation", "Trace") \
            and low <= event["ts"] <= high

    cpu = [e for e in events if on_cpu_inside(e)]
    launches = {e["args"]["correlation"] for e in cpu if "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in GPU and e["args"].get("correlation") in launches]
    gpu_steps = [e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"] in chosen]
    flows = [e for e in events if e.get("cat") == "ac2g" and e.get("id") in launches]
    ends: dict[int, list[dict]] = {}
    for event in events:
        if event.get("cat") == "fwdbwd":
            ends.setdefault(event["id"], []).append(event)
    fwdbwd = [e for pair in ends.values() if all(low <= e["ts"] <= high for e in pair) for e in pair]
    meta = [e for e in events if e.get("ph") == "M"]
    kept = meta + sorted(cpu + gpu + gpu_steps + flows + fwdbwd, key=lambda e: e["ts"])
    return {**trace, "traceEvents": kept}


if __name__ == "__main__":
    source, target, first_step, last_step = sys.argv[1:5]
    with gzip.open(source, "rt") as handle:
        whole = json.load(handle)
    with gzip.open(target, "wt", compresslevel=9) as handle:
        json.dump(trim(whole, int(first_step), int(last_step)), handle, separators=(",", ":"))
