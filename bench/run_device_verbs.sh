#!/usr/bin/env bash
# One device-machine call: build the verbs GPU targets, run the GPU tests (plus
# compute-sanitizer on a subset) and the verbs benchmarks. Everything lands in at most six
# files under $OUT: summary.txt, build.log, tests.log, sanitizer.log, bench.txt, bench.json.
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
log() { echo "== $*" | tee -a "$S"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$S"
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
  cmake --build build-dev -j16 --target test_gpu_ib gv_gpu_verbs gv_pingpong ${EXTRA_TARGETS:-} >> "$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
log "test_gpu_ib"
build-dev/tests/gpu/test_gpu_ib > "$OUT/tests.log" 2>&1; echo "test_gpu_ib rc=$?" | tee -a "$S"
grep -E "PASSED|FAILED|SKIPPED|Failure" "$OUT/tests.log" | head -20 | tee -a "$S"
log "memcheck (all GPU verbs tests)"
compute-sanitizer --tool memcheck --error-exitcode 9 build-dev/tests/gpu/test_gpu_ib \
  > "$OUT/sanitizer.log" 2>&1
echo "memcheck rc=$?" | tee -a "$S"; tail -3 "$OUT/sanitizer.log" | tee -a "$S"
log "racecheck (shared and warp posting)"
compute-sanitizer --tool racecheck --error-exitcode 9 build-dev/tests/gpu/test_gpu_ib \
  --gtest_filter='GpuPostShared.*:Modes/*Warp*' >> "$OUT/sanitizer.log" 2>&1
echo "racecheck rc=$?" | tee -a "$S"; tail -3 "$OUT/sanitizer.log" | tee -a "$S"
B="$OUT/bench.txt"; J="$OUT/bench.json"
run() { echo "\$ $*" >> "$B"; timeout 240 "$@" >> "$B" 2>&1; echo "rc=$?" >> "$B"; timeout 240 "$@" --json >> "$J" 2>>"$B"; }
log "benchmarks: ${GV_BENCH:-postpoll anchors pingpong host-pingpong}"
for b in ${GV_BENCH:-postpoll anchors pingpong host-pingpong}; do
  case $b in
    postpoll) run build-dev/bench/gv_gpu_verbs postpoll -n 2000 ;;
    anchors) run build-dev/bench/gv_gpu_verbs anchors -n 20000 ;;
    pingpong) run build-dev/bench/gv_gpu_verbs pingpong -a -n 1000 ;;
    host-pingpong) run build-dev/bench/gv_pingpong -a -n 1000 ;;
    atomics) run build-dev/bench/gv_gpu_verbs atomics -n 2000 ;;
    msgrate) run build-dev/bench/gv_gpu_verbs msgrate -n 20000 ;;
  esac
done
cat "$B"
if [[ -n "${GV_NCU:-}" ]]; then
  log "ncu: post_cost_kernel (one launch of each mode)"
  ncu --clock-control none --kernel-name post_cost_kernel --launch-count 8 \
      --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      build-dev/bench/gv_gpu_verbs postpoll -n 100 > "$OUT/ncu.txt" 2>&1
  echo "ncu rc=$?" | tee -a "$S"
  grep -E "Stall|Warp Cycles Per Issued|Issued Warp|L2 Hit|post_cost" "$OUT/ncu.txt" | head -60
fi
