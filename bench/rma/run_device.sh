#!/usr/bin/env bash
# One device-machine call for the rma layer: build, GPU tests (plus compute-sanitizer on the p2p
# cases), then gv_rma (and, with GV_NVSHMEM=1, the NVSHMEM side by side). Files under $OUT:
# summary.txt, build.log, tests.log, sanitizer.log, rma.txt (the table), rma.json (--json rows).
# GV_RMA_ARGS: extra gv_rma arguments; GV_SKIP_TESTS=1: benchmarks only; GV_DEADLINE: seconds
# (default 540) before which every step must end.
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
DEADLINE=${GV_DEADLINE:-540}
source "$(dirname "${BASH_SOURCE[0]}")/../device_lib.sh"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$S"
nvidia-smi topo -m 2>/dev/null | head -8 | tee -a "$S"
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ${GV_CMAKE_ARGS:-} > "$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
grep -E "gpuverbs:" "$OUT/build.log" | tee -a "$S"
TARGETS="test_rma_gpu gv_rma rma_rank_gpu gvrun ${GV_EXTRA_TARGETS:-}"
# shellcheck disable=SC2086
cmake --build build-dev -j16 --target $TARGETS >> "$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
log "built in ${SECONDS}s"

if [[ -z "${GV_SKIP_TESTS:-}" ]]; then
  log "test_rma_gpu"
  echo "test_rma_gpu $(limited 240 "$OUT/tests.log" build-dev/tests/rma/test_rma_gpu)" | tee -a "$S"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED  \]|Failure" "$OUT/tests.log" | head -60 | tee -a "$S"
  log "ranks as processes (gvrun; mpirun when built with MPI)"
  echo "ctest processes $(limited 150 "$OUT/tests.log" ctest --test-dir build-dev -R 'rma.processes_gpu' --output-on-failure)" | tee -a "$S"
  grep -E "tests passed|Failed|ok \(" "$OUT/tests.log" | tail -6 | tee -a "$S"
  if grep -q "World bootstraps from MPI" "$OUT/build.log"; then
    echo "mpirun $(limited 60 "$OUT/tests.log" mpirun --allow-run-as-root --oversubscribe -n 2 build-dev/tests/rma/rma_rank_gpu p2p)" | tee -a "$S"
    grep -E "bootstrap mpi|FAILED" "$OUT/tests.log" | tail -3 | tee -a "$S"
  fi
  log "memcheck (p2p cases; the ib cases need the resident engine, which the sanitizer serialises)"
  echo "memcheck $(limited 150 "$OUT/sanitizer.log" compute-sanitizer --tool memcheck --error-exitcode 9 \
    build-dev/tests/rma/test_rma_gpu --gtest_filter='*p2p_2ranks*')" | tee -a "$S"
  tail -3 "$OUT/sanitizer.log" | tee -a "$S"
fi

log "gv_rma ${GV_RMA_ARGS:-}"
# shellcheck disable=SC2086
echo "gv_rma $(limited 300 "$OUT/rma.txt" build-dev/bench/gv_rma --json "$OUT/rma.json" ${GV_RMA_ARGS:-})" | tee -a "$S"
log "done in ${SECONDS}s"
