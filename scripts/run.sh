#!/usr/bin/env bash
# The main job: RDMA WRITE ping-pong over the software HCA's CPU engine, all sizes 8 B..4 MiB,
# printed as a perftest-style table.
#
#   bash scripts/run.sh                  # setup, configure build/ (Release), build, run -a
#   bash scripts/run.sh --json           # extra arguments go to gv_pingpong (after -a, so
#   bash scripts/run.sh -s 64 -n 100000  #   -s overrides the size list)
#   bash scripts/run.sh -h               # this text, and the benchmark's options
set -euo pipefail
GV_SCRIPT=run
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GV_ROOT"
for a in "$@"; do
  if [[ $a == -h || $a == --help ]]; then
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    [[ -x build/bench/gv_pingpong ]] && { echo; build/bench/gv_pingpong --help; }
    exit 0
  fi
done

bash scripts/setup.sh
mapfile -t cuda_args < <(gv_cuda_args)
gv_say "configure build/ (${GV_BUILD_TYPE})"
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE="$GV_BUILD_TYPE" "${cuda_args[@]}" >build/.configure.log 2>&1 ||
  { cat build/.configure.log; echo "[run] FAILED: cmake configure"; exit 1; }
gv_say "build gv_pingpong (-j${GV_JOBS})"
cmake --build build --target gv_pingpong -j "$GV_JOBS"
gv_say "build/bench/gv_pingpong -a $*"
exec build/bench/gv_pingpong -a "$@"
