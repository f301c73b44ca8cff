#!/usr/bin/env bash
# Why the persistent kernel sweeps slower than the iteration kernel (notes/himeno.md): ncu of
# one launch of each, one rank, size L, double, without communication, on the GPU machine.
# For each kernel: the details page (throughput, warp states, scheduler) and the source page
# (SASS with its stall samples), reduced by ncu_top.py to the instructions that stall most.
# Files under $OUT: ncu_<mode>.txt (details), ncu_<mode>_top.txt (top SASS lines), and the
# raw source page gzipped (ncu_<mode>_source.csv.gz). GV_BUILD_DIR: the built tree (build-gpu).
set -uo pipefail
OUT=${OUT:-/tmp/gv-ncu}
mkdir -p "$OUT"
B=${GV_BUILD_DIR:-build-gpu}
bench="$B/bench/himeno/himeno_bench --ranks 1 --size ${GV_NCU_SIZE:-L} --iters 4 --reps 1 --comm-only"
for pair in persistent:persistent_kernel in-kernel:iteration_kernel; do
  mode=${pair%%:*} kernel=${pair##*:}
  timeout 150 ncu --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    $bench --mode "$mode" > "$OUT/ncu_$mode.txt" 2>&1
  echo "ncu $mode details rc=$?"
  timeout 150 ncu --clock-control none --kernel-name "regex:$kernel" --launch-count 1 --section SourceCounters \
    --page source --print-source sass --csv $bench --mode "$mode" > "$OUT/ncu_${mode}_source.csv" 2>&1
  echo "ncu $mode source rc=$?"
  python3 "$(dirname "${BASH_SOURCE[0]}")/ncu_top.py" "$OUT/ncu_${mode}_source.csv" > "$OUT/ncu_${mode}_top.txt" 2>&1
  gzip -f "$OUT/ncu_${mode}_source.csv"
  grep -E "Duration|DRAM Throughput|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps" "$OUT/ncu_$mode.txt"
  head -40 "$OUT/ncu_${mode}_top.txt"
done
