#!/usr/bin/env bash
# Install what building and testing gpuverbs needs on Debian/Ubuntu, and nothing else.
#
#   bash scripts/setup.sh        # as root: installs missing packages; otherwise prints the command
#
# Quick and silent-ish when everything is present (dpkg-query / command -v only; apt-get
# update runs only when something is missing). nvcc is optional and never installed here:
# without it the CPU-only parts are built and GPU targets are skipped.
set -euo pipefail

# build-essential: g++ and make; libgtest-dev: GoogleTest (CMake config included);
# libibverbs-dev: rdma-core (<infiniband/mlx5dv.h>, which the unit tests compare against, and
# libibverbs + libmlx5, which the mlx5 provider links);
# libnuma-dev: NUMA-local queue placement; libbenchmark-dev: microbenchmarks;
# libopenmpi-dev, openmpi-bin: the World's MPI bootstrap and its mpirun tests;
# clang, libclang-rt-14-dev: libFuzzer and clang's sanitizer runtimes (scripts/test.sh fuzz).
# linux-headers-<version>-common (added below, its name carries the kernel version): the kernel's
# include/linux/mlx5/mlx5_ifc.h, which test_devx_prm reads to check our DEVX PRM field tables.
PKGS=(build-essential cmake pkg-config libgtest-dev libibverbs-dev libnuma-dev libbenchmark-dev libopenmpi-dev openmpi-bin
      clang libclang-rt-14-dev)
MIN_CMAKE=3.25

say() { printf '[setup] %s\n' "$*"; }

if ! command -v dpkg-query >/dev/null 2>&1; then
  say "not a Debian-based system: install by hand a C++20 compiler, CMake >= ${MIN_CMAKE}, GoogleTest,"
  say "rdma-core headers (infiniband/mlx5dv.h), libnuma and google-benchmark development packages"
  missing_tool=0
  for t in cmake c++; do command -v "$t" >/dev/null 2>&1 || { say "missing: $t"; missing_tool=1; }; done
  exit "$missing_tool"
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# Any version will do; take the newest the package lists offer when none is installed.
if ! compgen -G '/usr/src/linux-headers-*/include/linux/mlx5/mlx5_ifc.h' >/dev/null; then
  hdr=$(apt-cache search --names-only '^linux-headers-[0-9.]+-[0-9]+-common$' 2>/dev/null | cut -d' ' -f1 | sort -V | tail -1 || true)
  if [[ -z "$hdr" && $(id -u) -eq 0 ]]; then
    apt-get update -q >/dev/null
    hdr=$(apt-cache search --names-only '^linux-headers-[0-9.]+-[0-9]+-common$' | cut -d' ' -f1 | sort -V | tail -1 || true)
  fi
  if [[ -n "$hdr" ]]; then
    missing+=("$hdr")
  else
    say "no linux-headers-*-common package found: test_devx_prm will skip its mlx5_ifc.h check"
  fi
fi

if ((${#missing[@]})); then
  cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    say "missing packages: ${missing[*]}"
    say "run as root:  sudo sh -c '${cmd}'"
    exit 1
  fi
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# CMake >= 3.25 (Debian 12's is 3.25.1; older distributions need Kitware's packages or pip).
have=$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
if [[ "$(printf '%s\n%s\n' "$MIN_CMAKE" "$have" | sort -V | head -1)" != "$MIN_CMAKE" ]]; then
  say "cmake ${have} is too old: gpuverbs needs >= ${MIN_CMAKE} (e.g. pip install 'cmake>=${MIN_CMAKE}')"
  exit 1
fi

nvcc=$(command -v nvcc || true)
[[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
say "ok: ${PKGS[*]} present; cmake ${have}; nvcc: ${nvcc:-none (CPU-only build)}"
