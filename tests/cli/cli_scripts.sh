# scripts/test.sh and scripts/run.sh: -h prints the usage and exits 0 without building or
# testing anything; test.sh refuses unknown arguments and stages before it starts; run.sh's
# choice of main job (gv_pick_pingpong) says which ping-pong and why; the scripts of
# tools/device/ parse and find what they source.
#   bash cli_scripts.sh <source root> <build dir> <1 if the build has gv_gpu_verbs, else 0>
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
root=$1 build=$2 has_gpu_bench=$3
expect 0 "Stages:.*" bash "$root/scripts/test.sh" -h
expect 0 "consumer +install build/" bash "$root/scripts/test.sh" --help
expect 2 "unknown argument '--bogus'.*stages: setup build ctest asan tsan consumer" bash "$root/scripts/test.sh" --bogus
expect 2 "unknown stage 'ctst'" bash "$root/scripts/test.sh" ctest ctst
expect 0 "The main job" bash "$root/scripts/run.sh" -h
expect 0 "Validate the mlx5 provider.*GV_IB_GID_INDEX" bash "$root/scripts/nic_check.sh" -h
expect 2 "unknown argument -q" bash "$root/scripts/nic_check.sh" -q
expect 2 "-i needs a port number" bash "$root/scripts/nic_check.sh" -i one
# The GPU-machine scripts (tools/device/): each parses as bash; ab_engine's usage comes after it
# has sourced lib.sh beside it; carry_build refuses a folder that is no build tree.
for f in "$root"/tools/device/*.sh; do expect 0 "^parsed" bash -c 'bash -n "$1" && echo parsed' _ "$f"; done
gv_out=$(mktemp -d)
expect 0 "the same gv_gpu_verbs commands" env OUT="$gv_out" bash "$root/tools/device/ab_engine.sh" -h
expect 1 "is not a CMake build tree" bash "$root/tools/device/carry_build.sh" "$gv_out" "$gv_out/x.tgz"
rm -rf "$gv_out"
# bench/rma/compare.py: a rate row whose whole range lies below NVSHMEM's is "slower", one whose
# range overlaps NVSHMEM's "within", and a latency row (no range) says nothing of ranges.
cmp_dir=$(mktemp -d)
bw_row() {  # bw_row CTAS MEDIAN LO HI: one shmem_perf bandwidth row at 64 KiB
  printf '{"bench":"shmem_perf","test":"bw","variant":"%scta","samples":7,"lo":%s,"hi":%s,"bytes":65536,"iters":200,"bw_gbs":%s,"mmsgs":0}\n' \
    "$1" "$3" "$4" "$2"
}
p_row() { printf '{"bench":"shmem_perf","test":"p","scope":"thread","bytes":8,"iters":1000,"t_typical":%s}\n' "$1"; }
{ echo '{"bench":"metadata","device":"test"}'; bw_row 8 93 90 95; bw_row 32 99 96 101; p_row 0.39; } > "$cmp_dir/gv.json"
{ echo '{"bench":"metadata","device":"test"}'; bw_row 8 98 96 100; bw_row 32 99 98 100; p_row 0.87; } > "$cmp_dir/nv.json"
expect 0 "\| bw \| 8cta \| 65536 \| GB/s \| 93.00 \(90.00-95.00\) \| 98.00 \(96.00-100.00\) \| 0.95 \| slower \|.*\| bw \| 32cta \| 65536 \| GB/s \| 99.00 \(96.00-101.00\) \| 99.00 \(98.00-100.00\) \| 1.00 \| within \|.*\| p \| thread \| 8 \| us \(typical\) \| 0.39 \| 0.87 \| 0.45 \| — \|" \
  python3 "$root/bench/rma/compare.py" "$cmp_dir/gv.json" "$cmp_dir/nv.json"
rm -rf "$cmp_dir"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  if ((has_gpu_bench)); then want="no NVIDIA GPU or driver found"; else want="this build has no gv_gpu_verbs"; fi
  expect 0 "^cpu $want" \
    bash -c "set -euo pipefail; source '$root/scripts/lib.sh' && gv_pick_pingpong '$build'"
else
  expect 0 "^gpu [0-9]+ GPU" bash -c "set -euo pipefail; source '$root/scripts/lib.sh' && gv_pick_pingpong '$build'"
fi
finish
