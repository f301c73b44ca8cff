#!/usr/bin/env bash
# On the GPU machine, over a tree built elsewhere and copied there (tools/device/carry_build.sh),
# running the device scripts one after another, each under its own deadline, with no build
# there. GV_PARTS (default "tests rma himeno verbs") picks, in order, among
#   tests   tools/device/run_all.sh: every GPU test (rma with ib and mpirun, NVSHMEM face,
#           samples, Himeno, verbs) and a short gv_rma table
#   rma     tools/device/run_rma.sh: gv_rma over p2p and ib, shmem_perf beside NVSHMEM
#   himeno  tools/device/run_himeno_multi.sh: himeno_bench, every mode and size
#   verbs   tools/device/run_verbs.sh: the verbs benchmarks (GV_BENCH)
# and GV_SECONDS_<part> gives each its deadline (defaults: tests 330, rma 240, himeno 240,
# verbs 150). GV_CARRIED (default build-gpu.tgz) is the carried tree (tools/device/carry_build.sh),
# unpacked where it was built, GV_BUILD_DIR (default build-gpu): its ctest files name that path. Every
# part's files are packed into $OUT/logs.tgz (one folder per part, so that few files come back)
# and their summaries joined in $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
mkdir -p "$OUT"
export GV_BUILD_DIR=${GV_BUILD_DIR:-build-gpu} GV_PREBUILT=1
carried=${GV_CARRIED:-build-gpu.tgz}
if [[ -f $carried ]]; then
  rm -rf "$GV_BUILD_DIR" && tar -xzf "$carried"
fi
[[ -d $GV_BUILD_DIR ]] || { echo "run_carried: no $GV_BUILD_DIR and no $carried (tools/device/carry_build.sh)"; exit 1; }
[[ -n ${GV_GIT_COMMIT:-} ]] || echo "run_carried: GV_GIT_COMMIT unset: the JSON rows name no commit"

part() {  # part NAME SCRIPT DEFAULT_SECONDS [VAR=VALUE...]
  local name=$1 script=$2 secs=$3; shift 3
  local var="GV_SECONDS_$name"
  echo "=== $name (${!var:-$secs} s) ===" | tee -a "$OUT/summary.txt"
  env OUT="$OUT/$name" GV_DEADLINE="${!var:-$secs}" "$@" bash "$script" > "$OUT/$name.console" 2>&1
  echo "rc=$?" >> "$OUT/$name.console"
  mv "$OUT/$name.console" "$OUT/$name/console.txt" 2>/dev/null
  cat "$OUT/$name/summary.txt" >> "$OUT/summary.txt" 2>/dev/null
}
for p in ${GV_PARTS:-tests rma himeno verbs}; do
  case $p in
    tests) part tests tools/device/run_all.sh 330 GV_STEPS="ctest himeno rma verbs" ;;
    rma) part rma tools/device/run_rma.sh 240 GV_SKIP_TESTS=1 ;;
    himeno) part himeno tools/device/run_himeno_multi.sh 240 GV_SKIP_TESTS=1 ;;
    verbs) part verbs tools/device/run_verbs.sh 150 GV_SKIP_TESTS=1 ;;
    *) echo "run_carried: unknown part $p (tests rma himeno verbs)" | tee -a "$OUT/summary.txt" ;;
  esac
done
tar -C "$OUT" -czf "$OUT/logs.tgz" --exclude=logs.tgz --exclude=summary.txt .
find "$OUT" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
rm -f "$OUT"/*.console
