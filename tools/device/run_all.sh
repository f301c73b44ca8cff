#!/usr/bin/env bash
# Checks everything GPU-side at once on the GPU machine: one build, then each step under its own time limit (cut to what is left before
# GV_DEADLINE seconds, default 450). Files under $OUT (at most 8):
#   summary.txt  every step's status and verdict lines
#   build.log    configure and build
#   tests.log    ctest over the rma tests (ib and mpirun cases included), the NVSHMEM face and
#                the samples (one line per test), failed tests' output
#   himeno.log   himeno_multi_gpu_test
#   verbs.log    the verbs GPU tests (test_gpu_ib, test_gpu_engine*, test_gpu_cpu_engine)
#   rma.txt      a short gv_rma table (p2p latency rows and anchors); rma.json its rows
# GV_STEPS (default "build ctest himeno rma verbs", in that order) picks steps. GV_BUILD_DIR
# (default build-dev) is the build tree; leave "build" out of GV_STEPS when it came built (see
# tools/device/carry_build.sh).
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
DEADLINE=${GV_DEADLINE:-450}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
STEPS=${GV_STEPS:-build ctest himeno rma verbs}
B=${GV_BUILD_DIR:-build-dev}
want() { [[ " $STEPS " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$S"
if want build; then
  log "build"
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 ||
    { grep -E "rror" "$OUT/build.log" | head -20 | tee -a "$S"; exit 1; }
  T="test_rma_gpu test_rma_host test_rma_multiprocess rma_rank rma_rank_gpu gvrun gv_has_gpu nvshmem_ring_broadcast nvshmem_block_put nvshmem_signal_count nvshmem_group_entry"
  T="$T 01_host_write_two_qps 02_kernel_post_poll 03_rma_put_signal_pingpong 04_rma_ring 05_nvshmem_shift gv_rma"
  want himeno && T="$T himeno_multi_gpu_test"
  want verbs && T="$T test_gpu_ib test_gpu_cpu_engine test_gpu_engine test_gpu_engine_peers test_gpu_engine_hazards test_gpu_engine_lanes"
  # shellcheck disable=SC2086
  echo "build $(limited 400 "$OUT/build.log" cmake --build $B -j16 --target $T)" | tee -a "$S"
  grep -E " error|Error [0-9]" "$OUT/build.log" | head -10 | tee -a "$S"
fi
if want ctest; then
  log "ctest: rma (ib and mpirun cases too), NVSHMEM face, samples"
  for d in tests/rma tests/nvshmem samples; do
    echo "ctest $d $(limited 240 "$OUT/tests.log" ctest --test-dir $B/$d --timeout 90 --output-on-failure)" | tee -a "$S"
  done
  grep -E "tests passed|\*\*\*Failed|Timeout|Not Run|Skipped\)" "$OUT/tests.log" | head -20 | tee -a "$S"
fi
if want himeno; then
  log "himeno_multi_gpu_test"
  echo "himeno $(limited 120 "$OUT/himeno.log" stdbuf -oL $B/tests/himeno/himeno_multi_gpu_test)" | tee -a "$S"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/himeno.log" | head -20 | tee -a "$S"
fi
if want rma; then
  log "gv_rma (p2p latency rows, anchors)"
  echo "gv_rma $(limited 60 "$OUT/rma.txt" $B/bench/gv_rma --transport p2p --test p,put_signal,atomics,anchors --max-bytes 4096 --bw-max 1048576 -n 500 --json "$OUT/rma.json")" | tee -a "$S"
  grep -E "^(p |put_signal|fetch_add|raw)" "$OUT/rma.txt" | grep -E " (8|64|4096) " | tee -a "$S"
fi
if want verbs; then
  log "verbs GPU tests"
  for t in $B/tests/gpu/test_gpu_*; do
    [[ -x $t ]] || continue
    echo "$(basename "$t") $(limited 90 "$OUT/verbs.log" stdbuf -oL "$t")" | tee -a "$S"
  done
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/verbs.log" | head -20 | tee -a "$S"
fi
log "done"
