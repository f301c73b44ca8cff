#!/usr/bin/env bash
# Validate the mlx5 provider on one ConnectX GPU node with one command: builds build/ (Release),
# then prints what it found (gv_devices), which doorbell mode the provider runs in (gv_devices
# --probe: the GPU writes the doorbell register, or a host thread rings it for the GPU), each nic
# test's verdict (ctest -L nic: host threads, the GPU verbs tests and the rma tests, each over a
# loopback pair of QPs on one port), and the GPU-controlled ping-pong over that port (server and
# client on this host, gv_gpu_verbs pingpong --provider mlx5).
#
#   bash scripts/nic_check.sh                      # the first mlx5 device with an ACTIVE port
#   bash scripts/nic_check.sh -d mlx5_1 -i 1 -x 3  # perftest's letters: device, port, GID index
#   bash scripts/nic_check.sh -h                   # this text
#
# -d/-i/-x set GV_IB_HCA, GV_IB_PORT and GV_IB_GID_INDEX, which every gpuverbs program honours.
# GV_MLX5_DOORBELL=proxy makes the host thread ring doorbells even where the GPU could.
# Exit status: 0 when every nic test passed, 1 when one failed (or the build did), 2 for a bad
# argument, 77 when this machine has no mlx5 device with an ACTIVE port (nothing was checked).
set -uo pipefail
GV_SCRIPT=nic_check
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GV_ROOT"

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    -d) [[ $# -ge 2 ]] || { echo "[nic_check] -d needs a device name" >&2; exit 2; }; export GV_IB_HCA=$2; shift 2 ;;
    -i) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "[nic_check] -i needs a port number" >&2; exit 2; }; export GV_IB_PORT=$2; shift 2 ;;
    -x) [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "[nic_check] -x needs a GID index" >&2; exit 2; }; export GV_IB_GID_INDEX=$2; shift 2 ;;
    *) echo "[nic_check] unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh || exit 1
mapfile -t cuda_args < <(gv_cuda_args)
gv_say "configure build/ (${GV_BUILD_TYPE})"
mkdir -p build
cmake -S . -B build -DCMAKE_BUILD_TYPE="$GV_BUILD_TYPE" "${cuda_args[@]}" >build/.configure.log 2>&1 ||
  { cat build/.configure.log; echo "[nic_check] FAILED: cmake configure"; exit 1; }
have=$(cmake --build build --target help 2>/dev/null || true)
targets=()
for t in gv_devices gv_has_nic test_nic_loopback test_soft_ops test_gpu_ib test_rma_host test_rma_gpu rma_rank \
         rma_rank_gpu gvrun gv_gpu_verbs; do
  grep -qw "$t" <<<"$have" && targets+=("$t")
done
if ! grep -qw gv_has_nic <<<"$have"; then
  echo "[nic_check] FAILED: this build has no mlx5 provider (rdma-core's libibverbs-dev not found; see build/.configure.log)"
  exit 1
fi
gv_say "build ${targets[*]} (-j${GV_JOBS})"
cmake --build build --target "${targets[@]}" -j "$GV_JOBS" >build/.build-nic.log 2>&1 ||
  { tail -50 build/.build-nic.log; echo "[nic_check] FAILED: build"; exit 1; }

gv_say "what this machine has (gv_devices)"
build/host_setup/gv_devices
if ! build/tests/nic/gv_has_nic; then
  gv_say "nothing checked: no mlx5 device with an ACTIVE port"
  exit 77
fi

gv_say "the mode the provider runs in for GPU kernels (gv_devices --probe)"
build/host_setup/gv_devices --probe "${GV_IB_HCA:-mlx5}" || echo "[nic_check] the probe failed (above): the nic tests below say more"

gv_say "nic tests (ctest -L nic): verdict of each"
(cd build && ctest -L nic --output-on-failure --timeout 300) | tee build/.nic-ctest.log
tests_rc=${PIPESTATUS[0]}
skipped=""
grep -q "tests did not run" build/.nic-ctest.log && skipped=" (some skipped: their reasons are above)"

pp_rc=0
if [[ -x build/bench/gv_gpu_verbs ]]; then
  gv_say "GPU-controlled ping-pong over the port: server and client on this host, 8 B, 10000 exchanges"
  port=$((20000 + RANDOM % 20000))
  build/bench/gv_gpu_verbs pingpong --provider mlx5 -s 8 -n 10000 -p "$port" >build/.nic-pingpong-server.log 2>&1 &
  server=$!
  build/bench/gv_gpu_verbs pingpong localhost --provider mlx5 -s 8 -n 10000 -p "$port"
  pp_rc=$?
  wait "$server" || { pp_rc=1; cat build/.nic-pingpong-server.log; }
else
  gv_say "no GPU-controlled ping-pong: this build has no gv_gpu_verbs (configured without nvcc)"
fi

gv_say "summary: nic tests $([[ $tests_rc -eq 0 ]] && echo "passed$skipped" || echo FAILED); ping-pong $([[ $pp_rc -eq 0 ]] && echo ran || echo FAILED)"
[[ $tests_rc -eq 0 && $pp_rc -eq 0 ]] && exit 0
exit 1
