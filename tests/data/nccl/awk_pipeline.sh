#!/bin/bash
# shellcheck disable=SC2016  # the awk programs are single-quoted on purpose
# The public nsys-profiling project's NCCL-log analysis as one grep + awk pipeline, written from its README's
# description (steps 1-5 and the step-timing script) to check 'invoke nccl-log' against and to benchmark it.
# Usage: awk_pipeline.sh LOG [FIRST LAST]   (FIRST-LAST: the iteration window of NeMo 'Training epoch' lines)
# Stages: window -> "op count dtype bytes" per call -> per-op stats, size histogram, aggregate, step timing.
set -euo pipefail
log=$1
first=${2:-}
last=${3:-}
AWK=${AWK:-mawk}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. the window: a 'Training epoch ... iteration N/M' line sets the current iteration; keep lines while FIRST <= N <= LAST
src=$log
if [ -n "$first" ]; then
  $AWK -v a="$first" -v b="$last" '
    /Training epoch/ && /iteration/ { for (k = 1; k < NF; k++) if ($k == "iteration") { split($(k + 1), p, "/"); it = p[1] + 0; break } }
    it >= a && it <= b' "$log" > "$work/window.log"
  src=$work/window.log
fi

# 2. one "op count dtype bytes" line per collective call (op: the first field ending in ':' other than 'INFO:')
grep "NCCL INFO" "$src" | grep "opCount" | $AWK '
  BEGIN { split("int8 uint8 int32 uint32 int64 uint64 fp16 fp32 fp64 bf16 fp8_e4m3 fp8_e5m2", name, " ")
          split("1 1 4 4 8 8 2 4 8 2 1 1", size, " ") }
  { op = ""; n = 0; dt = -1
    for (k = 1; k <= NF; k++) {
      if (op == "" && $k ~ /:$/ && $k != "INFO:") { op = substr($k, 1, length($k) - 1) }
      else if ($k == "count") { n = $(k + 1) + 0 }
      else if ($k == "datatype") { dt = $(k + 1) + 0 }
    }
    if (op != "" && n > 0 && (dt + 1) in size) print op, n, name[dt + 1], n * size[dt + 1] }' > "$work/sizes.txt" || true

# 3. per-op statistics
echo "== per-op"
$AWK '{ c[$1]++; t[$1] += $4; if (!($1 in lo) || $4 < lo[$1]) lo[$1] = $4; if (!($1 in hi) || $4 > hi[$1]) hi[$1] = $4 }
  END { for (o in c) printf "%s calls=%d min=%d avg=%.6f max=%d total=%.0f\n", o, c[o], lo[o], t[o] / c[o], hi[o], t[o] }' "$work/sizes.txt" | sort

# 4. histogram of message sizes per op
echo "== histogram"
$AWK '{ b = ($4 < 65536) ? "<64KB" : ($4 < 1048576) ? "64KB-1MB" : ($4 < 16777216) ? "1MB-16MB" : ">16MB"; h[$1 ":" b]++ }
  END { for (k in h) print k, h[k] }' "$work/sizes.txt" | sort

# 5. aggregate: calls x op x count x dtype x bytes per call
echo "== aggregate"
sort "$work/sizes.txt" | uniq -c | $AWK '{ printf "%d %s %s %s %s\n", $1, $2, $3, $4, $5 }' | sort -k2,2 -k3,3n -k4,4

# 6. average step time and TFLOPS per GPU over the window's NeMo step lines that print both
echo "== steps"
$AWK -v a="${first:-0}" -v b="${last:-999999999}" '
  /Training epoch/ && /iteration/ {
    it = -1; t = ""; f = ""
    for (k = 1; k <= NF; k++) {
      if ($k == "iteration" && it < 0) { split($(k + 1), p, "/"); it = p[1] + 0 }
      if ($k == "train_step_timing" && $(k + 1) == "in" && $(k + 2) == "s:") t = $(k + 3)
      if ($k == "TFLOPS_per_GPU:") f = $(k + 1)
    }
    if (it >= a && it <= b && t != "" && f != "") { n++; ts += t; fs += f }
  }
  END { if (n) printf "steps=%d avg_step_time_s=%.6f avg_tflops_per_gpu=%.6f\n", n, ts / n, fs / n; else print "steps=0" }' "$log"
