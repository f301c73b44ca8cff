#!/usr/bin/env bash
# The main job: RDMA WRITE ping-pong, all sizes 8 B..4 MiB, printed as a perftest-style table.
# With a GPU (and gpuverbs built with nvcc) it is the GPU-controlled one: kernels post and poll,
# the software HCA's GPU engine executes, queues and buffers in GPU memory, one side on each of
# two GPUs when they reach each other (gv_gpu_verbs pingpong --mode gpu-qgpu). Without, host
# threads through the CPU engine (gv_pingpong), a CPU figure. It says which, and why.
#
#   bash scripts/run.sh                  # setup, configure build/ (Release), build, run -a
#   bash scripts/run.sh --json rows.json # extra arguments go to the benchmark (after -a, so
#   bash scripts/run.sh -s 64 -n 100000  #   -s overrides the size list)
#   bash scripts/run.sh -h               # this text, and the benchmarks' options
set -euo pipefail
GV_SCRIPT=run
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GV_ROOT"
for a in "$@"; do
  if [[ $a == -h || $a == --help ]]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    for b in gv_gpu_verbs gv_pingpong; do [[ -x build/bench/$b ]] && { echo; "build/bench/$b" --help; }; done
    exit 0
  fi
done

bash scripts/setup.sh
mapfile -t cuda_args < <(gv_cuda_args)
gv_say "configure build/ (${GV_BUILD_TYPE})"
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE="$GV_BUILD_TYPE" "${cuda_args[@]}" >build/.configure.log 2>&1 ||
  { cat build/.configure.log; echo "[run] FAILED: cmake configure"; exit 1; }
gv_say "looking for a GPU (builds gv_gpu_verbs when nvcc is there)"
pick=$(gv_pick_pingpong build) || { echo "[run] FAILED: building gv_gpu_verbs"; exit 1; }
if [[ $pick == gpu* ]]; then
  gv_say "GPU found (${pick#gpu }): the GPU-controlled ping-pong, gv_gpu_verbs pingpong --mode gpu-qgpu"
  gv_say "build/bench/gv_gpu_verbs pingpong --mode gpu-qgpu -a $*"
  exec build/bench/gv_gpu_verbs pingpong --mode gpu-qgpu -a "$@"
fi
gv_say "no GPU-controlled run here (${pick#cpu }): the CPU engine's ping-pong on host threads, gv_pingpong"
gv_say "build gv_pingpong (-j${GV_JOBS})"
cmake --build build --target gv_pingpong -j "$GV_JOBS"
gv_say "build/bench/gv_pingpong -a $*"
exec build/bench/gv_pingpong -a "$@"
