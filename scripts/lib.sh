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
