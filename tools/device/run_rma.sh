#!/usr/bin/env bash
# The rma layer on the GPU machine: build, GPU tests (plus compute-sanitizer on the p2p
# cases), then gv_rma and, with GV_NVSHMEM set, shmem_perf side by side with NVSHMEM. Files under
# $OUT: summary.txt, build.log, tests.log, sanitizer.log, rma.txt (the table), rma.json (--json
# rows); with GV_NVSHMEM also shmem.txt (both programs' tables), shmem_gv.json, shmem_nv.json and
# shmem.md (compare.py's side-by-side table).
# GV_RMA_ARGS: extra gv_rma arguments, GV_RMA_SECONDS its limit (default 300); GV_SKIP_TESTS=1:
# benchmarks only; GV_DEADLINE: seconds (default 540) before which every step must end.
# GV_BUILD_DIR (default build-dev) is the build tree; GV_PREBUILT=1 when it came built
# (tools/device/carry_build.sh). GV_NVSHMEM: an NVSHMEM install (include/, lib/), or "python" for the
# one in the Python environment (the device image's): nvshmem_perf is then configured and built
# in build-nvshmem, and both programs run with two PEs; the tests/nvshmem programs are built there against
# NVSHMEM too and run (ctest -R nvshmem_ref, nvshmem_ref.log).
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
DEADLINE=${GV_DEADLINE:-540}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$S"
nvidia-smi topo -m 2>/dev/null | head -8 | tee -a "$S"
B=${GV_BUILD_DIR:-build-dev}
if [[ -z ${GV_PREBUILT:-} ]]; then
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 ${GV_CMAKE_ARGS:-} > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
  grep -E "gpuverbs:" "$OUT/build.log" | tee -a "$S"
  TARGETS="test_rma_gpu gv_rma rma_rank_gpu gvrun gv_shmem_perf ${GV_EXTRA_TARGETS:-}"
  # shellcheck disable=SC2086
  cmake --build $B -j16 --target $TARGETS >> "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
  log "built in ${SECONDS}s"
fi

if [[ -z "${GV_SKIP_TESTS:-}" ]]; then
  log "test_rma_gpu"
  echo "test_rma_gpu $(limited 240 "$OUT/tests.log" $B/tests/rma/test_rma_gpu)" | tee -a "$S"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED  \]|Failure" "$OUT/tests.log" | head -60 | tee -a "$S"
  log "ranks as processes (gvrun; mpirun when built with MPI)"
  echo "ctest processes $(limited 150 "$OUT/tests.log" ctest --test-dir $B -R 'rma.processes_gpu' --output-on-failure)" | tee -a "$S"
  grep -E "tests passed|Failed|ok \(" "$OUT/tests.log" | tail -6 | tee -a "$S"
  if grep -q "World bootstraps from MPI" "$OUT/build.log"; then
    echo "mpirun $(limited 60 "$OUT/tests.log" mpirun --allow-run-as-root --oversubscribe -n 2 $B/tests/rma/rma_rank_gpu p2p)" | tee -a "$S"
    grep -E "bootstrap mpi|FAILED" "$OUT/tests.log" | tail -3 | tee -a "$S"
  fi
  log "memcheck (p2p cases; the ib cases need the resident engine, which the sanitizer serialises)"
  echo "memcheck $(limited 150 "$OUT/sanitizer.log" compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/tests/rma/test_rma_gpu --gtest_filter='*p2p_2ranks*')" | tee -a "$S"
  tail -3 "$OUT/sanitizer.log" | tee -a "$S"
fi

log "gv_rma ${GV_RMA_ARGS:-}"
# shellcheck disable=SC2086
echo "gv_rma $(limited "${GV_RMA_SECONDS:-300}" "$OUT/rma.txt" $B/bench/gv_rma --json "$OUT/rma.json" ${GV_RMA_ARGS:-})" | tee -a "$S"

if [[ -n ${GV_NVSHMEM:-} ]]; then
  NV=$GV_NVSHMEM
  [[ $NV == python ]] && NV="$(python3 -c 'import nvidia; print(nvidia.__path__[0])')/nvshmem"
  log "nvshmem_perf against $NV"
  echo "configure $(limited 90 "$OUT/build.log" cmake -S . -B build-nvshmem -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGPUVERBS_NVSHMEM_HOME="$NV")" | tee -a "$S"
  echo "build $(limited 180 "$OUT/build.log" cmake --build build-nvshmem -j16 --target nvshmem_perf nvshmem_ref_programs)" | tee -a "$S"
  grep -E " error" "$OUT/build.log" | head -10 | tee -a "$S"
  # The face's test programs as NVSHMEM runs them: what each expects is NVSHMEM's behaviour.
  echo "nvshmem_ref $(limited 120 "$OUT/nvshmem_ref.log" ctest --test-dir build-nvshmem -R nvshmem_ref --output-on-failure)" | tee -a "$S"
  grep -E "tests passed|\*\*\*Failed" "$OUT/nvshmem_ref.log" | tee -a "$S"
  # On one GPU the two PEs are two processes on it: without MPS their kernels take turns in
  # time slices of ~2 ms, and every ping-pong row measures the slice (seen: 2245 us for both).
  mps=
  if (( $(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l) == 1 )) && command -v nvidia-cuda-mps-control > /dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/gv-mps CUDA_MPS_LOG_DIRECTORY=/tmp/gv-mps-log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    nvidia-cuda-mps-control -d && mps=1
    log "one GPU: both PEs under MPS (started: ${mps:-no})"
  fi
  log "shmem_perf, two PEs: gpuverbs' face (gvrun) and NVSHMEM (mpirun)"
  echo "gv_shmem_perf $(limited 90 "$OUT/shmem.txt" $B/host_setup/gvrun -n 2 $B/bench/gv_shmem_perf --json "$OUT/shmem_gv.json")" | tee -a "$S"
  echo "nvshmem_perf $(limited 120 "$OUT/shmem.txt" env LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" \
    NVSHMEM_BOOTSTRAP=MPI NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_DISABLE_NVLS=1 \
    mpirun --allow-run-as-root --oversubscribe -n 2 -x LD_LIBRARY_PATH -x NVSHMEM_BOOTSTRAP \
    -x NVSHMEM_REMOTE_TRANSPORT -x NVSHMEM_DISABLE_NVLS build-nvshmem/bench/nvshmem_perf --json "$OUT/shmem_nv.json")" | tee -a "$S"
  if [[ -n $mps ]]; then echo quit | nvidia-cuda-mps-control; fi
  python3 bench/rma/compare.py "$OUT/shmem_gv.json" "$OUT/shmem_nv.json" "$OUT/rma.json" > "$OUT/shmem.md" 2>&1
  tee -a "$S" < "$OUT/shmem.md"
fi
log "done in ${SECONDS}s"
