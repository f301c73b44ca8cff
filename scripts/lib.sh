# Shared by scripts/run.sh and scripts/test.sh (sourced, not run).

GV_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GV_JOBS=${GV_JOBS:-$(nproc)}
GV_BUILD_TYPE=${GV_BUILD_TYPE:-Release}

gv_say() { printf '\n[%s] %s\n' "${GV_SCRIPT:-gpuverbs}" "$*"; }

# CMake arguments that find nvcc where CI keeps it even when it is not on PATH.
gv_cuda_args() {
  if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    printf '%s\n' "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc"
  fi
}

# gv_pick_pingpong BUILD_DIR: which ping-pong is the main job here. Prints "gpu <why>" when
# gpuverbs was built with nvcc and `gv_gpu_verbs devices` finds a GPU, else "cpu <why>".
# Builds gv_gpu_verbs first when the build has it (a failed build is an error: status 1).
gv_pick_pingpong() {
  local b=$1 why targets
  targets=$(cmake --build "$b" --target help 2>/dev/null || true)  # whole, not into grep -q (pipefail)
  if ! grep -qw gv_gpu_verbs <<<"$targets"; then
    echo "cpu this build has no gv_gpu_verbs: configured without nvcc (or without benchmarks)"
    return 0
  fi
  cmake --build "$b" --target gv_gpu_verbs -j "$GV_JOBS" >"$b/.build-gv_gpu_verbs.log" 2>&1 ||
    { cat "$b/.build-gv_gpu_verbs.log" >&2; return 1; }
  if why=$("$b/bench/gv_gpu_verbs" devices 2>&1); then echo "gpu $why"; else echo "cpu ${why#gv_gpu_verbs: }"; fi
}
