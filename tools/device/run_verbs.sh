#!/usr/bin/env bash
# The verbs path on the GPU machine: build the verbs GPU targets, run the GPU tests (plus
# compute-sanitizer on a subset) and the verbs benchmarks. Everything lands in at most seven
# files under $OUT: summary.txt, build.log, tests.log, sanitizer.log, bench.txt, bench.json,
# and ncu.txt when GV_NCU is set.
#
# GV_BENCH names the benchmarks (default: postpoll anchors pingpong host-pingpong), from
#   postpoll anchors pingpong pingpong8 (every mode at 8 B only) bw msgrate msgrate-qgpu (its
#   gpu-qgpu rows only) atomics host-pingpong engine1 (the gpu-qgpu rows with both sides on
#   GPU 0) msgrate-warps (gpu-qgpu msgrate with 16 engine warps) drain
#   (the GPU engine's time per WQE with pre-posted WQEs, 4 and 16 engine warps)
# each run once, its table into bench.txt and its --json rows into bench.json. GV_SKIP_TESTS=1
# skips the tests and sanitizers (a second run, for more benchmarks). Every step has its
# own time limit, cut to what is left before GV_DEADLINE seconds into the script (default
# 470), and a step with less than 10 s left is skipped: the script ends within about 8 minutes.
# The JSON rows name the commit; in a copy of the tree without .git set GV_GIT_COMMIT (e.g. to
# the output of `git rev-parse --short=12 HEAD` where the copy came from). GV_BUILD_DIR (default
# build-dev) is the build tree; GV_PREBUILT=1 when it came built (tools/device/carry_build.sh).
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
DEADLINE=${GV_DEADLINE:-470}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$S"
BD=${GV_BUILD_DIR:-build-dev}
GPU_TESTS="test_gpu_ib test_gpu_engine test_gpu_engine_peers test_gpu_engine_hazards test_gpu_engine_lanes test_gpu_cpu_engine"
if [[ -z ${GV_PREBUILT:-} ]]; then
  cmake -S . -B $BD -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
  TARGETS="$GPU_TESTS gv_gpu_verbs gv_pingpong"
  # shellcheck disable=SC2086  # word splitting of the target lists is intended
  cmake --build $BD -j16 --target $TARGETS ${EXTRA_TARGETS:-} >> "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
fi

if [[ -z "${GV_SKIP_TESTS:-}" ]]; then
  : > "$OUT/tests.log"
  for t in $GPU_TESTS; do
    log "$t"
    echo "## $t" >> "$OUT/tests.log"
    echo "$t $(limited 240 "$OUT/tests.log" "$BD/tests/gpu/$t")" | tee -a "$S"
  done
  grep -E "PASSED|FAILED|SKIPPED|Failure" "$OUT/tests.log" | head -30 | tee -a "$S"
  # Not test_gpu_engine*: compute-sanitizer serialises kernels, and every test there needs the
  # resident engine to run beside the test's kernels (it hangs until the step's time limit).
  # Nor test_gpu_cpu_engine's two-engine atomics stress: under memcheck its 1600 copy-based
  # atomics outlast the kernels' bounded waits (run 7: a timeout, nothing else).
  for t in test_gpu_ib "test_gpu_cpu_engine --gtest_filter=-*LoseNothing"; do
    log "memcheck ($t)"
    # shellcheck disable=SC2086  # the test's name and filter split into words
    echo "memcheck $(limited 150 "$OUT/sanitizer.log" compute-sanitizer --tool memcheck --error-exitcode 9 \
      $BD/tests/gpu/$t)" | tee -a "$S"
    tail -3 "$OUT/sanitizer.log" | tee -a "$S"
  done
  if [[ -n "${GV_RACECHECK:-}" ]]; then
    log "racecheck (shared and warp posting)"
    echo "racecheck $(limited 90 "$OUT/sanitizer.log" compute-sanitizer --tool racecheck --error-exitcode 9 \
      $BD/tests/gpu/test_gpu_ib --gtest_filter='GpuPostShared.*:Modes/*Warp*')" | tee -a "$S"
    tail -3 "$OUT/sanitizer.log" | tee -a "$S"
  fi
fi

B="$OUT/bench.txt"; J="$OUT/bench.json"
V=$BD/bench/gv_gpu_verbs
# run LIMIT CMD...: the table into bench.txt, the JSON rows (after one naming the run) into bench.json.
run() {
  local limit=$1; shift
  local t; t=$(budget "$limit")
  if (( t < 10 )); then echo "\$ $*: skipped (out of time)" >> "$B"; return; fi
  echo "\$ $* --json $J" >> "$B"
  timeout "$t" "$@" --json "$J" >> "$B" 2>&1
  echo "rc=$?" >> "$B"
}
log "benchmarks: ${GV_BENCH:-postpoll anchors pingpong host-pingpong}"
for b in ${GV_BENCH:-postpoll anchors pingpong host-pingpong}; do
  case $b in
    postpoll) run 60 $V postpoll -n 500 ;;
    engine1) run 90 $V pingpong -a -n 1000 --mode gpu-qgpu --gpus 1
             run 40 $V msgrate -n 20000 --mode gpu-qgpu --gpus 1
             run 30 $V atomics -n 2000 --mode gpu-qgpu --gpus 1 ;;
    anchors) run 60 $V anchors -n 20000 ;;
    pingpong) run 150 $V pingpong -a -n 1000 ;;
    pingpong8) run 60 $V pingpong -s 8 -n 1000 ;;
    bw) run 120 $V bw -a -n 5000 ;;
    msgrate) run 120 $V msgrate -n 20000 ;;
    msgrate-qgpu) run 60 $V msgrate -n 20000 --mode gpu-qgpu ;;
    msgrate-warps) run 60 $V msgrate -n 20000 --mode gpu-qgpu --engine-warps 16 ;;
    drain) run 60 $V drain
           run 60 $V drain --engine-warps 16 ;;
    atomics) run 60 $V atomics -n 2000 ;;
    host-pingpong) run 60 $BD/bench/gv_pingpong -a -n 1000 ;;
    *) echo "unknown benchmark $b" | tee -a "$S" ;;
  esac
done
cat "$B" | tee -a "$S"
if [[ -n "${GV_NCU:-}" ]]; then
  log "ncu: post_cost_kernel (one launch of each mode)"
  echo "ncu $(limited 120 "$OUT/ncu.txt" ncu --clock-control none --kernel-name post_cost_kernel --launch-count 8 \
      --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      $V postpoll -n 100 --no-engine)" | tee -a "$S"
  grep -E "Stall|Warp Cycles Per Issued|Issued Warp|L2 Hit|post_cost" "$OUT/ncu.txt" | head -60
fi
